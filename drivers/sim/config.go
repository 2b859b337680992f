package sim

import (
	"errors"
	"path/filepath"
	"slices"
	"time"

	"github.com/shadowgate/shadowgate/devices"
)

// Type is the driver type of the simulator in configuration files.
const Type = "sim"

func init() {
	devices.Register(devices.Factory{Type: Type, Configure: configure})
}

// Config is a sim driver's options in the configuration file, under the
// key sim of the driver's entry:
//
//	drivers:
//	  - name: sim
//	    type: sim
//	    sim:
//	      state_file: world.json
//	      faults:
//	        valve-1: {ack_delay: 1h}
type Config struct {
	// StateFile keeps the simulated world across restarts of the gateway,
	// as real hardware would be. A relative path is in the state directory.
	StateFile string `yaml:"state_file"`
	// Faults rehearse failures without hardware, by device id.
	Faults map[string]FaultConfig `yaml:"faults"`
}

// FaultConfig is a fault injected into one simulated device: Fault as
// written in the configuration file.
type FaultConfig struct {
	// Offline removes the device.
	Offline bool `yaml:"offline"`
	// Stuck makes writes succeed without moving the actuator.
	Stuck bool `yaml:"stuck"`
	// WriteDelay delays a write before it takes effect; AckDelay delays the
	// answer after it took effect; ReadDelay delays reads. Durations are
	// written like 30s, 5m or 2h.
	WriteDelay string `yaml:"write_delay"`
	AckDelay   string `yaml:"ack_delay"`
	ReadDelay  string `yaml:"read_delay"`
	// LostAck makes a write that took effect answer "outcome unknown", as
	// a device whose acknowledgement never came.
	LostAck bool `yaml:"lost_ack"`
	// Travel makes an actuator slow: a write is acknowledged at once and
	// takes effect after this long. Returns makes it go back to where it
	// was this long after a write took effect.
	Travel  string `yaml:"travel"`
	Returns string `yaml:"returns"`
	// WriteError and ReadError make calls fail with this message.
	WriteError string `yaml:"write_error"`
	ReadError  string `yaml:"read_error"`
}

// floor is the effect each element's capability has whatever the
// configuration declares, from what the element is. The pump spends the
// energy that runs it and, with the valve open, the tank's water (12 L/min
// out of 200 L that only the supply refills); the heater spends energy to
// warm the air, and so does the thermostat, whose setpoint sets how much
// the heater runs. Nothing the simulator does leaves this machine, every
// change can be put back (the tank refills, the air cools) and the physics
// are bounded (a tank between empty and full, air between ambient and the
// heater's 30 °C): no element reaches, is irreversible or is uncontained.
// The valve and the vent spend nothing of their own; the sensors change
// nothing.
func floor(address string) devices.Floor {
	switch address {
	case "pump", "heater", "thermostat":
		return devices.Floor{Costs: true}
	}
	return devices.Floor{}
}

// configure is the simulator's devices.Factory.Configure.
func configure(in devices.Instance, devs []devices.Device) devices.Builder {
	var cfg Config
	ok := in.Decode(&cfg)
	on := map[string]bool{}
	for i := range devs {
		d := &devs[i]
		on[d.ID] = true
		if k, err := check(*d); err != nil {
			at := in.Device(i).At("address")
			if k >= 0 {
				at = in.Device(i).At("capabilities").Index(k)
			}
			at.Errorf("%v", err)
			ok = false
			continue
		}
		for k := range d.Capabilities {
			d.Capabilities[k].Floor = floor(d.Address)
		}
	}
	faults := map[string]Fault{}
	ids := make([]string, 0, len(cfg.Faults))
	for id := range cfg.Faults {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fc, at := cfg.Faults[id], in.Options().At("faults").At(id)
		if !on[id] {
			at.Errorf("no device %s on driver %s", id, in.Name())
			ok = false
			continue
		}
		f := Fault{Offline: fc.Offline, Stuck: fc.Stuck, LostAck: fc.LostAck}
		for _, d := range []struct {
			key string
			s   string
			to  *time.Duration
		}{{"write_delay", fc.WriteDelay, &f.WriteDelay}, {"ack_delay", fc.AckDelay, &f.AckDelay}, {"read_delay", fc.ReadDelay, &f.ReadDelay},
			{"travel", fc.Travel, &f.Travel}, {"returns", fc.Returns, &f.Returns}} {
			if d.s == "" {
				continue
			}
			v, err := time.ParseDuration(d.s)
			if err != nil || v <= 0 {
				at.At(d.key).Errorf("%q is not a positive duration (write it like 30s, 5m or 2h)", d.s)
				ok = false
			}
			*d.to = v
		}
		if fc.WriteError != "" {
			f.WriteErr = errors.New(fc.WriteError)
		}
		if fc.ReadError != "" {
			f.ReadErr = errors.New(fc.ReadError)
		}
		faults[id] = f
	}
	if !ok {
		return nil
	}
	return func(env devices.Env) (devices.Driver, error) {
		state := cfg.StateFile
		if state != "" && !filepath.IsAbs(state) {
			state = filepath.Join(env.StateDir, state)
		}
		return New(Options{Devices: env.Devices, StateFile: state, Faults: faults})
	}
}
