// Package sim is a simulated greenhouse: a water tank drained by a pump
// through a valve, a flow meter, an air thermometer and a heater, with
// simple physics on an injectable clock. It drives the demo and most tests.
//
// It is also the reference fake of the device contract: faults can be
// injected per device (offline, stuck actuator, slow or failing writes and
// reads), and every operation is counted so a test can assert that no write
// happened.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Elements of the greenhouse, named by a device's Address, with the
// capability each offers.
var elements = map[string]struct {
	capability string
	kind       devices.Kind
	typ        value.Type
}{
	"tank":   {"level", devices.KindSensor, value.TypeNumber},
	"flow":   {"rate", devices.KindSensor, value.TypeNumber},
	"air":    {"temperature", devices.KindSensor, value.TypeNumber},
	"pump":   {"on", devices.KindActuator, value.TypeBool},
	"valve":  {"open", devices.KindActuator, value.TypeBool},
	"heater": {"on", devices.KindActuator, value.TypeBool},
}

// Physics constants of the greenhouse.
const (
	tankLitres   = 200.0 // capacity, litres
	pumpFlow     = 12.0  // litres per minute with pump on and valve open
	flowTau      = 2.0   // seconds for the flow to settle
	refillPerSec = 0.01  // % per second, a float valve topping the tank up
	ambient      = 14.0  // °C with the heater off
	heated       = 30.0  // °C the heater drives towards
	heatTau      = 600.0 // seconds
	coolTau      = 1200.0
	tick         = time.Second // integration step
)

// State is the physical state of the greenhouse.
type State struct {
	Level       float64 `json:"level"`       // tank level, %
	Flow        float64 `json:"flow"`        // L/min
	Temperature float64 `json:"temperature"` // °C
	Pump        bool    `json:"pump"`
	Valve       bool    `json:"valve"`
	Heater      bool    `json:"heater"`
}

// World is what a state file keeps: the physical state, and how many writes
// each actuator received. Real hardware outlives the gateway process; with a
// state file, so does the simulated greenhouse.
type World struct {
	State State `json:"state"`
	// Received counts the writes that reached each "device.capability",
	// whether or not they took effect.
	Received map[string]int `json:"received"`
}

// LoadWorld reads a state file.
func LoadWorld(path string) (World, error) {
	var w World
	b, err := os.ReadFile(path)
	if err != nil {
		return w, fmt.Errorf("reading the sim state file: %w", err)
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return w, fmt.Errorf("sim state file %s: %w", path, err)
	}
	if w.Received == nil {
		w.Received = map[string]int{}
	}
	return w, nil
}

// Fault is what a test injects into one device. The zero value is healthy.
type Fault struct {
	// Offline removes the device: it leaves Devices and every call fails
	// with devices.ErrOffline.
	Offline bool
	// Stuck makes writes succeed without moving the actuator, so a read-back
	// never follows.
	Stuck bool
	// WriteDelay and ReadDelay make calls slow; they still honour ctx. A
	// delayed write takes effect after the delay.
	WriteDelay, ReadDelay time.Duration
	// AckDelay delays the answer of a write that has already taken effect,
	// as a device whose acknowledgement is slow or lost.
	AckDelay time.Duration
	// WriteErr and ReadErr make calls fail with this error.
	WriteErr, ReadErr error
}

// Options configure a greenhouse.
type Options struct {
	// Devices are the configured devices this driver serves; each Address
	// names an element: tank, flow, air, pump, valve or heater.
	Devices []devices.Device
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Initial is the starting state. The zero value means a tank at 60%,
	// air at ambient, everything off.
	Initial *State
	// WriteHook, if set, is called inside Write after the delay and before
	// the value takes effect. Tests use it to look at the world from inside
	// the driver call.
	WriteHook func(ctx context.Context, device, capability string, v value.Value)
	// StateFile, if set, keeps the World in this file: it is read at New
	// (when it exists) and rewritten, atomically, whenever a write arrives
	// or takes effect.
	StateFile string
	// Faults are injected from the start, by device id.
	Faults map[string]Fault
}

// Greenhouse is the simulated driver. It is safe for concurrent use.
type Greenhouse struct {
	now       func() time.Time
	writeHook func(context.Context, string, string, value.Value)
	stateFile string

	// mu guards everything below.
	mu       sync.Mutex
	closed   bool
	last     time.Time
	st       State
	devs     []devices.Device
	online   []devices.Device // devs minus the offline ones; rebuilt on change
	byID     map[string]int
	faults   map[string]Fault
	counts   map[string]int // "op device.capability"
	written  map[string][]value.Value
	received map[string]int // writes received, kept in the state file
}

// Check reports whether d fits an element of the greenhouse: its address
// names one, and its capabilities are the one that element offers.
func Check(d devices.Device) error {
	el, ok := elements[d.Address]
	if !ok {
		return errors.New("sim device " + d.ID + ": unknown address \"" + d.Address + "\" (want tank, flow, air, pump, valve or heater)")
	}
	for _, c := range d.Capabilities {
		if c.Name != el.capability || c.Kind != el.kind || c.Type != el.typ {
			return errors.New("sim device " + d.ID + " (" + d.Address + "): capability " + c.Name +
				" does not fit; the " + d.Address + " offers " + el.capability + ", a " + el.typ.String() + " " + el.kind.String())
		}
	}
	return nil
}

// New checks the devices against the greenhouse's elements and returns the
// driver. It names the first device that does not fit.
func New(opts Options) (*Greenhouse, error) {
	g := &Greenhouse{
		now:       opts.Now,
		writeHook: opts.WriteHook,
		stateFile: opts.StateFile,
		byID:      map[string]int{},
		faults:    map[string]Fault{},
		counts:    map[string]int{},
		written:   map[string][]value.Value{},
		received:  map[string]int{},
	}
	if g.now == nil {
		g.now = time.Now
	}
	g.st = State{Level: 60, Temperature: ambient}
	if opts.Initial != nil {
		g.st = *opts.Initial
	}
	if g.stateFile != "" {
		w, err := LoadWorld(g.stateFile)
		switch {
		case err == nil:
			g.st, g.received = w.State, w.Received
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	for i, d := range opts.Devices {
		if err := Check(d); err != nil {
			return nil, err
		}
		if _, dup := g.byID[d.ID]; dup {
			return nil, errors.New("sim device " + d.ID + " is configured twice")
		}
		g.byID[d.ID] = i
		g.devs = append(g.devs, d)
	}
	for id, f := range opts.Faults {
		if _, ok := g.byID[id]; !ok {
			return nil, errors.New("sim fault for " + id + ": no such device")
		}
		g.faults[id] = f
	}
	g.online = g.online[:0]
	for _, d := range g.devs {
		if !g.faults[d.ID].Offline {
			g.online = append(g.online, d)
		}
	}
	return g, nil
}

// Open starts the clock of the physics.
func (g *Greenhouse) Open(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = g.now()
	return nil
}

// Devices returns the devices that are not offline.
func (g *Greenhouse) Devices() []devices.Device {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	return g.online
}

// Close stops the driver.
func (g *Greenhouse) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return nil
}

// SetFault injects a fault into a device; the zero Fault heals it.
func (g *Greenhouse) SetFault(device string, f Fault) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f == (Fault{}) {
		delete(g.faults, device)
	} else {
		g.faults[device] = f
	}
	g.online = g.online[:0:0]
	for _, d := range g.devs {
		if !g.faults[d.ID].Offline {
			g.online = append(g.online, d)
		}
	}
}

// Adjust changes the physical state by hand, as a person on site would
// (draining the tank, switching a pump at its local panel).
func (g *Greenhouse) Adjust(fn func(*State)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advanceLocked(g.now())
	fn(&g.st)
}

// Count returns how many times op ("read" or "write") reached the driver
// for device.capability, including failed calls.
func (g *Greenhouse) Count(op, device, capability string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts[op+" "+device+"."+capability]
}

// Written returns the values written to device.capability that took
// effect or were swallowed by a stuck actuator, in order.
func (g *Greenhouse) Written(device, capability string) []value.Value {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.written[device+"."+capability])
}

// State returns the physical state now.
func (g *Greenhouse) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advanceLocked(g.now())
	return g.st
}

// Read observes one capability.
func (g *Greenhouse) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	f, addr, err := g.begin("read", device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	if err := wait(ctx, f.ReadDelay); err != nil {
		return devices.Reading{}, &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	if f.ReadErr != nil {
		return devices.Reading{}, &devices.OpError{Op: "read", Device: device, Capability: capability, Err: f.ReadErr}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.advanceLocked(now)
	var v value.Value
	switch addr {
	case "tank":
		v = value.Number(round2(g.st.Level))
	case "flow":
		v = value.Number(round2(g.st.Flow))
	case "air":
		v = value.Number(round2(g.st.Temperature))
	case "pump":
		v = value.Bool(g.st.Pump)
	case "valve":
		v = value.Bool(g.st.Valve)
	case "heater":
		v = value.Bool(g.st.Heater)
	}
	return devices.Reading{Value: v, At: now, Quality: devices.QualityGood}, nil
}

// Write changes an actuator.
func (g *Greenhouse) Write(ctx context.Context, device, capability string, v value.Value) error {
	f, addr, err := g.begin("write", device, capability)
	if err != nil {
		return err
	}
	if elements[addr].kind != devices.KindActuator {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: devices.ErrNotWritable}
	}
	if v.Type != value.TypeBool {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: errors.New("want a bool, got a " + v.Type.String())}
	}
	if err := g.receive(device + "." + capability); err != nil {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if err := wait(ctx, f.WriteDelay); err != nil {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if f.WriteErr != nil {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: f.WriteErr}
	}
	if g.writeHook != nil {
		g.writeHook(ctx, device, capability, v)
	}
	if err := g.apply(addr, device+"."+capability, v, f.Stuck); err != nil {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if err := wait(ctx, f.AckDelay); err != nil {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	return nil
}

// apply records a write that took effect (or was swallowed, when stuck),
// moves the actuator at addr and saves the state file.
func (g *Greenhouse) apply(addr, target string, v value.Value, stuck bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advanceLocked(g.now())
	g.written[target] = append(g.written[target], v)
	if !stuck {
		switch addr {
		case "pump":
			g.st.Pump = v.Bool
		case "valve":
			g.st.Valve = v.Bool
		case "heater":
			g.st.Heater = v.Bool
		}
	}
	return g.saveLocked()
}

// receive counts a write that reached the device, in the state file too.
func (g *Greenhouse) receive(target string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.received[target]++
	return g.saveLocked()
}

// Received returns how many writes reached device.capability, across
// restarts when there is a state file.
func (g *Greenhouse) Received(device, capability string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.received[device+"."+capability]
}

// saveLocked rewrites the state file atomically, if there is one. g.mu
// must be held.
func (g *Greenhouse) saveLocked() error {
	if g.stateFile == "" {
		return nil
	}
	b, err := json.Marshal(World{State: g.st, Received: g.received})
	if err != nil {
		return err
	}
	tmp := g.stateFile + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("saving the sim state: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, g.stateFile)
	}
	if err != nil {
		return fmt.Errorf("saving the sim state: %w", err)
	}
	return nil
}

// begin counts the call and checks the device, returning its fault and address.
func (g *Greenhouse) begin(op, device, capability string) (Fault, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts[op+" "+device+"."+capability]++
	opErr := func(err error) error {
		return &devices.OpError{Op: op, Device: device, Capability: capability, Err: err}
	}
	if g.closed {
		return Fault{}, "", opErr(devices.ErrClosed)
	}
	i, ok := g.byID[device]
	if !ok {
		return Fault{}, "", opErr(devices.ErrUnknownDevice)
	}
	d := g.devs[i]
	if _, ok := d.Capability(capability); !ok {
		return Fault{}, "", opErr(devices.ErrUnknownCapability)
	}
	f := g.faults[device]
	if f.Offline {
		return Fault{}, "", opErr(devices.ErrOffline)
	}
	return f, d.Address, nil
}

// advanceLocked integrates the physics up to now. g.mu must be held.
func (g *Greenhouse) advanceLocked(now time.Time) {
	if g.last.IsZero() {
		g.last = now
		return
	}
	step := max(tick, now.Sub(g.last)/3600) // at most 3600 iterations per call
	for now.Sub(g.last) > 0 {
		dt := min(now.Sub(g.last), step)
		g.last = g.last.Add(dt)
		s := dt.Seconds()
		target := 0.0
		if g.st.Pump && g.st.Valve && g.st.Level > 0 {
			target = pumpFlow
		}
		g.st.Flow += (target - g.st.Flow) * (1 - math.Exp(-s/flowTau))
		if g.st.Flow < 0.005 && target == 0 {
			g.st.Flow = 0
		}
		g.st.Level -= g.st.Flow / 60 * s / tankLitres * 100
		if g.st.Level < 95 {
			g.st.Level += refillPerSec * s
		}
		g.st.Level = math.Max(0, math.Min(100, g.st.Level))
		goal, tau := ambient, coolTau
		if g.st.Heater {
			goal, tau = heated, heatTau
		}
		g.st.Temperature += (goal - g.st.Temperature) * (1 - math.Exp(-s/tau))
	}
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// wait blocks for d or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
