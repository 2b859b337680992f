package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shadowgate/shadowgate/devices"
)

// openDrivers builds every configured driver, opens it and adds it to a
// new registry. The returned close releases every driver that was opened,
// in reverse order; call it even when openDrivers fails.
func openDrivers(ctx context.Context, cfg *Built, stateDir string, log *slog.Logger) (*devices.Registry, func() error, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := devices.NewRegistry()
	var opened []devices.Driver
	closeAll := func() error {
		var err error
		for i := len(opened) - 1; i >= 0; i-- {
			err = errors.Join(err, opened[i].Close())
		}
		return err
	}
	for _, dc := range cfg.Drivers {
		if dc.build == nil {
			return reg, closeAll, fmt.Errorf("driver %s: not configured (build the configuration with Load)", dc.Name)
		}
		var devs []devices.Device
		for _, d := range cfg.Devices {
			if d.Driver == dc.Name {
				devs = append(devs, d)
			}
		}
		drv, err := dc.build(devices.Env{StateDir: stateDir, Devices: devs,
			Logger: log.With("driver", dc.Name, "driver_type", dc.Type)})
		if err != nil {
			return reg, closeAll, fmt.Errorf("driver %s: %w", dc.Name, err)
		}
		if err := drv.Open(ctx); err != nil {
			return reg, closeAll, fmt.Errorf("opening driver %s: %w", dc.Name, err)
		}
		opened = append(opened, drv)
		if err := reg.Add(dc.Name, drv); err != nil {
			return reg, closeAll, err
		}
	}
	return reg, closeAll, nil
}
