package gpio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"periph.io/x/conn/v3/driver/driverreg"
	periphgpio "periph.io/x/conn/v3/gpio"

	"github.com/shadowgate/shadowgate/devices"
	gpioboard "github.com/shadowgate/shadowgate/firmware-fixtures/gpio-board"
	"github.com/shadowgate/shadowgate/value"
)

// These tests register pins in periph's gpioreg, which is global to the
// process: none of them runs in parallel.

// leakCheck registers goleak's check as the test's first cleanup, so that it
// runs after every other.
func leakCheck(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// machine plays a machine with no GPIO chip and no host driver for the
// length of the test, so that a board's pins are the only ones.
func machine(t *testing.T, st *driverreg.State, chipList []string, chipErr error) {
	t.Helper()
	oldInit, oldChips := hostInit, chips
	hostInit = func() (*driverreg.State, error) { return st, nil }
	chips = func() ([]string, error) { return chipList, chipErr }
	t.Cleanup(func() { hostInit, chips = oldInit, oldChips })
}

// newBoard makes a fake board, closed at the end of the test.
func newBoard(t *testing.T, o gpioboard.Options) *gpioboard.Board {
	t.Helper()
	b, err := gpioboard.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing the board: %v", err)
		}
	})
	return b
}

// logBuffer is a log a test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// build makes a driver of devs with lines, its backoff short, not open.
func build(t *testing.T, log *logBuffer, devs []devices.Device, lines map[string]Line) *Driver {
	t.Helper()
	o := Options{Devices: devs, Lines: lines, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if log != nil {
		o.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	d.backoffMin, d.backoffMax = 5*time.Millisecond, 20*time.Millisecond
	return d
}

// open builds and opens a driver, closed at the end of the test.
func open(t *testing.T, devs []devices.Device, lines map[string]Line) *Driver {
	t.Helper()
	d := build(t, nil, devs, lines)
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil && !errors.Is(err, devices.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// watcher collects what a driver's Watch tells.
type watcher struct {
	t  *testing.T
	ch chan devices.Notice
	// initial are the inputs' levels Watch told first.
	initial []devices.Notice
}

// watch runs d.Watch until the end of the test.
func watch(t *testing.T, d *Driver) *watcher {
	t.Helper()
	w := &watcher{t: t, ch: make(chan devices.Notice, 256)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Watch(ctx, func(n devices.Notice) { w.ch <- n })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// Watch tells only of what happens once it has subscribed.
	waitFor(t, "Watch subscribes", func() bool {
		d.hub.mu.Lock()
		defer d.hub.mu.Unlock()
		return len(d.hub.subs) > 0
	})
	inputs := 0
	for _, l := range d.lines {
		l.mu.Lock()
		if !l.output && l.lost == nil && l.pin != nil {
			inputs++
		}
		l.mu.Unlock()
	}
	for range inputs {
		w.initial = append(w.initial, w.next())
	}
	return w
}

// next returns the next notice, failing the test when none comes in 5s.
func (w *watcher) next() devices.Notice {
	w.t.Helper()
	select {
	case n := <-w.ch:
		return n
	case <-time.After(5 * time.Second):
		w.t.Fatal("no notice within 5s")
	}
	return devices.Notice{}
}

// reading returns the next notice, which must be a reading of device.
func (w *watcher) reading(device string) devices.Reading {
	w.t.Helper()
	n := w.next()
	if n.Device != device || n.Reading == nil {
		w.t.Fatalf("notice %+v, want a reading of %s", n, device)
	}
	return *n.Reading
}

// read reads device's capability as a bool.
func read(t *testing.T, d *Driver, device, capability string) bool {
	t.Helper()
	r, err := d.Read(t.Context(), device, capability)
	if err != nil {
		t.Fatalf("Read(%s.%s): %v", device, capability, err)
	}
	if r.Value.Type != value.TypeBool || r.Quality != devices.QualityGood {
		t.Fatalf("Read(%s.%s) = %+v, want a good bool", device, capability, r)
	}
	return r.Value.Bool
}

// waitFor waits up to 5s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func ids(devs []devices.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.ID)
	}
	return out
}

// An unknown pin names the device and the pin, and lists the pins there are.
func TestUnknownPinListsThePins(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	newBoard(t, gpioboard.Options{Aliases: map[string]string{"P1_11": "GPIO17"}})
	d := build(t, nil, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO99")}, nil)
	err := d.Open(t.Context())
	for _, want := range []string{`open pump-fb: no pin "GPIO99" on this machine`, "the pins on this machine are GPIO17, GPIO22, GPIO27", "their other names are P1_11"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pump-relay") {
		t.Errorf("Open = %v, naming a device whose pin exists", err)
	}
	if d.Devices() != nil {
		t.Error("a driver that failed to open lists devices")
	}
}

func TestTruncatedPinList(t *testing.T) {
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("GPIO%d", i))
	}
	if got := truncate(names); !strings.HasSuffix(got, "GPIO23 and 6 more") || strings.Contains(got, "GPIO24") {
		t.Fatalf("truncate = %q", got)
	}
}

// Without any pin, the error says why: no chip, or no permission to use it.
func TestNoPinSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    *driverreg.State
		chips []string
		err   error
		want  string
	}{
		{"no chip", &driverreg.State{}, nil, nil, "no GPIO chip was found on this machine"},
		{"not linux", &driverreg.State{}, nil, fmt.Errorf("gpio: %w", errors.ErrUnsupported), "Linux's GPIO character devices"},
		{"chip not allowed", &driverreg.State{}, []string{"/dev/gpiochip0"}, &fs.PathError{Op: "open", Path: "/dev/gpiochip0", Err: fs.ErrPermission},
			"the GPIO chips /dev/gpiochip0 cannot be opened (open /dev/gpiochip0: permission denied); add the service user to the gpio group"},
		{"host driver not allowed", &driverreg.State{Failed: []driverreg.DriverFailure{{D: fakeImpl("bcm283x-gpio"), Err: errors.New("need more access, try as root: permission denied")}}},
			[]string{"/dev/gpiochip0"}, nil, "periph's bcm283x-gpio: need more access, try as root: permission denied; add the service user to the gpio group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			machine(t, tc.st, tc.chips, tc.err)
			log := &logBuffer{}
			d := build(t, log, []devices.Device{actuator("pump-relay", "GPIO17")}, nil)
			err := d.Open(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `open pump-relay: no pin "GPIO17"`) {
				t.Fatalf("Open = %v, want it to name the device and say %q", err, tc.want)
			}
			if len(tc.st.Failed) > 0 && !strings.Contains(log.String(), `msg="periph host driver failed" driver=bcm283x-gpio`) {
				t.Errorf("the host driver's failure was not logged:\n%s", log)
			}
		})
	}
}

// fakeImpl is a periph host driver by name.
type fakeImpl string

func (f fakeImpl) String() string          { return string(f) }
func (f fakeImpl) Prerequisites() []string { return nil }
func (f fakeImpl) After() []string         { return nil }
func (f fakeImpl) Init() (bool, error)     { return false, nil }

// Two devices on one physical pin under two names are refused, naming both.
func TestOnePinUnderTwoNames(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	newBoard(t, gpioboard.Options{Aliases: map[string]string{"P1_11": "GPIO17"}})
	d := build(t, nil, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "P1_11")}, nil)
	err := d.Open(t.Context())
	want := "open pump-fb: pin P1_11 is pin GPIO17, which pump-relay (GPIO17) uses already: two devices on one line"
	if err == nil || err.Error() != want {
		t.Fatalf("Open = %v, want %q", err, want)
	}
}

// An active-low output is driven low for true; its initial value is set at
// open; the read-back is the line's level, inverted.
func TestActiveLowOutput(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17")}, map[string]Line{"pump-relay": {ActiveLow: true, Initial: ptr(false)}})
	if got := b.Relay().Outs(); !slices.Equal(got, []periphgpio.Level{periphgpio.High}) {
		t.Fatalf("Outs at open = %v, want [High]: false on an active-low line", got)
	}
	if read(t, d, "pump-relay", "on") {
		t.Fatal("the relay reads true after an initial false")
	}
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if got := b.Relay().Outs(); !slices.Equal(got, []periphgpio.Level{periphgpio.High, periphgpio.Low}) {
		t.Fatalf("Outs = %v, want [High Low]", got)
	}
	if !read(t, d, "pump-relay", "on") || b.Relay().Read() != periphgpio.Low {
		t.Fatal("true did not read back as true from a low line")
	}
}

// Without an initial value an output keeps its level at open; its read-back
// is the line's.
func TestOutputKeepsItsLevelWithoutInitial(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	if err := b.Relay().Out(periphgpio.High); err != nil {
		t.Fatal(err)
	}
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17")}, nil)
	if got := b.Relay().Outs(); len(got) != 1 {
		t.Fatalf("Outs = %v: the driver drove the line at open without an initial value", got)
	}
	if !read(t, d, "pump-relay", "on") {
		t.Fatal("the read-back is not the line's level, High")
	}
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(false)); err != nil {
		t.Fatal(err)
	}
	if read(t, d, "pump-relay", "on") || b.Relay().Read() != periphgpio.Low {
		t.Fatal("the write of false did not read back")
	}
}

// The read-back of an output on periph's character-device line is the level
// the driver drives: reading that line would make it an input.
func TestReadBackOfACharacterDeviceLine(t *testing.T) {
	l := &line{dev: actuator("pump-relay", "GPIO17"), output: true, readsBack: false}
	d := &Driver{byID: map[string]*line{"pump-relay": l}, state: stateOpen, now: time.Now}
	if _, err := d.Read(t.Context(), "pump-relay", "on"); err == nil || !strings.Contains(err.Error(), "has not been driven") {
		t.Fatalf("Read of a line never driven = %v, want it to say so", err)
	}
	l.driven, l.drivenKnown = periphgpio.High, true
	if !read(t, d, "pump-relay", "on") {
		t.Fatal("the read-back is not the level driven")
	}
}

// A write, then the feedback's edge, told through Watch after the delay.
func TestFeedbackToldAfterTheDelay(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	const delay = 40 * time.Millisecond
	b := newBoard(t, gpioboard.Options{Delay: delay})
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27")},
		map[string]Line{"pump-relay": {Initial: ptr(false)}, "pump-fb": {Pull: PullDown, Debounce: 5 * time.Millisecond}})
	if b.Feedback().Edge() != periphgpio.BothEdges || b.Feedback().Pull() != periphgpio.PullDown {
		t.Fatalf("the feedback is set up with %s, %s; want both edges and a pull-down", b.Feedback().Edge(), b.Feedback().Pull())
	}
	w := watch(t, d)
	start := time.Now()
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	r := w.reading("pump-fb")
	if !r.Value.Bool || r.At.Sub(start) < delay {
		t.Fatalf("feedback reading %+v %s after the write; want true, after %s", r, r.At.Sub(start), delay)
	}
	if !read(t, d, "pump-fb", "state") {
		t.Fatal("Read of the feedback is not the level told")
	}
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(false)); err != nil {
		t.Fatal(err)
	}
	if r := w.reading("pump-fb"); r.Value.Bool {
		t.Fatal("the feedback did not follow the relay off")
	}
}

// A bouncing contact is told once, at the level it settles on.
func TestDebounce(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	d := open(t, []devices.Device{sensor("float-1", "GPIO22")}, map[string]Line{"float-1": {Pull: PullUp, Debounce: 20 * time.Millisecond}})
	w := watch(t, d)
	b.SetFloat(periphgpio.High, periphgpio.Low, periphgpio.High, periphgpio.Low, periphgpio.High)
	if r := w.reading("float-1"); !r.Value.Bool {
		t.Fatalf("the burst was told as %+v, want the level it settled on, true", r)
	}
	// A later change is the next notice: the burst was told once.
	b.SetFloat(periphgpio.Low)
	if r := w.reading("float-1"); r.Value.Bool {
		t.Fatalf("after the burst came %+v, want the later change to false", r)
	}
}

// An input is polled when edges cannot be had: its chip cannot tell of
// them, or the configuration says edge: none.
func TestPolling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		board gpioboard.Options
		line  Line
	}{
		{"no edge detection", gpioboard.Options{NoEdges: true}, Line{Pull: PullDown, Poll: 10 * time.Millisecond, Debounce: 5 * time.Millisecond}},
		{"edge none", gpioboard.Options{}, Line{Pull: PullDown, NoEdges: true, Poll: 10 * time.Millisecond, Debounce: 5 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			machine(t, &driverreg.State{}, nil, nil)
			b := newBoard(t, tc.board)
			d := open(t, []devices.Device{sensor("float-1", "GPIO22")}, map[string]Line{"float-1": tc.line})
			if b.Float().Edge() != periphgpio.NoEdge {
				t.Fatalf("the polled input asks for %s edges", b.Float().Edge())
			}
			w := watch(t, d)
			b.SetFloat(periphgpio.High)
			if r := w.reading("float-1"); !r.Value.Bool {
				t.Fatalf("reading %+v, want true", r)
			}
			if !read(t, d, "float-1", "state") {
				t.Fatal("Read is not the level told")
			}
		})
	}
}

// A stuck relay reads back what was written; only the feedback disagrees.
func TestStuckRelay(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{Delay: 5 * time.Millisecond})
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27")},
		map[string]Line{"pump-relay": {Initial: ptr(false)}, "pump-fb": {Debounce: 5 * time.Millisecond}})
	w := watch(t, d)
	b.Stick(true)
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if !read(t, d, "pump-relay", "on") {
		t.Fatal("the stuck relay does not read back what was written")
	}
	if b.Pending() != 0 || read(t, d, "pump-fb", "state") {
		t.Fatal("the feedback of a stuck relay follows it")
	}
	// Freed, the contact moves: the first notice is the feedback's true.
	b.Stick(false)
	if r := w.reading("pump-fb"); !r.Value.Bool {
		t.Fatalf("reading %+v, want the feedback's true once the relay is free", r)
	}
}

// An Out that fails is a write that did not happen: Offline, and the line
// is lost, then found again, not driven.
func TestFailedOutLosesTheLineUntilItIsBack(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27")},
		map[string]Line{"pump-relay": {Initial: ptr(false)}})
	w := watch(t, d)
	b.Relay().FailNextOut(nil)
	err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true))
	if devices.Classify(err) != devices.OutcomeOffline || !errors.Is(err, gpioboard.ErrOutFailed) {
		t.Fatalf("Write with a failing Out = %v, want offline with the cause", err)
	}
	n := w.next()
	if n.Device != "pump-relay" || n.Lost == nil || !errors.Is(n.Lost, gpioboard.ErrOutFailed) {
		t.Fatalf("notice %+v, want pump-relay lost with the cause", n)
	}
	if n := w.next(); n.Device != "pump-relay" || !n.Found {
		t.Fatalf("notice %+v, want pump-relay found", n)
	}
	if got := ids(d.Devices()); !slices.Equal(got, []string{"pump-relay", "pump-fb"}) {
		t.Fatalf("Devices after found = %v", got)
	}
	if d.Why("pump-relay") != nil || d.Health(t.Context()) != nil {
		t.Fatal("a found line still has a reason to be lost")
	}
	// Found again, it is not driven at all: not back to where a command
	// left it, nor to its initial level (either would be an act nobody
	// judged). A read asks the line, which this board can tell.
	want := []periphgpio.Level{periphgpio.Low, periphgpio.High}
	if got := b.Relay().Outs(); !slices.Equal(got, want) {
		t.Fatalf("Outs = %v, want %v", got, want)
	}
	if read(t, d, "pump-relay", "on") {
		t.Fatal("the relay reads the failed write")
	}
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true)); err != nil || !read(t, d, "pump-relay", "on") {
		t.Fatalf("a write after the line was found = %v", err)
	}
}

// While a line is lost it is not listed, its reads and writes are offline,
// and Why and Health say why.
func TestLostLineIsOffline(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27")}, nil)
	d.backoffMin, d.backoffMax = time.Hour, time.Hour // stays lost
	b.Relay().FailNextOut(&fs.PathError{Op: "ioctl", Path: "/dev/gpiochip0", Err: fs.ErrPermission})
	err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true))
	if devices.Classify(err) != devices.OutcomeOffline || !strings.Contains(err.Error(), "add the service user to the gpio group") {
		t.Fatalf("Write refused for want of permission = %v, want offline with the hint", err)
	}
	if got := ids(d.Devices()); !slices.Equal(got, []string{"pump-fb"}) {
		t.Fatalf("Devices = %v, want only pump-fb", got)
	}
	if why := d.Why("pump-relay"); why == nil || !errors.Is(why, fs.ErrPermission) {
		t.Fatalf("Why = %v", why)
	}
	if err := d.Health(t.Context()); err == nil || !strings.Contains(err.Error(), "1 of 2 GPIO lines lost: pump-relay (GPIO17)") {
		t.Fatalf("Health = %v", err)
	}
	if _, err := d.Read(t.Context(), "pump-relay", "on"); devices.Classify(err) != devices.OutcomeOffline {
		t.Fatalf("Read of a lost line = %v, want offline", err)
	}
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(false)); devices.Classify(err) != devices.OutcomeOffline {
		t.Fatalf("Write to a lost line = %v, want offline", err)
	}
	if got := b.Relay().Outs(); len(got) != 1 {
		t.Fatalf("Outs = %v: a lost line was driven", got)
	}
}

// A board that goes away loses its lines; back, they are found again.
func TestUnpluggedBoard(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b, err := gpioboard.New(gpioboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := open(t, []devices.Device{sensor("float-1", "GPIO22")}, map[string]Line{"float-1": {NoEdges: true, Poll: 5 * time.Millisecond}})
	w := watch(t, d)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := w.next(); n.Device != "float-1" || n.Lost == nil || !strings.Contains(n.Lost.Error(), "no longer registered") {
		t.Fatalf("notice %+v, want float-1 lost", n)
	}
	b = newBoard(t, gpioboard.Options{})
	b.SetFloat(periphgpio.High)
	if n := w.next(); n.Device != "float-1" || !n.Found {
		t.Fatalf("notice %+v, want float-1 found", n)
	}
	if r := w.reading("float-1"); !r.Value.Bool {
		t.Fatalf("reading %+v, want the new board's true", r)
	}
}

// The driver's errors say what became of the call.
func TestTypedOutcomes(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	newBoard(t, gpioboard.Options{})
	d := build(t, nil, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27")}, nil)
	ctx := t.Context()
	if err := d.Write(ctx, "pump-relay", "on", value.Bool(true)); devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("a write before Open = %v, want offline", err)
	}
	if err := d.Open(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"a number", d.Write(ctx, "pump-relay", "on", value.Number(1)), devices.ErrBadRequest},
		{"a write to a sensor", d.Write(ctx, "pump-fb", "state", value.Bool(true)), devices.ErrNotWritable},
		{"an unknown device", d.Write(ctx, "pump-9", "on", value.Bool(true)), devices.ErrUnknownDevice},
		{"an unknown capability", d.Write(ctx, "pump-relay", "speed", value.Bool(true)), devices.ErrUnknownCapability},
	} {
		if devices.Classify(tc.err) != devices.OutcomeBadRequest || !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if err := d.Open(ctx); err == nil {
		t.Error("a second Open succeeded")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Read(ctx, "pump-fb", "state"); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("a read after Close = %v, want ErrClosed", err)
	}
	if err := d.Close(); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("a second Close = %v, want ErrClosed", err)
	}
	if d.Devices() != nil || !errors.Is(d.Health(ctx), devices.ErrClosed) {
		t.Error("a closed driver lists devices or reports healthy")
	}
}

// Close halts every pin, stops every goroutine (goleak) and ends Watch.
func TestCloseHaltsAndStops(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	d := build(t, nil, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27"), sensor("float-1", "GPIO22")}, nil)
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		d.Watch(context.Background(), func(devices.Notice) {})
	}()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watched:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after Close")
	}
	for _, p := range []*gpioboard.Pin{b.Relay(), b.Feedback(), b.Float()} {
		if p.Halts() == 0 {
			t.Errorf("%s was not halted", p)
		}
	}
}
