package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
)

// openDrivers builds every configured driver, opens it and adds it to a
// new registry. The returned close releases every driver that was opened,
// in reverse order; call it even when openDrivers fails.
func openDrivers(ctx context.Context, cfg *Built, stateDir string) (*devices.Registry, func() error, error) {
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
		var devs []devices.Device
		for _, d := range cfg.Devices {
			if d.Driver == dc.Name {
				devs = append(devs, d)
			}
		}
		drv, err := newDriver(dc, devs, cfg.Sim[dc.Name], stateDir)
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

func newDriver(dc DriverConfig, devs []devices.Device, so sim.Options, stateDir string) (devices.Driver, error) {
	switch dc.Type {
	case "sim":
		so.Devices = devs
		if so.StateFile != "" && !filepath.IsAbs(so.StateFile) {
			so.StateFile = filepath.Join(stateDir, so.StateFile)
		}
		return sim.New(so)
	}
	return nil, fmt.Errorf("unknown driver type %q", dc.Type)
}
