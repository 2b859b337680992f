// Package sim is a simulated greenhouse: a water tank drained by a pump
// through a valve, a flow meter, an air thermometer, a heater with its
// thermostat's setpoint and a roof vent, with simple physics on an
// injectable clock. It drives the demo and most tests.
//
// It is also the reference fake of the device contract: faults can be
// injected per device (offline, stuck actuator, slow or failing writes and
// reads, a lost acknowledgement), and every operation is counted so a test
// can assert that no write happened. The faults and the counts are those of
// devices/devicetest, which wraps the physics; the simulator adds only what
// a device knows, the writes it received.
//
// The package registers the driver type "sim" (config.go): the gateway's
// demo and tests reach it by that name.
package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
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
	// The heater's thermostat: the heater, on, warms the air towards
	// this setpoint (°C), never beyond its own heated limit.
	"thermostat": {"setpoint", devices.KindActuator, value.TypeNumber},
	// The roof vent: open lets the warm air out, half lets out half as
	// much.
	"vent": {"position", devices.KindActuator, value.TypeEnum},
}

// addresses lists the elements for messages, in the order people meet them.
const addresses = "tank, flow, air, pump, valve, heater, thermostat or vent"

// The vent's positions, and how many times faster than shut each lets
// the air cool.
var ventPositions = map[string]float64{"closed": 1, "half": 2, "open": 4}

// The thermostat's range, °C: a setpoint outside it is refused by the
// device, whatever the envelope.
const (
	setpointMin = 0.0
	setpointMax = 40.0
)

// Physics constants of the greenhouse.
const (
	tankLitres   = 200.0 // capacity, litres
	pumpFlow     = 12.0  // litres per minute with pump on and valve open
	flowTau      = 2.0   // seconds for the flow to settle
	refillPerSec = 0.01  // % per second, a float valve topping the tank up
	ambient      = 14.0  // °C with the heater off
	heated       = 30.0  // °C the heater drives towards, at most
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
	// Setpoint is the thermostat's, °C; zero means unset, and the heater
	// then drives towards its heated limit.
	Setpoint float64 `json:"setpoint,omitempty"`
	// Vent is the roof vent's position: closed (or ""), half or open.
	Vent string `json:"vent,omitempty"`
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

// Fault is what a test injects into one device; the zero value is
// healthy. See devicetest.Fault for each knob. A write that reaches a device
// that is not offline counts as received (World.Received) before a delay,
// an error or a stuck actuator holds it up.
type Fault = devicetest.Fault

// Options configure a greenhouse.
type Options struct {
	// Devices are the configured devices this driver serves; each Address
	// names an element: tank, flow, air, pump, valve, heater, thermostat or
	// vent.
	Devices []devices.Device
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Initial is the starting state. The zero value means a tank at 60%,
	// air at ambient, everything off, the thermostat at the heater's
	// 30 °C and the vent closed.
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

// Greenhouse is the simulated driver: the physics of the greenhouse
// behind devicetest's fault knobs. It is safe for concurrent use.
type Greenhouse struct {
	w      *world
	faults *devicetest.Driver
}

// world is the physics of the greenhouse and the devices that reach it,
// as a devices.Driver without faults.
type world struct {
	now       func() time.Time
	writeHook func(context.Context, string, string, value.Value)
	stateFile string
	devs      []devices.Device
	byID      map[string]int

	// mu guards everything below.
	mu       sync.Mutex
	closed   bool
	last     time.Time
	st       State
	written  map[string][]value.Value
	received map[string]int // writes received, kept in the state file
}

// check reports whether d fits an element of the greenhouse: its address
// names one, and its capabilities are the one that element offers. It
// returns the index of the capability that does not fit, or -1.
func check(d devices.Device) (int, error) {
	el, ok := elements[d.Address]
	if !ok {
		return -1, errors.New("sim device " + d.ID + ": unknown address \"" + d.Address + "\" (want " + addresses + ")")
	}
	for i, c := range d.Capabilities {
		if c.Name != el.capability || c.Kind != el.kind || c.Type != el.typ {
			return i, errors.New("sim device " + d.ID + " (" + d.Address + "): capability " + c.Name +
				" does not fit; the " + d.Address + " offers " + el.capability + ", a " + el.typ.String() + " " + el.kind.String())
		}
		for _, e := range c.Enum {
			if _, ok := ventPositions[e]; !ok {
				return i, errors.New("sim device " + d.ID + " (" + d.Address + "): the vent has no position " + strconv.Quote(e) + " (want closed, half or open)")
			}
		}
	}
	return -1, nil
}

// New checks the devices against the greenhouse's elements and returns the
// driver. It names the first device that does not fit. The devices it
// serves carry the simulator's effect floors (floor), whatever floors
// opts.Devices had.
func New(opts Options) (*Greenhouse, error) {
	w := &world{
		now:       opts.Now,
		writeHook: opts.WriteHook,
		stateFile: opts.StateFile,
		byID:      map[string]int{},
		written:   map[string][]value.Value{},
		received:  map[string]int{},
	}
	if w.now == nil {
		w.now = time.Now
	}
	w.st = State{Level: 60, Temperature: ambient, Setpoint: heated, Vent: "closed"}
	if opts.Initial != nil {
		w.st = *opts.Initial
	}
	if w.stateFile != "" {
		lw, err := LoadWorld(w.stateFile)
		switch {
		case err == nil:
			w.st, w.received = lw.State, lw.Received
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	for i, d := range opts.Devices {
		if _, err := check(d); err != nil {
			return nil, err
		}
		if _, dup := w.byID[d.ID]; dup {
			return nil, errors.New("sim device " + d.ID + " is configured twice")
		}
		d.Capabilities = slices.Clone(d.Capabilities)
		for k := range d.Capabilities {
			d.Capabilities[k].Floor = floor(d.Address)
		}
		w.byID[d.ID] = i
		w.devs = append(w.devs, d)
	}
	for id := range opts.Faults {
		if _, ok := w.byID[id]; !ok {
			return nil, errors.New("sim fault for " + id + ": no such device")
		}
	}
	g := &Greenhouse{w: w}
	g.faults = devicetest.Wrap(w, devicetest.Options{Faults: opts.Faults, Received: w.receive})
	return g, nil
}

// Open starts the clock of the physics.
func (g *Greenhouse) Open(ctx context.Context) error { return g.faults.Open(ctx) }

// Devices returns the devices that are not offline.
func (g *Greenhouse) Devices() []devices.Device { return g.faults.Devices() }

// Why says why a device is not listed: the fault that took it offline.
func (g *Greenhouse) Why(device string) error { return g.faults.Why(device) }

// Close stops the driver.
func (g *Greenhouse) Close() error { return g.faults.Close() }

// Read observes one capability.
func (g *Greenhouse) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	return g.faults.Read(ctx, device, capability)
}

// Write changes an actuator.
func (g *Greenhouse) Write(ctx context.Context, device, capability string, v value.Value) error {
	return g.faults.Write(ctx, device, capability, v)
}

// SetFault injects a fault into a device; the zero Fault heals it.
func (g *Greenhouse) SetFault(device string, f Fault) { g.faults.SetFault(device, f) }

// Count returns how many times op ("read" or "write") reached the driver
// for device.capability, including failed calls.
func (g *Greenhouse) Count(op, device, capability string) int {
	return g.faults.Count(op, device, capability)
}

// Written returns the values written to device.capability that took
// effect, in order: a stuck actuator's are not among them.
func (g *Greenhouse) Written(device, capability string) []value.Value {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	return slices.Clone(g.w.written[device+"."+capability])
}

// Received returns how many writes reached device.capability, across
// restarts when there is a state file.
func (g *Greenhouse) Received(device, capability string) int {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	return g.w.received[device+"."+capability]
}

// Adjust changes the physical state by hand, as a person on site would
// (draining the tank, switching a pump at its local panel).
func (g *Greenhouse) Adjust(fn func(*State)) {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	g.w.advanceLocked(g.w.now())
	fn(&g.w.st)
}

// State returns the physical state now.
func (g *Greenhouse) State() State {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	g.w.advanceLocked(g.w.now())
	return g.w.st
}

func (w *world) Open(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = w.now()
	return nil
}

func (w *world) Devices() []devices.Device {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	return w.devs
}

func (w *world) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

func (w *world) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	if err := ctx.Err(); err != nil {
		return devices.Reading{}, &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	addr, err := w.lookupLocked("read", device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	now := w.now()
	w.advanceLocked(now)
	var v value.Value
	switch addr {
	case "tank":
		v = value.Number(round2(w.st.Level))
	case "flow":
		v = value.Number(round2(w.st.Flow))
	case "air":
		v = value.Number(round2(w.st.Temperature))
	case "pump":
		v = value.Bool(w.st.Pump)
	case "valve":
		v = value.Bool(w.st.Valve)
	case "heater":
		v = value.Bool(w.st.Heater)
	case "thermostat":
		v = value.Number(round2(cmp.Or(w.st.Setpoint, heated)))
	case "vent":
		v = value.Enum(cmp.Or(w.st.Vent, "closed"))
	}
	return devices.Reading{Value: v, At: now, Quality: devices.QualityGood}, nil
}

func (w *world) Write(ctx context.Context, device, capability string, v value.Value) error {
	addr, err := w.writable(device, capability, v)
	if err != nil {
		return err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return opErr(err)
	}
	if w.writeHook != nil {
		w.writeHook(ctx, device, capability, v)
	}
	if err := w.apply(addr, device+"."+capability, v); err != nil {
		// The actuator moved; whether the world on disk did is unknown.
		return opErr(devices.UnknownOutcome(err))
	}
	return nil
}

// writable checks a write of v to device.capability and returns the
// device's address.
func (w *world) writable(device, capability string, v value.Value) (string, error) {
	w.mu.Lock()
	addr, err := w.lookupLocked("write", device, capability)
	w.mu.Unlock()
	if err != nil {
		return "", err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if elements[addr].kind != devices.KindActuator {
		return "", opErr(devices.ErrNotWritable)
	}
	if want := elements[addr].typ; v.Type != want {
		return "", opErr(devices.BadRequest("want a " + want.String() + ", got a " + v.Type.String()))
	}
	switch addr {
	case "thermostat":
		if math.IsNaN(v.Num) || v.Num < setpointMin || v.Num > setpointMax {
			return "", opErr(devices.BadRequest("the thermostat's setpoint is from 0 to 40 °C, not " + v.String()))
		}
	case "vent":
		if _, ok := ventPositions[v.Text]; !ok {
			return "", opErr(devices.BadRequest("the vent has no position " + strconv.Quote(v.Text) + " (want closed, half or open)"))
		}
	}
	return addr, nil
}

// receive counts a write that reached a device, in the state file too. It
// checks the write first: a write the device cannot take never arrives.
func (w *world) receive(device, capability string, v value.Value) error {
	if _, err := w.writable(device, capability, v); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.received[device+"."+capability]++
	if err := w.saveLocked(); err != nil {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	return nil
}

// apply records a write that took effect, moves the actuator at addr and
// saves the state file.
func (w *world) apply(addr, target string, v value.Value) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advanceLocked(w.now())
	w.written[target] = append(w.written[target], v)
	switch addr {
	case "pump":
		w.st.Pump = v.Bool
	case "valve":
		w.st.Valve = v.Bool
	case "heater":
		w.st.Heater = v.Bool
	case "thermostat":
		w.st.Setpoint = v.Num
	case "vent":
		w.st.Vent = v.Text
	}
	return w.saveLocked()
}

// saveLocked rewrites the state file atomically, if there is one. w.mu
// must be held.
func (w *world) saveLocked() error {
	if w.stateFile == "" {
		return nil
	}
	b, err := json.Marshal(World{State: w.st, Received: w.received})
	if err != nil {
		return err
	}
	tmp := w.stateFile + ".tmp"
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
		err = os.Rename(tmp, w.stateFile)
	}
	if err != nil {
		return fmt.Errorf("saving the sim state: %w", err)
	}
	return nil
}

// lookupLocked checks the device and capability of a call and returns
// the device's address. w.mu must be held.
func (w *world) lookupLocked(op, device, capability string) (string, error) {
	opErr := func(err error) error {
		return &devices.OpError{Op: op, Device: device, Capability: capability, Err: err}
	}
	if w.closed {
		return "", opErr(devices.ErrClosed)
	}
	i, ok := w.byID[device]
	if !ok {
		return "", opErr(devices.ErrUnknownDevice)
	}
	d := &w.devs[i]
	if _, ok := d.Capability(capability); !ok {
		return "", opErr(devices.ErrUnknownCapability)
	}
	return d.Address, nil
}

// advanceLocked integrates the physics up to now. w.mu must be held.
func (w *world) advanceLocked(now time.Time) {
	if w.last.IsZero() {
		w.last = now
		return
	}
	step := max(tick, now.Sub(w.last)/3600) // at most 3600 iterations per call
	for now.Sub(w.last) > 0 {
		dt := min(now.Sub(w.last), step)
		w.last = w.last.Add(dt)
		s := dt.Seconds()
		target := 0.0
		if w.st.Pump && w.st.Valve && w.st.Level > 0 {
			target = pumpFlow
		}
		w.st.Flow += (target - w.st.Flow) * (1 - math.Exp(-s/flowTau))
		if w.st.Flow < 0.005 && target == 0 {
			w.st.Flow = 0
		}
		w.st.Level -= w.st.Flow / 60 * s / tankLitres * 100
		if w.st.Level < 95 {
			w.st.Level += refillPerSec * s
		}
		w.st.Level = math.Max(0, math.Min(100, w.st.Level))
		// The heater warms the air towards the setpoint; with the heater
		// off, or the vent open at all, the air also cools towards
		// ambient, faster the wider the vent.
		vent := ventPositions[w.st.Vent]
		if vent == 0 {
			vent = 1
		}
		goal := heated
		if w.st.Setpoint > 0 {
			goal = math.Min(w.st.Setpoint, heated)
		}
		heating := w.st.Heater && w.st.Temperature < goal
		if heating {
			w.st.Temperature += (goal - w.st.Temperature) * (1 - math.Exp(-s/heatTau))
		}
		if !heating || vent > 1 {
			w.st.Temperature += (ambient - w.st.Temperature) * (1 - math.Exp(-s*vent/coolTau))
		}
	}
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }
