package gateway

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// fakeType is a driver type of these tests only: a GPIO board that is not
// the simulator. Its devices' addresses are pins ("gpio17"), which the
// simulator would refuse.
const fakeType = "fakegpio"

func init() {
	devices.Register(devices.Factory{Type: fakeType, Configure: configureFake})
}

// fakeOptions are the fake board's options.
type fakeOptions struct {
	Chip string             `yaml:"chip"`
	Pins map[string]fakePin `yaml:"pins"`
}

type fakePin struct {
	// Doses says the pin drives a dosing pump: its floor is irreversible
	// and costs.
	Doses    bool   `yaml:"doses"`
	Debounce string `yaml:"debounce"`
}

// configureFake checks pins and sets the board's floors: the board sits on
// another machine, so everything on it reaches; a dosing pin cannot be
// undone and spends.
func configureFake(in devices.Instance, devs []devices.Device) devices.Builder {
	var o fakeOptions
	ok := in.Decode(&o)
	names := make([]string, 0, len(o.Pins))
	for name := range o.Pins {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if d := o.Pins[name].Debounce; d != "" {
			if _, err := time.ParseDuration(d); err != nil {
				in.Options().At("pins").At(name).At("debounce").Errorf("%q is not a duration", d)
				ok = false
			}
		}
	}
	for i := range devs {
		d := &devs[i]
		n, err := strconv.Atoi(strings.TrimPrefix(d.Address, "gpio"))
		if !strings.HasPrefix(d.Address, "gpio") || err != nil || n < 0 || n > 27 {
			in.Device(i).At("address").Errorf("%q is not a pin of this board (write gpio0 to gpio27)", d.Address)
			ok = false
			continue
		}
		for k := range d.Capabilities {
			f := devices.Floor{Reaches: true}
			if o.Pins[d.Address].Doses && d.Capabilities[k].Kind == devices.KindActuator {
				f.Irreversible, f.Costs = true, true
			}
			d.Capabilities[k].Floor = f
		}
	}
	if !ok {
		return nil
	}
	return func(env devices.Env) (devices.Driver, error) {
		return &fakeBoard{env: env, chip: o.Chip, pins: map[string]bool{}}, nil
	}
}

// fakeBoard is the fake board's driver: pins that hold what was written.
type fakeBoard struct {
	env  devices.Env
	chip string
	// mu guards pins.
	mu   sync.Mutex
	pins map[string]bool
}

func (f *fakeBoard) Open(context.Context) error { return nil }
func (f *fakeBoard) Devices() []devices.Device  { return f.env.Devices }
func (f *fakeBoard) Close() error               { return nil }
func (f *fakeBoard) address(device string) string {
	for _, d := range f.env.Devices {
		if d.ID == device {
			return d.Address
		}
	}
	return ""
}

func (f *fakeBoard) Read(_ context.Context, device, _ string) (devices.Reading, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return devices.Reading{Value: value.Bool(f.pins[f.address(device)]), Quality: devices.QualityGood}, nil
}

func (f *fakeBoard) Write(_ context.Context, device, _ string, v value.Value) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pins[f.address(device)] = v.Bool
	return nil
}

// boardConfig has a simulated tank and a board with a lamp and a doser.
const boardConfig = `gateway: {id: t}
drivers:
  - {name: sim, type: sim}
  - name: board
    type: fakegpio
    fakegpio:
      chip: gpiochip0
      pins:
        gpio21: {doses: true, debounce: 5ms}
devices:
  - id: tank-1
    driver: sim
    address: tank
    capabilities: [{name: level, kind: sensor, type: number}]
  - id: lamp-1
    driver: board
    address: gpio17
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true}}
  - id: doser-1
    area: greenhouse
    driver: board
    address: gpio21
    capabilities:
      - {name: dose, kind: actuator, type: bool, effects: {contained: true}}
  - id: button-1
    driver: board
    address: gpio4
    capabilities: [{name: pressed, kind: sensor, type: bool}]
`

// A device on a driver that is not the simulator is checked by its own
// driver, never by the simulator: the board's pins load, its floors are
// set, and the gateway builds the board through the registry.
func TestAnotherDriverTypeIsNotTheSimulator(t *testing.T) {
	b, err := Load("c.yaml", []byte(boardConfig))
	if err != nil {
		t.Fatal(err)
	}
	floors := map[string]devices.Floor{}
	for _, d := range b.Devices {
		floors[d.ID] = d.Capabilities[0].Floor
	}
	want := map[string]devices.Floor{
		"tank-1":   {},
		"lamp-1":   {Reaches: true},
		"doser-1":  {Reaches: true, Irreversible: true, Costs: true},
		"button-1": {Reaches: true},
	}
	if !reflect.DeepEqual(floors, want) {
		t.Errorf("floors = %+v, want %+v", floors, want)
	}
	var drivers []string
	for _, d := range b.Drivers {
		drivers = append(drivers, d.Name+" ("+d.Type+")")
	}
	if want := []string{"sim (sim)", "board (fakegpio)"}; !slices.Equal(drivers, want) {
		t.Fatalf("drivers = %v, want %v", drivers, want)
	}

	dir := t.TempDir()
	reg := openedDrivers(t, b, dir)
	e, ok := reg.Lookup("doser-1")
	board, isBoard := e.Driver.(*fakeBoard)
	if !ok || !isBoard {
		t.Fatalf("doser-1 is reached by %T, want the fake board", e.Driver)
	}
	if board.env.StateDir != dir || board.chip != "gpiochip0" || len(board.env.Devices) != 3 {
		t.Fatalf("the board was built with %+v, chip %q", board.env, board.chip)
	}
	// The driver gets its devices with the floors its factory set.
	if f := e.Device.Capabilities[0].Floor; !f.Irreversible || !f.Costs || !f.Reaches {
		t.Fatalf("the registry's doser-1.dose has floor %+v", f)
	}
	if err := e.Driver.Write(t.Context(), "lamp-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if r, err := e.Driver.Read(t.Context(), "lamp-1", "on"); err != nil || !r.Value.Bool {
		t.Fatalf("read-back of lamp-1 = %v, %v", r, err)
	}
}

// editBoard returns boardConfig with old replaced by new, once; it fails
// the test when old is not there, so that a case cannot test nothing.
func editBoard(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(boardConfig, old) {
		t.Fatalf("boardConfig has no %q", old)
	}
	return strings.Replace(boardConfig, old, new, 1)
}

// Whatever a driver's factory reports, and whatever is wrong in a driver's
// entry, is an error at its place in the file.
func TestDriverErrorsNameTheirPlace(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"option value", "debounce: 5ms", "debounce: soon",
			`c.yaml:9:41: drivers[1].fakegpio.pins.gpio21.debounce: "soon" is not a duration`},
		{"address", "address: gpio17", "address: gpio99",
			`c.yaml:17:14: devices[1].address: "gpio99" is not a pin of this board (write gpio0 to gpio27)`},
		{"unknown option", "chip: gpiochip0", "chp: gpiochip0",
			`c.yaml:7:7: drivers[1].fakegpio.chp: unknown key "chp" (known keys here: chip, pins)`},
		{"option of the wrong kind", "chip: gpiochip0", "chip: [0]",
			`c.yaml:7:13: drivers[1].fakegpio.chip: expected a single value (text), found a list`},
		{"options as text", "    fakegpio:\n      chip: gpiochip0\n      pins:\n        gpio21: {doses: true, debounce: 5ms}\n", "    fakegpio: gpiochip0\n",
			`c.yaml:6:15: drivers[1].fakegpio: expected a mapping of keys (key: value), found the text "gpiochip0"`},
		{"options of another type", "    fakegpio:\n", "    sim: {}\n    fakegpio:\n",
			`c.yaml:6:10: drivers[1].sim: sim options on a fakegpio driver`},
		{"unknown key in the entry", "    type: fakegpio\n", "    type: fakegpio\n    chip: gpiochip0\n",
			`c.yaml:6:11: drivers[1].chip: unknown key "chip" (known keys here: name, type, fakegpio)`},
		{"unknown type", "type: fakegpio", "type: canbus",
			`c.yaml:5:11: drivers[1].type: unknown driver type "canbus" (this build has: ` + strings.Join(devices.DriverTypes(), ", ") + `)`},
		{"floor narrowed: reversible", "{name: dose, kind: actuator, type: bool, effects: {contained: true}}", "{name: dose, kind: actuator, type: bool, effects: {reversible: true}}",
			`c.yaml:25:72: devices[2].capabilities[0].effects.reversible: driver board says doser-1.dose cannot be undone (irreversible); the configuration may declare more than the driver's floor, never less: write reversible: false or leave it out`},
		{"floor narrowed: reaches", "effects: {reversible: true, contained: true}}", "effects: {reversible: true, contained: true, reaches: false}}",
			`c.yaml:19:121: devices[1].capabilities[0].effects.reaches: driver board says lamp-1.on leaves this machine (reaches); the configuration may declare more than the driver's floor, never less: write reaches: true or leave it out`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Load("c.yaml", []byte(editBoard(t, tc.old, tc.new)))
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want %q", b, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error =\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !fileLineColumn.MatchString(line) {
					t.Errorf("error %q does not start with file:line:column", line)
				}
			}
		})
	}
}

// The effects a capability is judged with come from its kind, its
// driver's floor and its configuration, and Effects says which.
func TestEffectsSayWhereEachFieldCameFrom(t *testing.T) {
	b, err := Load("c.yaml", []byte(boardConfig+`  - id: pump-1
    driver: sim
    address: pump
    capabilities: [{name: "on", kind: actuator, type: bool, effects: {reversible: true, contained: true, costs: true}}]
  - id: heater-1
    driver: sim
    address: heater
    capabilities: [{name: "on", kind: actuator, type: bool}]
`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]EffectField{}
	for _, e := range b.Effects() {
		got[e.Device+"."+e.Capability] = e.Fields
		// Every wider field says where it came from.
		for _, f := range e.Fields {
			safe := map[string]string{"reads": "nothing", "writes": "nothing", "reaches": "false", "reversible": "true", "contained": "true", "costs": "false"}
			if (f.Value != safe[f.Name]) != (len(f.From) > 0) {
				t.Errorf("%s.%s: field %+v: a wider field must say where it came from, and only a wider one", e.Device, e.Capability, f)
			}
		}
	}
	const floor = "the driver's floor (board)"
	want := map[string][]EffectField{
		"tank-1.level": {{"reads", "tank-1", []string{fromSensorKind}}, {"writes", "nothing", nil},
			{"reaches", "false", nil}, {"reversible", "true", nil}, {"contained", "true", nil}, {"costs", "false", nil}},
		"button-1.pressed": {{"reads", "button-1", []string{fromSensorKind}}, {"writes", "nothing", nil},
			{"reaches", "true", []string{floor}}, {"reversible", "true", nil}, {"contained", "true", nil}, {"costs", "false", nil}},
		"lamp-1.on": {{"reads", "nothing", nil}, {"writes", "lamp-1", []string{fromActuatorKind}},
			{"reaches", "true", []string{floor}}, {"reversible", "true", nil}, {"contained", "true", nil}, {"costs", "false", nil}},
		"doser-1.dose": {{"reads", "nothing", nil}, {"writes", "greenhouse/doser-1", []string{fromActuatorKind}},
			{"reaches", "true", []string{floor}},
			{"reversible", "false", []string{floor, "the configuration (effects does not declare reversible: true)"}},
			{"contained", "true", nil},
			{"costs", "true", []string{floor}}},
		"pump-1.on": {{"reads", "nothing", nil}, {"writes", "pump-1", []string{fromActuatorKind}},
			{"reaches", "false", nil}, {"reversible", "true", nil}, {"contained", "true", nil},
			{"costs", "true", []string{"the driver's floor (sim)", "the configuration (effects.costs: true)"}}},
		"heater-1.on": {{"reads", "**", []string{fromWorst}}, {"writes", "**", []string{fromWorst}},
			{"reaches", "true", []string{fromWorst}}, {"reversible", "false", []string{fromWorst}},
			{"contained", "false", []string{fromWorst}}, {"costs", "true", []string{fromWorst}}},
	}
	for ref, w := range want {
		if !reflect.DeepEqual(got[ref], w) {
			t.Errorf("Effects of %s =\n  %+v\nwant\n  %+v", ref, got[ref], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Effects has %d capabilities, want %d", len(got), len(want))
	}
}
