package modbus

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	modbusboard "github.com/shadowgate/shadowgate/firmware-fixtures/modbus-board"
	"github.com/shadowgate/shadowgate/value"
)

// The devices of the tests: a climate sensor on unit 1 and a relay board
// on unit 2, both played by one modbus-board on a pseudo-terminal.
func testDevices() ([]devices.Device, map[string]byte, map[string]map[string]Point) {
	sensor := func(name string, t value.Type) devices.Capability {
		return devices.Capability{Name: name, Kind: devices.KindSensor, Type: t}
	}
	actuator := func(name string, t value.Type) devices.Capability {
		return devices.Capability{Name: name, Kind: devices.KindActuator, Type: t, ReadBack: true}
	}
	devs := []devices.Device{
		{ID: "th-1", Driver: "rs485", Address: "1", Capabilities: []devices.Capability{
			sensor("temperature", value.TypeNumber), sensor("humidity", value.TypeNumber),
			sensor("flow", value.TypeNumber), sensor("flow_le", value.TypeNumber), sensor("float_switch", value.TypeBool),
			actuator("setpoint", value.TypeNumber), actuator("total", value.TypeNumber), actuator("energy", value.TypeNumber),
			sensor("missing", value.TypeNumber),
		}},
		{ID: "relays-1", Driver: "rs485", Address: "2", Capabilities: []devices.Capability{
			actuator("pump", value.TypeBool), sensor("pump_feedback", value.TypeBool), actuator("auto", value.TypeBool),
		}},
	}
	points := map[string]map[string]Point{
		"th-1": {
			"temperature":  {Table: Input, Address: 0, Type: Int16, Scale: 0.1},
			"humidity":     {Table: Input, Address: 1, Type: Uint16, Scale: 0.1},
			"flow":         {Table: Input, Address: 2, Type: Float32},
			"flow_le":      {Table: Input, Address: 4, Type: Float32, Order: LittleWords},
			"float_switch": {Table: Discrete, Address: 8, Type: Bool},
			"setpoint":     {Table: Holding, Address: 0, Type: Int16, Scale: 0.1},
			"total":        {Table: Holding, Address: 2, Type: Uint32, Order: LittleWords},
			"energy":       {Table: Holding, Address: 4, Type: Int32, Scale: 2, Offset: -100},
			"missing":      {Table: Holding, Address: 100, Type: Uint16},
		},
		"relays-1": {
			"pump":          {Table: Coil, Address: 0, Type: Bool},
			"pump_feedback": {Table: Discrete, Address: 0, Type: Bool},
			"auto":          {Table: Holding, Address: 10, Type: Bool},
		},
	}
	return devs, map[string]byte{"th-1": 1, "relays-1": 2}, points
}

type rig struct {
	t     *testing.T
	board *modbusboard.Board
	link  string
	d     *Driver

	mu      sync.Mutex
	notices []devices.Notice
}

// newRig starts a board with units 1 and 2 behind a stable link, unless
// absent, and a driver on the link, opened, with quick timeouts.
func newRig(t *testing.T, absent bool) *rig {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
	r := &rig{t: t, link: filepath.Join(t.TempDir(), "ttyUSB0")}
	if !absent {
		r.plugIn()
	}
	devs, units, points := testDevices()
	d, err := New(Options{
		Settings: port.Settings{Path: r.link, Baud: 115200, DataBits: 8, StopBits: 1},
		Timeout:  100 * time.Millisecond, Retries: 2, Devices: devs, Units: units, Points: points,
		Reopen: port.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond},
		Probe:  port.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond}, CheckEvery: 30 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		d.Watch(ctx, func(n devices.Notice) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.notices = append(r.notices, n)
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-watched
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if r.board != nil {
			_ = r.board.Close()
		}
	})
	return r
}

func (r *rig) plugIn() {
	r.t.Helper()
	b, err := modbusboard.Start(modbusboard.Config{Units: []byte{1, 2}, Link: r.link})
	if err != nil {
		r.t.Fatal(err)
	}
	r.board = b
}

func (r *rig) read(device, capability string) (value.Value, error) {
	r.t.Helper()
	rd, err := r.d.Read(r.t.Context(), device, capability)
	if err == nil && rd.Quality != devices.QualityGood {
		r.t.Fatalf("read %s.%s: quality %v", device, capability, rd.Quality)
	}
	return rd.Value, err
}

func (r *rig) mustRead(device, capability string) value.Value {
	r.t.Helper()
	v, err := r.read(device, capability)
	if err != nil {
		r.t.Fatalf("read %s.%s: %v", device, capability, err)
	}
	return v
}

func (r *rig) write(device, capability string, v value.Value) error {
	r.t.Helper()
	return r.d.Write(r.t.Context(), device, capability, v)
}

// eventually waits up to 5 s for cond.
func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			r.t.Fatalf("waited 5s for %s", what)
		}
	}
}

func (r *rig) listed() []string {
	var ids []string
	for _, d := range r.d.Devices() {
		ids = append(ids, d.ID)
	}
	return ids
}

func (r *rig) noticesFor(device string) []devices.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []devices.Notice
	for _, n := range r.notices {
		if n.Device == device {
			out = append(out, n)
		}
	}
	return out
}

func TestDriverReadsEachType(t *testing.T) {
	r := newRig(t, false)
	if got := r.listed(); !slices.Equal(got, []string{"th-1", "relays-1"}) {
		t.Fatalf("Devices after Open = %v, want both", got)
	}
	r.board.SetTemperature(1, -3.7)
	r.board.SetHumidity(1, 55.5)
	r.board.SetFlow(1, 12.3)
	r.board.SetDiscrete(1, modbusboard.FloatSwitch, true)
	r.board.SetHolding(1, 2, 0x5678) // total, low word first
	r.board.SetHolding(1, 3, 0x1234)
	r.board.SetHolding(1, 4, 0xFFFF) // energy: int32 -1, ×2 - 100
	r.board.SetHolding(1, 5, 0xFFFF)
	for _, c := range []struct {
		device, capability string
		want               value.Value
	}{
		{"th-1", "temperature", value.Number(-3.7)},
		{"th-1", "humidity", value.Number(55.5)},
		{"th-1", "flow", value.Number(12.3)},
		{"th-1", "flow_le", value.Number(12.3)},
		{"th-1", "float_switch", value.Bool(true)},
		{"th-1", "total", value.Number(0x12345678)},
		{"th-1", "energy", value.Number(-102)},
		{"relays-1", "pump_feedback", value.Bool(false)},
	} {
		if got := r.mustRead(c.device, c.capability); !got.Equal(c.want) {
			t.Errorf("read %s.%s = %v, want %v", c.device, c.capability, got, c.want)
		}
	}
	if err := r.d.Health(t.Context()); err != nil {
		t.Errorf("Health = %v, want nil", err)
	}
}

func TestDriverWritesAndReadsBack(t *testing.T) {
	r := newRig(t, false)
	for _, c := range []struct {
		device, capability string
		v                  value.Value
		held               func(modbusboard.Tables) bool
	}{
		{"relays-1", "pump", value.Bool(true), func(s modbusboard.Tables) bool { return s.Coils[0] && s.Discrete[0] }},
		{"relays-1", "auto", value.Bool(true), func(s modbusboard.Tables) bool { return s.Holding[10] == 1 }},
		{"th-1", "setpoint", value.Number(21.5), func(s modbusboard.Tables) bool { return s.Holding[0] == 215 }},
		{"th-1", "setpoint", value.Number(-0.3), func(s modbusboard.Tables) bool { return s.Holding[0] == 0xFFFD }},
		{"th-1", "total", value.Number(70000), func(s modbusboard.Tables) bool { return s.Holding[2] == 70000&0xFFFF && s.Holding[3] == 1 }},
		{"th-1", "energy", value.Number(100), func(s modbusboard.Tables) bool { return s.Holding[4] == 0 && s.Holding[5] == 100 }},
	} {
		if err := r.write(c.device, c.capability, c.v); err != nil {
			t.Fatalf("write %s.%s %v: %v", c.device, c.capability, c.v, err)
		}
		unit := byte(1)
		if c.device == "relays-1" {
			unit = 2
		}
		if st, _ := r.board.State(unit); !c.held(st) {
			t.Errorf("after write %s.%s %v the board holds %+v", c.device, c.capability, c.v, st)
		}
		if got := r.mustRead(c.device, c.capability); !got.Equal(c.v) {
			t.Errorf("read-back of %s.%s = %v, want %v", c.device, c.capability, got, c.v)
		}
	}
	if got := r.mustRead("relays-1", "pump_feedback"); !got.Bool {
		t.Error("the pump's feedback contact did not close")
	}
	if n := r.board.Writes(2); n != 2 {
		t.Errorf("unit 2 received %d writes, want 2", n)
	}
}

func TestDriverStuckRelayReadsBackWhatIsThere(t *testing.T) {
	r := newRig(t, false)
	r.board.SetFaults(modbusboard.Faults{Stuck: []uint16{0}})
	if err := r.write("relays-1", "pump", value.Bool(true)); err != nil {
		t.Fatalf("write to a stuck relay: %v, want it answered", err)
	}
	if got := r.mustRead("relays-1", "pump"); got.Bool {
		t.Error("the read-back of a stuck relay says it moved")
	}
}

func TestDriverRefusalCarriesTheException(t *testing.T) {
	r := newRig(t, false)
	_, err := r.read("th-1", "missing")
	if code, ok := devices.RefusalCode(err); !ok || code != "0x02" || devices.Classify(err) != devices.OutcomeRefused {
		t.Fatalf("read of a register the board lacks = %v, want a refusal 0x02", err)
	}
	var re *devices.RefusedError
	if !errors.As(err, &re) || re.Detail != "illegal data address" {
		t.Errorf("the refusal says %+v, want illegal data address", re)
	}
	r.board.SetFaults(modbusboard.Faults{Busy: 1})
	err = r.write("relays-1", "pump", value.Bool(true))
	if code, _ := devices.RefusalCode(err); code != "0x06" {
		t.Errorf("a write to a busy board = %v, want a refusal 0x06", err)
	}
	if st, _ := r.board.State(2); st.Coils[0] || r.board.Writes(2) != 1 {
		t.Errorf("the refused write: coil %v, %d writes; want not carried out, sent once", st.Coils[0], r.board.Writes(2))
	}
	// An exception is an answer: the unit is not lost.
	if got := r.listed(); len(got) != 2 {
		t.Errorf("Devices after exceptions = %v", got)
	}
}

func TestDriverLostResponseOnWriteIsUnknown(t *testing.T) {
	r := newRig(t, false)
	r.board.SetFaults(modbusboard.Faults{Drop: 1})
	err := r.write("relays-1", "pump", value.Bool(true))
	if devices.Classify(err) != devices.OutcomeUnknown {
		t.Fatalf("a write whose answer was lost = %v, want an unknown outcome", err)
	}
	if st, _ := r.board.State(2); !st.Coils[0] || r.board.Writes(2) != 1 {
		t.Errorf("coil %v after %d writes; want carried out, and never sent again", st.Coils[0], r.board.Writes(2))
	}
	for _, f := range []modbusboard.Faults{{Garbage: 1}, {BadCRC: 1}, {Short: 1}, {WrongUnit: 1}} {
		r.board.SetFaults(f)
		if err := r.write("relays-1", "pump", value.Bool(false)); devices.Classify(err) != devices.OutcomeUnknown {
			t.Errorf("a write answered by %+v = %v, want an unknown outcome", f, err)
		}
	}
	if n := r.board.Writes(2); n != 5 {
		t.Errorf("the board received %d writes, want 5: none was tried again", n)
	}
}

func TestDriverRefusesBadValuesBeforeSending(t *testing.T) {
	r := newRig(t, false)
	before := r.board.Requests()
	for _, c := range []struct {
		capability string
		v          value.Value
	}{
		{"setpoint", value.Number(21.55)}, // not a whole tenth
		{"setpoint", value.Number(4000)},  // over int16 at ×0.1
		{"total", value.Number(-1)},       // a negative uint32
		{"setpoint", value.Bool(true)},    // a bool to a number
		{"energy", value.Number(math.Pi)}, // not a whole raw value
	} {
		err := r.write("th-1", c.capability, c.v)
		if devices.Classify(err) != devices.OutcomeBadRequest {
			t.Errorf("write th-1.%s %v = %v, want a bad request", c.capability, c.v, err)
		}
	}
	if err := r.write("th-1", "temperature", value.Number(1)); !errors.Is(err, devices.ErrNotWritable) {
		t.Errorf("write to a sensor = %v, want ErrNotWritable", err)
	}
	if n := r.board.Requests(); n != before {
		t.Errorf("the board received %d requests for values that cannot be written", n-before)
	}
}

func TestDriverRetriesReadsThroughNoise(t *testing.T) {
	r := newRig(t, false)
	r.board.SetHumidity(1, 40)
	for _, f := range []modbusboard.Faults{{Garbage: 1}, {BadCRC: 1}, {Short: 1}, {WrongUnit: 1}, {Drop: 2}} {
		noise := r.d.Stats().Noise
		r.board.SetFaults(f)
		if got, err := r.read("th-1", "humidity"); err != nil || got.Num != 40 {
			t.Errorf("read through %+v = %v, %v, want 40 after a retry", f, got, err)
		}
		if f.Drop == 0 && r.d.Stats().Noise != noise+1 {
			t.Errorf("noise counted %d after %+v, want %d", r.d.Stats().Noise, f, noise+1)
		}
	}
	// Noise on every attempt: an error, and not a refusal.
	r.board.SetFaults(modbusboard.Faults{BadCRC: 3})
	_, err := r.read("th-1", "humidity")
	if err == nil || !errors.Is(err, ErrBadCRC) || devices.Classify(err) == devices.OutcomeRefused {
		t.Errorf("read with three bad CRCs = %v, want ErrBadCRC", err)
	}
	if f := r.board.Faults(); f.BadCRC != 0 {
		t.Errorf("%d bad CRCs left: the read was not tried three times", f.BadCRC)
	}
	// Garbled answers are answers: the unit stays listed.
	if got := r.listed(); len(got) != 2 {
		t.Errorf("Devices after noise = %v", got)
	}
}

func TestDriverLosesAUnitThatStopsAnsweringAndFindsItAgain(t *testing.T) {
	r := newRig(t, false)
	r.board.SetFaults(modbusboard.Faults{Drop: 3})
	_, err := r.read("th-1", "temperature")
	if devices.Classify(err) != devices.OutcomeOffline {
		t.Fatalf("a read no answer came to = %v, want offline", err)
	}
	// Three requests in a row without an answer lose the unit, not the line.
	if r.d.Why("th-1") == nil {
		t.Fatal("th-1 is not lost after three requests without an answer")
	}
	// The probe finds it again once it answers.
	r.eventually("th-1 found again", func() bool { return len(r.noticesFor("th-1")) >= 2 })
	n := r.noticesFor("th-1")
	if n[0].Lost == nil || !n[1].Found {
		t.Errorf("notices for th-1 = %+v, want lost then found", n)
	}
	if len(r.noticesFor("relays-1")) != 0 {
		t.Errorf("relays-1 on unit 2 was told of: %+v", r.noticesFor("relays-1"))
	}
	if got := r.mustRead("th-1", "temperature"); got.Type != value.TypeNumber {
		t.Errorf("read after found = %v", got)
	}
}

func TestDriverPortUnpluggedAndBack(t *testing.T) {
	r := newRig(t, false)
	if err := r.write("relays-1", "pump", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if err := r.board.Unplug(); err != nil {
		t.Fatal(err)
	}
	// The adapter's node is gone: the driver notices without a request.
	r.eventually("both devices lost", func() bool { return len(r.listed()) == 0 })
	r.eventually("told of both", func() bool { return len(r.noticesFor("th-1")) > 0 && len(r.noticesFor("relays-1")) > 0 })
	for _, id := range []string{"th-1", "relays-1"} {
		if n := r.noticesFor(id); len(n) != 1 || n[0].Lost == nil {
			t.Errorf("notices for %s = %+v, want one Lost", id, n)
		}
	}
	if err := r.d.Health(t.Context()); err == nil {
		t.Error("Health = nil with the port gone")
	}
	_, err := r.read("relays-1", "pump")
	if devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("read while unplugged = %v, want offline", err)
	}
	if err := r.write("relays-1", "pump", value.Bool(false)); devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("write while unplugged = %v, want offline (nothing sent)", err)
	}
	if err := r.board.Replug(); err != nil {
		t.Fatal(err)
	}
	r.eventually("both devices found", func() bool { return len(r.listed()) == 2 })
	r.eventually("told of both", func() bool { return len(r.noticesFor("th-1")) > 1 && len(r.noticesFor("relays-1")) > 1 })
	for _, id := range []string{"th-1", "relays-1"} {
		if n := r.noticesFor(id); len(n) != 2 || !n[1].Found {
			t.Errorf("notices for %s = %+v, want Lost then Found", id, n)
		}
	}
	if got := r.mustRead("relays-1", "pump"); !got.Bool {
		t.Error("after the replug the pump reads off; the board kept it on")
	}
}

func TestDriverOpensWithoutItsPortAndFindsItLater(t *testing.T) {
	r := newRig(t, true)
	if got := r.listed(); len(got) != 0 {
		t.Fatalf("Devices with no port = %v", got)
	}
	if why := r.d.Why("th-1"); why == nil {
		t.Fatal("Why(th-1) = nil with no port")
	}
	r.plugIn()
	r.eventually("both devices found", func() bool { return len(r.listed()) == 2 })
	if err := r.d.Health(t.Context()); err != nil {
		t.Errorf("Health = %v", err)
	}
}

func TestDriverAfterClose(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	devs, units, points := testDevices()
	d, err := New(Options{Settings: port.Settings{Path: filepath.Join(t.TempDir(), "none"), Baud: 9600, DataBits: 8, StopBits: 1},
		Devices: devs, Units: units, Points: points})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(t.Context()); err != nil {
		t.Fatalf("Open without the port = %v, want nil (it keeps trying)", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Read(t.Context(), "th-1", "temperature"); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if err := d.Close(); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("Close twice = %v, want ErrClosed", err)
	}
}

func TestSilentInterval(t *testing.T) {
	if got := newBus(port.Settings{Baud: 9600, DataBits: 8, Parity: port.EvenParity, StopBits: 1}, time.Second).silent; got != 11*time.Second/9600*7/2 {
		t.Errorf("silent interval at 9600 8E1 = %v, want 3.5 characters", got)
	}
	if got := newBus(port.Settings{Baud: 115200, DataBits: 8, StopBits: 1}, time.Second).silent; got != 1750*time.Microsecond {
		t.Errorf("silent interval at 115200 = %v, want 1.75ms", got)
	}
}
