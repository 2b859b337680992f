package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func greenhouseDevices() []devices.Device {
	sensor := func(name string) []devices.Capability {
		return []devices.Capability{{Name: name, Kind: devices.KindSensor, Type: value.TypeNumber}}
	}
	act := func(name string) []devices.Capability {
		return []devices.Capability{{Name: name, Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}
	}
	return []devices.Device{
		{ID: "tank-1", Address: "tank", Capabilities: sensor("level")},
		{ID: "flow-1", Address: "flow", Capabilities: sensor("rate")},
		{ID: "air-1", Address: "air", Capabilities: sensor("temperature")},
		{ID: "pump-1", Address: "pump", Capabilities: act("on")},
		{ID: "valve-1", Address: "valve", Capabilities: act("open")},
		{ID: "heater-1", Address: "heater", Capabilities: act("on")},
		{ID: "thermostat-1", Address: "thermostat", Capabilities: []devices.Capability{
			{Name: "setpoint", Kind: devices.KindActuator, Type: value.TypeNumber, Unit: "°C", ReadBack: true}}},
		{ID: "vent-1", Address: "vent", Capabilities: []devices.Capability{
			{Name: "position", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"closed", "half", "open"}, ReadBack: true}}},
	}
}

func newGreenhouse(t *testing.T) (*Greenhouse, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 5, 1, 6, 0, 0, 0, time.UTC)}
	g, err := New(Options{Devices: greenhouseDevices(), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g, c
}

func read(t *testing.T, g *Greenhouse, dev, capability string) value.Value {
	t.Helper()
	r, err := g.Read(t.Context(), dev, capability)
	if err != nil {
		t.Fatalf("Read(%s.%s): %v", dev, capability, err)
	}
	return r.Value
}

func TestFlowNeedsPumpAndValve(t *testing.T) {
	g, c := newGreenhouse(t)
	ctx := t.Context()
	if err := g.Write(ctx, "pump-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	c.advance(10 * time.Second)
	if f := read(t, g, "flow-1", "rate"); f.Num != 0 {
		t.Fatalf("flow with the valve shut = %v, want 0", f.Num)
	}
	before := read(t, g, "tank-1", "level").Num
	if err := g.Write(ctx, "valve-1", "open", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	c.advance(20 * time.Second)
	if f := read(t, g, "flow-1", "rate"); f.Num < 11 {
		t.Fatalf("flow with pump and valve on = %v, want about 12", f.Num)
	}
	if after := read(t, g, "tank-1", "level").Num; after >= before {
		t.Fatalf("tank level went from %v to %v while pumping, want it to fall", before, after)
	}
	if v := read(t, g, "pump-1", "on"); !v.Bool {
		t.Fatal("read-back of pump-1.on is false after writing true")
	}
	if err := g.Write(ctx, "pump-1", "on", value.Bool(false)); err != nil {
		t.Fatal(err)
	}
	c.advance(30 * time.Second)
	if f := read(t, g, "flow-1", "rate"); f.Num != 0 {
		t.Fatalf("flow after the pump stopped = %v, want 0", f.Num)
	}
}

func TestHeaterWarmsTheAir(t *testing.T) {
	g, c := newGreenhouse(t)
	start := read(t, g, "air-1", "temperature").Num
	if err := g.Write(t.Context(), "heater-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	c.advance(10 * time.Minute)
	if now := read(t, g, "air-1", "temperature").Num; now <= start+5 {
		t.Fatalf("air after 10 min of heating = %v, from %v; want it warmer", now, start)
	}
}

func TestFaults(t *testing.T) {
	g, c := newGreenhouse(t)
	ctx := t.Context()

	g.SetFault("pump-1", Fault{Stuck: true})
	if err := g.Write(ctx, "pump-1", "on", value.Bool(true)); err != nil {
		t.Fatalf("stuck Write = %v, want nil", err)
	}
	if v := read(t, g, "pump-1", "on"); v.Bool {
		t.Fatal("a stuck pump followed the write")
	}

	g.SetFault("valve-1", Fault{Offline: true})
	for _, d := range g.Devices() {
		if d.ID == "valve-1" {
			t.Fatal("an offline device is listed")
		}
	}
	if err := g.Write(ctx, "valve-1", "open", value.Bool(true)); !errors.Is(err, devices.ErrOffline) {
		t.Fatalf("Write to offline device = %v, want ErrOffline", err)
	}
	g.SetFault("valve-1", Fault{})
	if len(g.Devices()) != len(greenhouseDevices()) {
		t.Fatalf("healed device did not come back: %d devices", len(g.Devices()))
	}

	boom := errors.New("relay welded")
	g.SetFault("heater-1", Fault{WriteErr: boom})
	err := g.Write(ctx, "heater-1", "on", value.Bool(true))
	var op *devices.OpError
	if !errors.As(err, &op) || !errors.Is(err, boom) || op.Device != "heater-1" {
		t.Fatalf("failing Write = %v, want an OpError wrapping the fault", err)
	}

	g.SetFault("heater-1", Fault{WriteDelay: time.Hour})
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := g.Write(short, "heater-1", "on", value.Bool(true)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow Write past its deadline = %v, want DeadlineExceeded", err)
	}
	c.advance(time.Second)
	if got := g.Count("write", "heater-1", "on"); got != 2 {
		t.Fatalf("Count(write heater-1.on) = %d, want 2", got)
	}
	if err := g.Write(ctx, "tank-1", "level", value.Bool(true)); !errors.Is(err, devices.ErrNotWritable) {
		t.Fatalf("Write to a sensor = %v, want ErrNotWritable", err)
	}
	if _, err := g.Read(ctx, "pump-1", "speed"); !errors.Is(err, devices.ErrUnknownCapability) {
		t.Fatalf("Read of unknown capability = %v", err)
	}
}

func TestStateFileOutlivesTheDriver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "world.json")
	short, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The caller gives up once the valve has the command in hand.
	g, err := New(Options{Devices: greenhouseDevices(), StateFile: path,
		Faults:    map[string]Fault{"valve-1": {AckDelay: time.Hour}},
		WriteHook: func(context.Context, string, string, value.Value) { cancel() }})
	if err != nil {
		t.Fatal(err)
	}
	// The valve opens, but its acknowledgement never comes.
	if err := g.Write(short, "valve-1", "open", value.Bool(true)); !errors.Is(err, context.Canceled) || devices.Classify(err) != devices.OutcomeUnknown {
		t.Fatalf("Write with a lost ack = %v, want an unknown outcome", err)
	}
	w, err := LoadWorld(path)
	if err != nil {
		t.Fatal(err)
	}
	if !w.State.Valve || w.Received["valve-1.open"] != 1 {
		t.Fatalf("world after a write with a lost ack = %+v", w)
	}
	// A new driver on the same file finds the greenhouse as it was left.
	g2, err := New(Options{Devices: greenhouseDevices(), StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, g2, "valve-1", "open"); !got.Equal(value.Bool(true)) {
		t.Fatalf("valve after restart = %v", got)
	}
	if n := g2.Received("valve-1", "open"); n != 1 {
		t.Fatalf("Received after restart = %d", n)
	}
	if _, err := New(Options{Devices: greenhouseDevices(), Faults: map[string]Fault{"boiler-1": {Stuck: true}}}); err == nil {
		t.Fatal("New accepted a fault for an unknown device")
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Devices: greenhouseDevices(), StateFile: path}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("New on a broken state file = %v, want an error naming it", err)
	}
}

func TestNewRejectsMisfits(t *testing.T) {
	_, err := New(Options{Devices: []devices.Device{{ID: "x", Address: "boiler"}}})
	if err == nil || err.Error() != `sim device x: unknown address "boiler" (want tank, flow, air, pump, valve, heater, thermostat or vent)` {
		t.Fatalf("New with unknown address: %v", err)
	}
	_, err = New(Options{Devices: []devices.Device{{ID: "p", Address: "pump",
		Capabilities: []devices.Capability{{Name: "speed", Kind: devices.KindActuator, Type: value.TypeNumber}}}}})
	if err == nil {
		t.Fatal("New accepted a pump with a speed")
	}
}

// TestThermostatAndVent: the air follows the setpoint while the heater
// runs, and holds there; the vent cools it, faster open than half; both
// read back what was written, and refuse what they cannot take.
func TestThermostatAndVent(t *testing.T) {
	g, c := newGreenhouse(t)
	ctx := t.Context()
	if v := read(t, g, "thermostat-1", "setpoint"); v.Num != 30 {
		t.Fatalf("the thermostat starts at %v, want 30", v)
	}
	if v := read(t, g, "vent-1", "position"); !v.Equal(value.Enum("closed")) {
		t.Fatalf("the vent starts %v, want closed", v)
	}
	for _, w := range []struct {
		dev, cp string
		v       value.Value
	}{{"thermostat-1", "setpoint", value.Number(20)}, {"heater-1", "on", value.Bool(true)}} {
		if err := g.Write(ctx, w.dev, w.cp, w.v); err != nil {
			t.Fatal(err)
		}
	}
	if v := read(t, g, "thermostat-1", "setpoint"); v.Num != 20 {
		t.Fatalf("the setpoint reads back %v, want 20", v)
	}
	c.advance(2 * time.Hour)
	if got := read(t, g, "air-1", "temperature").Num; got < 19.5 || got > 20 {
		t.Fatalf("air after 2 h heated to a 20 °C setpoint = %v, want about 20", got)
	}
	// The setpoint raised, the air follows it up.
	if err := g.Write(ctx, "thermostat-1", "setpoint", value.Number(25)); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Hour)
	warm := read(t, g, "air-1", "temperature").Num
	if warm < 24.5 || warm > 25 {
		t.Fatalf("air after 2 h at a 25 °C setpoint = %v, want about 25", warm)
	}
	// The vent lets the heat out: open cools more than half.
	cooled := map[string]float64{}
	for _, pos := range []string{"half", "open"} {
		g.Adjust(func(s *State) { s.Temperature = warm })
		if err := g.Write(ctx, "vent-1", "position", value.Enum(pos)); err != nil {
			t.Fatal(err)
		}
		if v := read(t, g, "vent-1", "position"); !v.Equal(value.Enum(pos)) {
			t.Fatalf("the vent reads back %v, want %s", v, pos)
		}
		c.advance(time.Hour)
		cooled[pos] = read(t, g, "air-1", "temperature").Num
	}
	if !(cooled["open"] < cooled["half"] && cooled["half"] < warm-1) {
		t.Fatalf("air an hour after venting from %.2f: half %.2f, open %.2f; want open < half < before", warm, cooled["half"], cooled["open"])
	}
	for _, bad := range []struct {
		dev, cp string
		v       value.Value
		want    string
	}{
		{"thermostat-1", "setpoint", value.Number(55), "from 0 to 40 °C"},
		{"thermostat-1", "setpoint", value.Bool(true), "want a number"},
		{"vent-1", "position", value.Enum("ajar"), `no position "ajar"`},
	} {
		err := g.Write(ctx, bad.dev, bad.cp, bad.v)
		if err == nil || !errors.Is(err, devices.ErrBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Write(%s.%s, %v) = %v, want a bad request saying %q", bad.dev, bad.cp, bad.v, err, bad.want)
		}
	}
	if _, err := New(Options{Devices: []devices.Device{{ID: "v", Address: "vent", Capabilities: []devices.Capability{
		{Name: "position", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"closed", "ajar"}}}}}}); err == nil || !strings.Contains(err.Error(), `no position "ajar"`) {
		t.Fatalf("New with a vent position it has not = %v", err)
	}
}

func BenchmarkRead(b *testing.B) {
	c := &clock{t: time.Now()}
	g, _ := New(Options{Devices: greenhouseDevices(), Now: c.now})
	_ = g.Open(context.Background())
	for b.Loop() {
		if _, err := g.Read(context.Background(), "tank-1", "level"); err != nil {
			b.Fatal(err)
		}
	}
}
