package gpioboard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/pin"
)

// ErrOutFailed is the error an Out returns after FailNextOut(nil).
var ErrOutFailed = errors.New("gpioboard: the line did not take the level")

// Pin is one line of the board, a gpio.PinIO. It keeps the fields and the
// behaviour of periph's gpiotest.Pin (a level, a pull, edges queued on a
// channel) with what a test of a driver needs besides: the board sees
// every Out, drives its inputs as wires do, and a Halt unblocks a pending
// WaitForEdge as on periph's character-device line. It is safe for
// concurrent use.
//
// Where it differs from gpiotest.Pin, it does as a real line does:
//   - An input's level changes when the wire does, not when a caller
//     takes the edge: an edge only says that the level moved.
//   - Edges are queued only after In asked for them, and only those of the
//     kind asked for (rising, falling or both); a full queue drops them.
//   - A pull sets the level of an input only when nothing drives its wire.
//   - Halt unblocks a pending WaitForEdge, which then returns false.
//   - WaitForEdge without edge detection returns false at once, as
//     periph's gpioioctl does. A timeout of -1 waits until an edge or a
//     Halt; 0 takes a queued edge or returns false at once.
//
// (It does not embed gpiotest.Pin: that package needs a clock module this
// project does not require, and the board replaces most of its methods.)
type Pin struct {
	name  string
	num   int
	edges chan gpio.Level // queued edges, each the level the wire went to

	// mu guards the fields below.
	mu       sync.Mutex
	level    gpio.Level
	pull     gpio.Pull
	edge     gpio.Edge // the edge detection In asked for
	output   bool
	driven   bool             // something drives the wire: the relay contact, the float
	onOut    func(gpio.Level) // the board's wiring, called after a successful Out, without mu
	outs     []gpio.Level
	failNext error
	noEdges  bool
	halt     chan struct{} // closed by Halt, then replaced
	halts    int
}

// newPin returns a line named name that queues up to edges edges, as a
// kernel's event buffer does.
func newPin(name string, num, edges int) *Pin {
	return &Pin{name: name, num: num, edges: make(chan gpio.Level, edges), halt: make(chan struct{})}
}

// String returns the name and the number: "GPIO17(17)".
func (p *Pin) String() string { return p.name + "(" + strconv.Itoa(p.num) + ")" }

// Name returns the pin's name in gpioreg.
func (p *Pin) Name() string { return p.name }

// Number returns the number the name ends with, or -1.
func (p *Pin) Number() int { return p.num }

// Function returns "In/High", "Out/Low" and the like.
func (p *Pin) Function() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	dir := "In"
	if p.output {
		dir = "Out"
	}
	return dir + "/" + p.level.String()
}

// Func returns Function as a pin.Func.
func (p *Pin) Func() pin.Func { return pin.Func(p.Function()) }

// In sets the line as an input with a pull and edge detection. It fails
// when edges are asked of a line without edge detection (Options.NoEdges).
// Edges queued before it are dropped.
func (p *Pin) In(pull gpio.Pull, edge gpio.Edge) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if edge != gpio.NoEdge && p.noEdges {
		return fmt.Errorf("gpioboard: %s has no edge detection", p.name)
	}
	p.pull, p.edge, p.output = pull, edge, false
	if !p.driven {
		p.level = pulled(pull, p.level)
	}
	for {
		select {
		case <-p.edges:
		default:
			return nil
		}
	}
}

// Read returns the line's level: an input's wire, an output's driven level.
func (p *Pin) Read() gpio.Level {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.level
}

// Pull returns the pull In set.
func (p *Pin) Pull() gpio.Pull {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pull
}

// DefaultPull returns the pull In set: the board has no other.
func (p *Pin) DefaultPull() gpio.Pull { return p.Pull() }

// Out drives the line to l; it stops edge detection, as on a real line.
// The call is recorded (Outs) whether or not it fails. After FailNextOut it
// fails once and the level stays as it was.
func (p *Pin) Out(l gpio.Level) error {
	p.mu.Lock()
	p.outs = append(p.outs, l)
	err := p.failNext
	p.failNext = nil
	if err == nil {
		p.level, p.edge, p.output = l, gpio.NoEdge, true
	}
	onOut := p.onOut
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("gpioboard: %s: Out(%s): %w", p.name, l, err)
	}
	if onOut != nil {
		onOut(l)
	}
	return nil
}

// PWM is not supported by the board.
func (p *Pin) PWM(gpio.Duty, physic.Frequency) error {
	return fmt.Errorf("gpioboard: %s: PWM is not supported", p.name)
}

// WaitForEdge waits for an edge In asked for, for at most timeout (see the
// type's doc for -1 and 0). It returns true for an edge, false for a
// timeout, a Halt or a line without edge detection.
func (p *Pin) WaitForEdge(timeout time.Duration) bool {
	p.mu.Lock()
	edge, halt := p.edge, p.halt
	p.mu.Unlock()
	if edge == gpio.NoEdge {
		return false
	}
	if timeout == 0 {
		select {
		case <-p.edges:
			return true
		default:
			return false
		}
	}
	var after <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		after = t.C
	}
	select {
	case <-p.edges:
		return true
	case <-halt:
		return false
	case <-after:
		return false
	}
}

// Halt unblocks every WaitForEdge pending now. A later WaitForEdge waits
// again.
func (p *Pin) Halt() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.halt)
	p.halt = make(chan struct{})
	p.halts++
	return nil
}

// Outs returns the level of every Out call so far, in order, the failed
// ones included.
func (p *Pin) Outs() []gpio.Level {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.outs)
}

// Halts returns how many times Halt was called.
func (p *Pin) Halts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.halts
}

// Edge returns the edge detection In last asked for (NoEdge after an Out).
func (p *Pin) Edge() gpio.Edge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.edge
}

// FailNextOut makes the next Out fail with err (ErrOutFailed when nil),
// as a line the kernel or the bus did not set. The one after works again.
func (p *Pin) FailNextOut(err error) {
	if err == nil {
		err = ErrOutFailed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = err
}

// drive makes something drive the wire through each level in turn, as a
// contact that bounces before it rests on the last. The levels are taken
// at once: a Read sees the wire before or after all of them. Each change
// queues an edge if In asked for it.
func (p *Pin) drive(levels ...gpio.Level) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.driven = true
	for _, l := range levels {
		p.setLocked(l)
	}
}

// release leaves the wire undriven: it goes to the level its pull gives.
func (p *Pin) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.driven = false
	p.setLocked(pulled(p.pull, p.level))
}

// setLocked moves the level to l and queues the edge, when it is one In
// asked for. p.mu must be held.
func (p *Pin) setLocked(l gpio.Level) {
	if l == p.level {
		return
	}
	p.level = l
	if p.edge == gpio.BothEdges || (p.edge == gpio.RisingEdge && l == gpio.High) || (p.edge == gpio.FallingEdge && l == gpio.Low) {
		select {
		case p.edges <- l:
		default:
		}
	}
}

// pulled is the level an undriven input with pull settles at, from was.
func pulled(pull gpio.Pull, was gpio.Level) gpio.Level {
	switch pull {
	case gpio.PullUp:
		return gpio.High
	case gpio.PullDown:
		return gpio.Low
	}
	return was
}

var _ gpio.PinIO = (*Pin)(nil)
