package line

import (
	"log/slog"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	"github.com/shadowgate/shadowgate/value"
)

// Type is the line driver's type in configuration files.
const Type = "line"

func init() {
	devices.Register(devices.Factory{Type: Type, Configure: configure})
}

// Config is a line driver's options, under the key line of its entry:
//
//	drivers:
//	  - name: arduino
//	    type: line
//	    line:
//	      port: /dev/ttyACM0
//	      baud: 115200      # the default
//	      timeout: 500ms    # for each request; the default
//	      discover: true    # check the devices against the firmware's INFO
//
// A device's address is the name the firmware gives the capability
// ("relay"); the device has that one capability.
type Config struct {
	port.Config `yaml:",inline"`
	// Timeout bounds the wait for each reply.
	Timeout string `yaml:"timeout"`
	// Discover asks the firmware what it has (INFO) at every connection and
	// checks each device against it: a device the firmware does not have,
	// or has as another kind or type, is not offered, and why is said.
	Discover bool `yaml:"discover"`
}

// DefaultTimeout is how long a request waits for its reply by default.
const DefaultTimeout = 500 * time.Millisecond

// configure is the line driver's devices.Factory.Configure.
func configure(in devices.Instance, devs []devices.Device) devices.Builder {
	var cfg Config
	ok := in.Decode(&cfg)
	settings, portOK := cfg.Config.Check(in.Options(), 115200)
	ok = ok && portOK && in.Claim("serial port", settings.Path, in.Options().At("port"))
	timeout := DefaultTimeout
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		if err != nil || d <= 0 || d > time.Minute {
			in.Options().At("timeout").Errorf("%q is not a duration between 1ms and 1m (write it like 500ms or 2s)", cfg.Timeout)
			ok = false
		}
		timeout = d
	}
	for i := range devs {
		d := &devs[i]
		if !ValidName(d.Address) {
			in.Device(i).At("address").Errorf("%q is not a capability name of the line protocol (1 to 32 of A-Z a-z 0-9 _ -): the address is the name the firmware gives it, like relay", d.Address)
			ok = false
		}
		if len(d.Capabilities) != 1 {
			in.Device(i).At("capabilities").Errorf("a device on the line protocol has one capability, the firmware's %s; define a device for each", d.Address)
			ok = false
			continue
		}
		if t := d.Capabilities[0].Type; t != value.TypeBool && t != value.TypeNumber && t != value.TypeEnum {
			in.Device(i).At("capabilities").Index(0).At("type").Errorf("the line protocol carries bool, number and enum, not %s", t)
			ok = false
		}
		for k, e := range d.Capabilities[0].Enum {
			if !ValidValue(e) {
				in.Device(i).At("capabilities").Index(0).At("enum").Index(k).Errorf("%q cannot be sent on the line protocol (1 to 64 of A-Z a-z 0-9 _ - . +)", e)
				ok = false
			}
		}
		// The floor is the zero Floor: a line on a USB cable leaves nothing
		// of its own; what the firmware drives is declared in effects.
		d.Capabilities[0].Floor = devices.Floor{}
	}
	if !ok {
		return nil
	}
	return func(env devices.Env) (devices.Driver, error) {
		log, _ := env.Logger.(*slog.Logger)
		return New(Options{Name: in.Name(), Port: settings, Timeout: timeout, Discover: cfg.Discover, Devices: env.Devices, Logger: log}), nil
	}
}
