package gpio

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Type is the driver type of GPIO lines in configuration files.
const Type = "gpio"

func init() {
	devices.Register(devices.Factory{Type: Type, Configure: configure})
}

// Config is a gpio driver's options in the configuration file, under the
// key gpio of the driver's entry:
//
//	drivers:
//	  - name: pi
//	    type: gpio
//	    gpio:
//	      lines:
//	        pump-relay: {initial: false}
//	        pump-fb:    {pull: down, debounce: 30ms}
//	        float-1:    {pull: down, edge: none, poll: 200ms}
//
// A device without an entry takes the defaults.
type Config struct {
	// Lines are the lines' settings, by device id.
	Lines map[string]LineConfig `yaml:"lines"`
}

// LineConfig is one line's settings as written in the configuration file.
// Durations are written like 30ms, 2s or 1m, and must be positive.
type LineConfig struct {
	// ActiveLow inverts the line: true is the low level. For an output
	// and an input alike.
	ActiveLow bool `yaml:"active_low"`
	// Initial is an output's value at open. Without it the line keeps the
	// level it has.
	Initial *bool `yaml:"initial"`
	// Pull is an input's bias: up, down or none (the default).
	Pull string `yaml:"pull"`
	// Debounce is how long an input must stay quiet before its level is
	// reported. Default 20ms.
	Debounce string `yaml:"debounce"`
	// Edge is both (the default: wait for edges) or none (poll).
	Edge string `yaml:"edge"`
	// Poll is how often an input is read when it is polled: with edge none,
	// or when its chip cannot tell of edges. Default 100ms.
	Poll string `yaml:"poll"`
}

// configure is the gpio driver's devices.Factory.Configure. It does no
// I/O: which pins exist is known only at Open.
func configure(in devices.Instance, devs []devices.Device) devices.Builder {
	var cfg Config
	ok := in.Decode(&cfg)
	byID := map[string]int{}
	byAddr := map[string][]int{}
	for i := range devs {
		d := &devs[i]
		byID[d.ID] = i
		byAddr[d.Address] = append(byAddr[d.Address], i)
		if !checkDevice(in.Device(i), d) {
			ok = false
		}
		if d.Address != "" && !in.Claim("GPIO line", d.Address, in.Device(i).At("address")) {
			ok = false
		}
		for k := range d.Capabilities {
			// A line leaves nothing of its own: what it switches is for
			// the configuration to declare.
			d.Capabilities[k].Floor = devices.Floor{}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(byAddr)) {
		same := byAddr[addr]
		if len(same) < 2 {
			continue
		}
		ok = false
		for _, i := range same {
			var others []string
			for _, j := range same {
				if j != i {
					others = append(others, devs[j].ID)
				}
			}
			in.Device(i).At("address").Errorf("gpio device %s: pin %s is also the address of %s; one line is one device", devs[i].ID, addr, strings.Join(others, ", "))
		}
	}
	lines := map[string]Line{}
	for _, id := range slices.Sorted(maps.Keys(cfg.Lines)) {
		at := in.Options().At("lines").At(id)
		i, known := byID[id]
		if !known {
			at.Errorf("no device %s on driver %s", id, in.Name())
			ok = false
			continue
		}
		l, good := checkLine(at, &devs[i], cfg.Lines[id])
		ok = ok && good
		lines[id] = l
	}
	if !ok {
		return nil
	}
	return func(env devices.Env) (devices.Driver, error) {
		return New(Options{Devices: env.Devices, Lines: lines, Logger: env.Logger})
	}
}

// checkDevice reports at at whether d is one line: exactly one bool
// capability.
func checkDevice(at devices.Place, d *devices.Device) bool {
	if n := len(d.Capabilities); n != 1 {
		at.At("capabilities").Errorf("gpio device %s has %d capabilities; a GPIO line is one bool capability (make a device per line)", d.ID, n)
		return false
	}
	if c := d.Capabilities[0]; c.Type != value.TypeBool {
		at.At("capabilities").Index(0).At("type").Errorf("gpio device %s: capability %s is a %s; a GPIO line is a bool", d.ID, c.Name, c.Type)
		return false
	}
	return true
}

// checkLine checks one line's settings against its device's kind and
// reports each problem at its key.
func checkLine(at devices.Place, d *devices.Device, lc LineConfig) (Line, bool) {
	ok := true
	bad := func(key, format string, args ...any) {
		at.At(key).Errorf(format, args...)
		ok = false
	}
	l := Line{ActiveLow: lc.ActiveLow, Initial: lc.Initial}
	output := len(d.Capabilities) > 0 && d.Capabilities[0].Kind == devices.KindActuator
	if output {
		for _, o := range []struct{ key, v string }{{"pull", lc.Pull}, {"debounce", lc.Debounce}, {"edge", lc.Edge}, {"poll", lc.Poll}} {
			if o.v != "" {
				bad(o.key, "%s is for an input; %s is an output (an actuator)", o.key, d.ID)
			}
		}
		return l, ok
	}
	if lc.Initial != nil {
		bad("initial", "initial is for an output; %s is an input (a sensor)", d.ID)
	}
	switch lc.Pull {
	case "", "none":
		l.Pull = PullNone
	case "up":
		l.Pull = PullUp
	case "down":
		l.Pull = PullDown
	default:
		bad("pull", "%q is not a pull (want up, down or none)", lc.Pull)
	}
	switch lc.Edge {
	case "", "both":
	case "none":
		l.NoEdges = true
	default:
		bad("edge", "%q is not an edge setting (want both, or none to poll)", lc.Edge)
	}
	for _, o := range []struct {
		key, v string
		to     *time.Duration
	}{{"debounce", lc.Debounce, &l.Debounce}, {"poll", lc.Poll, &l.Poll}} {
		if o.v == "" {
			continue
		}
		v, err := time.ParseDuration(o.v)
		if err != nil || v <= 0 {
			bad(o.key, "%q is not a positive duration (write it like 20ms or 1s)", o.v)
			continue
		}
		*o.to = v
	}
	return l, ok
}

// String names the pull as the configuration does.
func (p Pull) String() string {
	switch p {
	case PullUp:
		return "up"
	case PullDown:
		return "down"
	case PullNone:
		return "none"
	}
	return fmt.Sprintf("Pull(%d)", uint8(p))
}
