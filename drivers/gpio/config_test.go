package gpio

import (
	"slices"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/value"
)

// actuator is a device on pin with one bool actuator "on".
func actuator(id, pin string) devices.Device {
	return devices.Device{ID: id, Driver: "pi", Address: pin, Capabilities: []devices.Capability{
		{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}}
}

// sensor is a device on pin with one bool sensor "state".
func sensor(id, pin string) devices.Device {
	return devices.Device{ID: id, Driver: "pi", Address: pin, Capabilities: []devices.Capability{
		{Name: "state", Kind: devices.KindSensor, Type: value.TypeBool}}}
}

func ptr[T any](v T) *T { return &v }

func TestRegisteredAsGPIO(t *testing.T) {
	f, ok := devices.LookupFactory(Type)
	if !ok || f.Type != "gpio" || f.Configure == nil {
		t.Fatalf("LookupFactory(%q) = %+v, %v", Type, f, ok)
	}
}

// A good configuration builds a driver whose lines have the settings given,
// and every capability has the zero floor.
func TestConfigureBuilds(t *testing.T) {
	devs := []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27"), sensor("float-1", "GPIO22")}
	devs[0].Capabilities[0].Floor = devices.Floor{Costs: true, Reaches: true}
	in := &devicetest.Config{Driver: "pi", Settings: &Config{Lines: map[string]LineConfig{
		"pump-relay": {ActiveLow: true, Initial: ptr(false)},
		"pump-fb":    {Pull: "up", Debounce: "30ms"},
		"float-1":    {Pull: "down", Edge: "none", Poll: "200ms"},
	}}}
	b := configure(in, devs)
	if b == nil || in.Problems() != nil {
		t.Fatalf("configure built %v, problems %q", b != nil, in.Problems())
	}
	for _, d := range devs {
		if f := d.Capabilities[0].Floor; f != (devices.Floor{}) {
			t.Errorf("the floor of %s = %+v, want the zero floor", d.ID, f)
		}
	}
	drv, err := b(devices.Env{StateDir: t.TempDir(), Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	g := drv.(*Driver)
	want := map[string]Line{
		"pump-relay": {ActiveLow: true, Initial: g.byID["pump-relay"].cfg.Initial, Debounce: defaultDebounce, Poll: defaultPoll},
		"pump-fb":    {Pull: PullUp, Debounce: 30 * time.Millisecond, Poll: defaultPoll},
		"float-1":    {Pull: PullDown, NoEdges: true, Debounce: defaultDebounce, Poll: 200 * time.Millisecond},
	}
	for id, w := range want {
		l := g.byID[id]
		if l == nil || l.cfg != w {
			t.Errorf("line %s = %+v, want %+v", id, l, w)
		}
	}
	if in := g.byID["pump-relay"].cfg.Initial; in == nil || *in {
		t.Errorf("the relay's initial = %v, want false", in)
	}
	if !g.byID["pump-relay"].output || g.byID["pump-fb"].output {
		t.Error("the actuator is not an output, or the sensor is not an input")
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close of a driver never opened = %v", err)
	}
}

// Every problem is reported at its place, and nothing is built.
func TestConfigureReportsEveryProblemAtItsPlace(t *testing.T) {
	two := actuator("twin", "GPIO5")
	two.Capabilities = append(two.Capabilities, devices.Capability{Name: "off", Kind: devices.KindActuator, Type: value.TypeBool})
	num := sensor("level", "GPIO6")
	num.Capabilities[0].Type = value.TypeNumber
	devs := []devices.Device{
		actuator("pump-relay", "GPIO17"), // 0
		sensor("pump-fb", "GPIO27"),      // 1
		two,                              // 2
		num,                              // 3
		sensor("float-1", "GPIO17"),      // 4: pump-relay's pin
		sensor("float-2", "GPIO22"),      // 5
	}
	in := &devicetest.Config{Driver: "pi", Settings: &Config{Lines: map[string]LineConfig{
		"pump-relay": {Pull: "up", Debounce: "30ms", Edge: "none", Poll: "1s", ActiveLow: true},
		"pump-fb":    {Initial: ptr(true), Pull: "sideways", Edge: "rising", Debounce: "-1s", Poll: "forever"},
		"float-2":    {Debounce: "0s"},
		"ghost":      {Pull: "up"},
	}}}
	if b := configure(in, devs); b != nil {
		t.Fatal("configure built a driver from a bad configuration")
	}
	want := []string{
		`devices[2].capabilities: gpio device twin has 2 capabilities; a GPIO line is one bool capability (make a device per line)`,
		`devices[3].capabilities[0].type: gpio device level: capability state is a number; a GPIO line is a bool`,
		`devices[0].address: gpio device pump-relay: pin GPIO17 is also the address of float-1; one line is one device`,
		`devices[4].address: gpio device float-1: pin GPIO17 is also the address of pump-relay; one line is one device`,
		`options.lines.float-2.debounce: "0s" is not a positive duration (write it like 20ms or 1s)`,
		`options.lines.ghost: no device ghost on driver pi`,
		`options.lines.pump-fb.initial: initial is for an output; pump-fb is an input (a sensor)`,
		`options.lines.pump-fb.pull: "sideways" is not a pull (want up, down or none)`,
		`options.lines.pump-fb.edge: "rising" is not an edge setting (want both, or none to poll)`,
		`options.lines.pump-fb.debounce: "-1s" is not a positive duration (write it like 20ms or 1s)`,
		`options.lines.pump-fb.poll: "forever" is not a positive duration (write it like 20ms or 1s)`,
		`options.lines.pump-relay.pull: pull is for an input; pump-relay is an output (an actuator)`,
		`options.lines.pump-relay.debounce: debounce is for an input; pump-relay is an output (an actuator)`,
		`options.lines.pump-relay.edge: edge is for an input; pump-relay is an output (an actuator)`,
		`options.lines.pump-relay.poll: poll is for an input; pump-relay is an output (an actuator)`,
	}
	if got := in.Problems(); !slices.Equal(got, want) {
		t.Fatalf("problems\n  %q\nwant\n  %q", got, want)
	}
}

// New refuses what Configure would have reported, for a caller that builds
// the driver without a configuration.
func TestNewChecksTheDevices(t *testing.T) {
	num := sensor("level", "GPIO6")
	num.Capabilities[0].Type = value.TypeNumber
	if _, err := New(Options{Devices: []devices.Device{num}}); err == nil {
		t.Error("New took a number capability")
	}
	if _, err := New(Options{Devices: []devices.Device{sensor("a", "GPIO6")}, Lines: map[string]Line{"b": {}}}); err == nil {
		t.Error("New took settings for a device it does not have")
	}
	if _, err := New(Options{Devices: []devices.Device{sensor("a", "GPIO6"), sensor("a", "GPIO7")}}); err == nil {
		t.Error("New took one device twice")
	}
}
