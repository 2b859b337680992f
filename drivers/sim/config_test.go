package sim

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/value"
)

// The simulator registers its type; the gateway finds it by name.
func TestRegisteredAsSim(t *testing.T) {
	f, ok := devices.LookupFactory(Type)
	if !ok || f.Type != "sim" {
		t.Fatalf("LookupFactory(%q) = %+v, %v", Type, f, ok)
	}
}

// configureFor runs the factory on the greenhouse's devices with options o.
func configureFor(o *Config, devs []devices.Device) (devices.Builder, []devices.Device, []string) {
	in := &devicetest.Config{Driver: "sim"}
	if o != nil {
		in.Settings = o
	}
	b := configure(in, devs)
	return b, devs, in.Problems()
}

func TestConfigureSetsFloorsAndBuilds(t *testing.T) {
	dir := t.TempDir()
	b, devs, problems := configureFor(&Config{StateFile: "world.json", Faults: map[string]FaultConfig{
		"valve-1": {AckDelay: "1h", LostAck: true}, "tank-1": {ReadError: "cable cut"},
	}}, greenhouseDevices())
	if b == nil || problems != nil {
		t.Fatalf("configure = %v, problems %q", b != nil, problems)
	}
	for _, d := range devs {
		want := devices.Floor{Costs: d.Address == "pump" || d.Address == "heater" || d.Address == "thermostat"}
		if got := d.Capabilities[0].Floor; got != want {
			t.Errorf("floor of %s = %+v, want %+v", d.ID, got, want)
		}
	}
	drv, err := b(devices.Env{StateDir: dir, Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	g := drv.(*Greenhouse)
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f := g.faults.Fault("valve-1"); !f.LostAck || f.AckDelay == 0 {
		t.Fatalf("valve-1's fault = %+v", f)
	}
	if _, err := g.Read(t.Context(), "tank-1", "level"); err == nil || err.Error() != "read tank-1.level: cable cut" {
		t.Fatalf("read of tank-1 = %v, want the configured read_error", err)
	}
	// The relative state file is in the state directory.
	if err := g.Write(t.Context(), "pump-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if w, err := LoadWorld(filepath.Join(dir, "world.json")); err != nil || !w.State.Pump {
		t.Fatalf("the state file in the state directory = %+v, %v", w, err)
	}
	// The driver lists its devices with their floors.
	for _, d := range g.Devices() {
		if d.ID == "heater-1" && !d.Capabilities[0].Floor.Costs {
			t.Fatal("the heater listed without its floor")
		}
	}
}

// Every problem is reported at its place in the driver's options or its
// device, and the factory then builds nothing.
func TestConfigureReportsEveryProblemAtItsPlace(t *testing.T) {
	devs := greenhouseDevices()
	devs[0].Address = "boiler"             // tank-1
	devs[3].Capabilities[0].Name = "speed" // pump-1
	devs[3].Capabilities[0].Type = value.TypeNumber
	b, _, problems := configureFor(&Config{Faults: map[string]FaultConfig{
		"boiler-1": {Stuck: true},
		"valve-1":  {AckDelay: "forever", WriteDelay: "-1s", ReadDelay: "2s"},
	}}, devs)
	want := []string{
		`devices[0].address: sim device tank-1: unknown address "boiler" (want tank, flow, air, pump, valve, heater, thermostat or vent)`,
		`devices[3].capabilities[0]: sim device pump-1 (pump): capability speed does not fit; the pump offers on, a bool actuator`,
		`options.faults.boiler-1: no device boiler-1 on driver sim`,
		`options.faults.valve-1.write_delay: "-1s" is not a positive duration (write it like 30s, 5m or 2h)`,
		`options.faults.valve-1.ack_delay: "forever" is not a positive duration (write it like 30s, 5m or 2h)`,
	}
	if b != nil || !slices.Equal(problems, want) {
		t.Fatalf("configure built %v, problems\n  %q\nwant\n  %q", b != nil, problems, want)
	}
	// Options of another type are the test's mistake, reported too.
	in := &devicetest.Config{Driver: "sim", Settings: struct{ Chip string }{}}
	if configure(in, greenhouseDevices()) != nil || len(in.Problems()) != 1 {
		t.Fatalf("options of the wrong type: %q", in.Problems())
	}
}

// The simulator's errors say what became of the call.
func TestTypedOutcomes(t *testing.T) {
	g, _ := newGreenhouse(t)
	ctx := t.Context()
	if err := g.Write(ctx, "pump-1", "on", value.Number(1)); devices.Classify(err) != devices.OutcomeBadRequest {
		t.Errorf("a number to a bool actuator = %v, want a bad request", err)
	}
	if err := g.Write(ctx, "pump-9", "on", value.Bool(true)); devices.Classify(err) != devices.OutcomeBadRequest || !errors.Is(err, devices.ErrUnknownDevice) {
		t.Errorf("a write to an unknown device = %v", err)
	}
	if g.Received("pump-1", "on") != 0 {
		t.Error("a write the device cannot take was received")
	}
	g.SetFault("pump-1", Fault{Offline: true})
	if err := g.Write(ctx, "pump-1", "on", value.Bool(true)); devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("a write to an offline device = %v, want offline", err)
	}
	g.SetFault("pump-1", Fault{LostAck: true})
	if err := g.Write(ctx, "pump-1", "on", value.Bool(true)); devices.Classify(err) != devices.OutcomeUnknown {
		t.Errorf("a write whose ack was lost = %v, want an unknown outcome", err)
	}
	if !g.State().Pump {
		t.Error("the write whose ack was lost did not take effect")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Read(ctx, "tank-1", "level"); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("a read after Close = %v, want ErrClosed", err)
	}
}

// A write held up by its delay has reached the device (it is counted in
// the state file) but has not taken effect: a crash then leaves a world
// that received the command and did not act on it.
func TestAWriteHeldUpWasReceived(t *testing.T) {
	path := filepath.Join(t.TempDir(), "world.json")
	g, err := New(Options{Devices: greenhouseDevices(), StateFile: path, Faults: map[string]Fault{"valve-1": {WriteDelay: 1 << 62}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := g.Write(ctx, "valve-1", "open", value.Bool(true)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a write held up past its ctx = %v", err)
	}
	w, err := LoadWorld(path)
	if err != nil {
		t.Fatal(err)
	}
	if w.Received["valve-1.open"] != 1 || w.State.Valve {
		t.Fatalf("the world = %+v, want the write received and the valve shut", w)
	}
}
