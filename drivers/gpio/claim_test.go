package gpio

import (
	"errors"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/driver/driverreg"
	periphgpio "periph.io/x/conn/v3/gpio"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	gpioboard "github.com/shadowgate/shadowgate/firmware-fixtures/gpio-board"
	"github.com/shadowgate/shadowgate/value"
)

// TestOneLineOneDriver: two gpio drivers of one gateway cannot reach one
// physical pin, under any two of its names; the pin is free again once the
// first driver closes.
func TestOneLineOneDriver(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	newBoard(t, gpioboard.Options{Aliases: map[string]string{"P1_11": "GPIO17"}})
	first := open(t, []devices.Device{actuator("pump-relay", "GPIO17")}, nil)
	second := build(t, nil, []devices.Device{actuator("pump-relay-2", "P1_11")}, nil)
	err := second.Open(t.Context())
	if err == nil || !strings.Contains(err.Error(), "pin P1_11 (GPIO17) is reached by another gpio driver") {
		t.Fatalf("a second driver on one pin opened: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := second.Open(t.Context()); err != nil {
		t.Fatalf("the pin was not given back when its driver closed: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConfigureClaimsEachLine: the factory claims each device's pin, so
// that the gateway can refuse a second driver on it at check time.
func TestConfigureClaimsEachLine(t *testing.T) {
	in := &devicetest.Config{Driver: "pi"}
	if configure(in, []devices.Device{actuator("pump-relay", "GPIO17"), sensor("pump-fb", "GPIO27")}) == nil {
		t.Fatalf("problems: %q", in.Problems())
	}
	if got := strings.Join(in.Claims(), ","); got != "GPIO line GPIO17,GPIO line GPIO27" {
		t.Fatalf("claims = %s", got)
	}
}

// TestFailedFirstOutIsUnknown: an Out that fails on a line this driver
// never drove may have made it an output already: the outcome is unknown.
func TestFailedFirstOutIsUnknown(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	d := open(t, []devices.Device{actuator("pump-relay", "GPIO17")}, nil)
	b.Relay().FailNextOut(nil)
	if err := d.Write(t.Context(), "pump-relay", "on", value.Bool(true)); devices.Classify(err) != devices.OutcomeUnknown {
		t.Fatalf("a first Out that failed = %v, want an unknown outcome", err)
	}
}

// TestWatchTellsWhereEachInputStands: a watcher learns each input's level
// first, so a contact that never moves is known too.
func TestWatchTellsWhereEachInputStands(t *testing.T) {
	leakCheck(t)
	machine(t, &driverreg.State{}, nil, nil)
	b := newBoard(t, gpioboard.Options{})
	b.SetFloat(periphgpio.High)
	d := open(t, []devices.Device{sensor("float-1", "GPIO22"), actuator("pump-relay", "GPIO17")}, nil)
	w := watch(t, d)
	if len(w.initial) != 1 || w.initial[0].Device != "float-1" || w.initial[0].Reading == nil || w.initial[0].Reading.Value != value.Bool(true) {
		t.Fatalf("Watch told first %+v, want float-1 reading true", w.initial)
	}
}

// TestCloseDuringAFailingOpen: a Close that comes while Open is setting up
// waits for it, and stands: the driver stays closed, and a second Close
// says so instead of panicking.
func TestCloseDuringAFailingOpen(t *testing.T) {
	leakCheck(t)
	release := make(chan struct{})
	old := hostInit
	hostInit = func() (*driverreg.State, error) {
		<-release
		return nil, errors.New("host init failed")
	}
	t.Cleanup(func() { hostInit = old })
	d := build(t, nil, []devices.Device{actuator("pump-relay", "GPIO17")}, nil)
	opened := make(chan error, 1)
	go func() { opened <- d.Open(t.Context()) }()
	waitFor(t, "Open under way", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.state == stateOpening
	})
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v before the Open in progress ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-opened; err == nil {
		t.Fatal("Open succeeded")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := d.Close(); !errors.Is(err, devices.ErrClosed) {
		t.Fatalf("a second Close = %v, want ErrClosed", err)
	}
	if err := d.Open(t.Context()); !errors.Is(err, devices.ErrClosed) {
		t.Fatalf("Open after Close = %v, want ErrClosed", err)
	}
}
