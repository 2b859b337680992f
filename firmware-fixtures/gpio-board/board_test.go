package gpioboard

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
)

// newBoard makes a board that is closed at the end of the test, and checks
// then that its goroutine stopped and its names are free.
func newBoard(t *testing.T, o Options) *Board {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, n := range []string{"GPIO17", "GPIO27", "GPIO22", "P1_11"} {
			if gpioreg.ByName(n) != nil {
				t.Errorf("%s is still registered after Close", n)
			}
		}
	})
	return b
}

// waitFor waits up to 5s for cond, polling.
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

func TestPinsAreRegisteredUnderTheirNames(t *testing.T) {
	b := newBoard(t, Options{Aliases: map[string]string{"P1_11": "GPIO17"}})
	for name, want := range map[string]*Pin{"GPIO17": b.Relay(), "GPIO27": b.Feedback(), "GPIO22": b.Float()} {
		if got := gpioreg.ByName(name); got != want {
			t.Errorf("ByName(%s) = %v, want the board's pin %v", name, got, want)
		}
	}
	alias := gpioreg.ByName("P1_11")
	if alias == nil || alias.Name() != "P1_11" {
		t.Fatalf("ByName(P1_11) = %v, want the alias", alias)
	}
	if r, ok := alias.(gpio.RealPin); !ok || r.Real() != b.Relay() {
		t.Fatalf("the alias P1_11 does not lead to the relay: %v", alias)
	}
	if b.Relay().Number() != 17 || b.Float().Number() != 22 {
		t.Errorf("numbers %d, %d; want 17, 22", b.Relay().Number(), b.Float().Number())
	}
	// A second board on the same names fails and leaves the first alone.
	if _, err := New(Options{}); err == nil {
		t.Fatal("a second board on the same names was made")
	}
	if gpioreg.ByName("GPIO17") != b.Relay() || gpioreg.ByName("GPIO22") != b.Float() {
		t.Fatal("the failed second board took the first board's pins")
	}
}

func TestCustomNames(t *testing.T) {
	b := newBoard(t, Options{Relay: "RELAY", Feedback: "FB_3", Float: "FLOAT"})
	if gpioreg.ByName("RELAY") != b.Relay() || gpioreg.ByName("FB_3") != b.Feedback() || gpioreg.ByName("GPIO17") != nil {
		t.Fatal("the pins are not registered under the names given")
	}
	if b.Relay().Number() != -1 || b.Feedback().Number() != 3 {
		t.Errorf("numbers %d, %d; want -1, 3", b.Relay().Number(), b.Feedback().Number())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if gpioreg.ByName("RELAY") != nil {
		t.Fatal("RELAY is registered after Close")
	}
}

// The feedback follows the relay after the delay, as an edge.
func TestFeedbackFollowsTheRelayAfterTheDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	b := newBoard(t, Options{Delay: delay})
	fb := b.Feedback()
	if err := fb.In(gpio.PullDown, gpio.BothEdges); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Relay().Out(gpio.High); err != nil {
		t.Fatal(err)
	}
	if !fb.WaitForEdge(5 * time.Second) {
		t.Fatal("no edge on the feedback")
	}
	if took := time.Since(start); took < delay {
		t.Errorf("the feedback followed after %s, before the delay %s", took, delay)
	}
	if fb.Read() != gpio.High || b.Contact() != gpio.High {
		t.Fatalf("feedback %s, contact %s; want High, High", fb.Read(), b.Contact())
	}
	if got := b.Relay().Outs(); !slices.Equal(got, []gpio.Level{gpio.High}) {
		t.Errorf("Outs = %v, want [High]", got)
	}
}

// A stuck relay takes the level on its line but its contact stays, so the
// feedback does not follow; freed, it follows.
func TestStuckRelay(t *testing.T) {
	b := newBoard(t, Options{Delay: time.Millisecond})
	b.Stick(true)
	if err := b.Relay().Out(gpio.High); err != nil {
		t.Fatal(err)
	}
	if b.Relay().Read() != gpio.High {
		t.Error("the stuck relay's line does not read the level written")
	}
	if b.Contact() != gpio.Low || b.Pending() != 0 {
		t.Fatalf("contact %s with %d changes pending; want Low and none", b.Contact(), b.Pending())
	}
	if b.Feedback().Read() != gpio.Low {
		t.Fatal("the feedback of a stuck relay moved")
	}
	b.Stick(false)
	waitFor(t, "the freed relay's feedback goes High", func() bool { return b.Feedback().Read() == gpio.High })
}

// A cut feedback wire rests at its pull, whatever the relay does.
func TestCutFeedback(t *testing.T) {
	b := newBoard(t, Options{})
	fb := b.Feedback()
	if err := fb.In(gpio.PullUp, gpio.BothEdges); err != nil {
		t.Fatal(err)
	}
	if fb.Read() != gpio.Low {
		t.Fatal("the pull-up overrode the contact driving the feedback")
	}
	b.CutFeedback(true)
	if fb.Read() != gpio.High || !fb.WaitForEdge(time.Second) {
		t.Fatal("the cut feedback did not go to its pull-up level with an edge")
	}
	for _, l := range []gpio.Level{gpio.High, gpio.Low} {
		if err := b.Relay().Out(l); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the relay's changes are delivered", func() bool { return b.Pending() == 0 })
	if fb.Read() != gpio.High {
		t.Fatal("the cut feedback followed the relay")
	}
	if err := b.Relay().Out(gpio.High); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay's change is delivered", func() bool { return b.Pending() == 0 })
	b.CutFeedback(false)
	if fb.Read() != gpio.High || b.Contact() != gpio.High {
		t.Fatal("the mended feedback does not show the contact")
	}
	if err := b.Relay().Out(gpio.Low); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mended feedback follows", func() bool { return fb.Read() == gpio.Low })
}

// The float switch bounces through levels at once and rests on the last;
// every change is an edge.
func TestFloatSwitch(t *testing.T) {
	b := newBoard(t, Options{})
	fl := b.Float()
	if err := fl.In(gpio.PullUp, gpio.BothEdges); err != nil {
		t.Fatal(err)
	}
	b.SetFloat(gpio.High, gpio.Low, gpio.High)
	if fl.Read() != gpio.High {
		t.Fatalf("float = %s, want High", fl.Read())
	}
	n := 0
	for fl.WaitForEdge(0) {
		n++
	}
	if n != 3 {
		t.Fatalf("%d edges, want 3", n)
	}
	// Without edge detection, the level changes and no edge is queued.
	if err := fl.In(gpio.PullUp, gpio.NoEdge); err != nil {
		t.Fatal(err)
	}
	b.SetFloat(gpio.Low)
	if fl.Read() != gpio.Low || fl.WaitForEdge(time.Second) {
		t.Fatal("a line without edge detection gave an edge, or did not change")
	}
}

func TestFailNextOut(t *testing.T) {
	b := newBoard(t, Options{})
	r := b.Relay()
	r.FailNextOut(nil)
	if err := r.Out(gpio.High); !errors.Is(err, ErrOutFailed) {
		t.Fatalf("Out after FailNextOut = %v, want ErrOutFailed", err)
	}
	if r.Read() != gpio.Low || b.Contact() != gpio.Low {
		t.Fatal("a failed Out moved the line")
	}
	if err := r.Out(gpio.High); err != nil || r.Read() != gpio.High {
		t.Fatalf("the Out after the failed one = %v, level %s", err, r.Read())
	}
	if got := r.Outs(); !slices.Equal(got, []gpio.Level{gpio.High, gpio.High}) {
		t.Fatalf("Outs = %v, want both calls", got)
	}
}

// Halt unblocks a WaitForEdge that would wait forever.
func TestHaltUnblocksWaitForEdge(t *testing.T) {
	b := newBoard(t, Options{})
	fl := b.Float()
	if err := fl.In(gpio.PullUp, gpio.BothEdges); err != nil {
		t.Fatal(err)
	}
	got := make(chan bool)
	go func() { got <- fl.WaitForEdge(-1) }()
	// Halt until the waiter is released: a Halt before it waits is lost.
	for {
		if err := fl.Halt(); err != nil {
			t.Fatal(err)
		}
		select {
		case edge := <-got:
			if edge {
				t.Fatal("WaitForEdge reported an edge after Halt")
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestNoEdges(t *testing.T) {
	b := newBoard(t, Options{NoEdges: true})
	if err := b.Float().In(gpio.PullUp, gpio.BothEdges); err == nil {
		t.Fatal("In with edges succeeded on a board without edge detection")
	}
	if err := b.Float().In(gpio.PullUp, gpio.NoEdge); err != nil {
		t.Fatal(err)
	}
}
