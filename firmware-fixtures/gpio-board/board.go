// Package gpioboard is a fake GPIO board for tests and demos: a relay whose
// contact is wired back to a feedback input, and a float switch, on fake
// periph pins (gpio.PinIO, modelled on periph's gpiotest.Pin) registered in
// periph's gpioreg under names the caller gives. A GPIO driver finds the pins by name, as it would on a
// Raspberry Pi, and drives them without knowing they are not hardware.
//
// It imports nothing of Shadowgate: it is the hardware, written apart from
// the code that talks to it. Knobs make it misbehave as real boards do: a
// relay contact that sticks, a feedback wire that is cut, a line that does
// not take a level, a float switch that bounces.
//
// gpioreg is global to the process: a board's names must be free when it is
// made (New fails otherwise), and Close frees them. Tests that use a board
// must not run in parallel with others that register pins. On a machine
// with GPIO chips, pick names periph's host drivers do not use.
package gpioboard

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
)

// Options describe a board. The zero value is a board with the default
// names, no aliases and a feedback that follows at once.
type Options struct {
	// Relay, Feedback and Float name the pins in gpioreg. Defaults GPIO17
	// (the relay's coil, an output), GPIO27 (the relay contact's feedback,
	// an input) and GPIO22 (a float switch, an input). A pin's number is
	// the number its name ends with, or -1.
	Relay, Feedback, Float string
	// Delay is how long the feedback takes to follow the relay's contact,
	// as a real contact and its wiring take: a change of the relay's line
	// reaches the feedback pin Delay later, as an edge. Zero means at once
	// (still after Out returned). Negative is an error.
	Delay time.Duration
	// Aliases are registered in gpioreg as alias → pin name, as periph's
	// rpi driver registers header positions: {"P1_11": "GPIO17"}.
	Aliases map[string]string
	// NoEdges makes In with edge detection fail on every input, as on a
	// line whose chip cannot tell of edges: a driver must poll.
	NoEdges bool
}

// Board is a fake GPIO board. The relay's line level reads what was last
// written to it, stuck or not: the coil's line is driven whatever the
// contact does, so a read-back of the line cannot tell a stuck relay; only
// the feedback, wired to the contact, tells the truth. The feedback is
// driven by the contact (its pull does not matter) until the wire is cut,
// and then rests at the level its pull gives. The float switch drives its
// line, Low until SetFloat says otherwise.
//
// A Board is safe for concurrent use. It owns one goroutine, which delivers
// the feedback's changes after the delay; Close stops it.
type Board struct {
	relay, feedback, float *Pin
	delay                  time.Duration
	names, aliases         []string

	// mu guards the fields below; it is taken before a pin's lock.
	mu      sync.Mutex
	stuck   bool
	cut     bool
	contact gpio.Level
	pending []change
	closed  bool

	wake chan struct{} // capacity 1: something was scheduled
	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// change is the feedback's level due at a time.
type change struct {
	due   time.Time
	level gpio.Level
}

// New makes a board and registers its pins and aliases in gpioreg. It fails
// when a name is taken, and then leaves gpioreg as it was.
func New(o Options) (*Board, error) {
	if o.Delay < 0 {
		return nil, fmt.Errorf("gpioboard: negative delay %s", o.Delay)
	}
	names := []string{o.Relay, o.Feedback, o.Float}
	for i, def := range []string{"GPIO17", "GPIO27", "GPIO22"} {
		if names[i] == "" {
			names[i] = def
		}
	}
	b := &Board{
		relay:    newPin(names[0], number(names[0]), 64),
		feedback: newPin(names[1], number(names[1]), 64),
		float:    newPin(names[2], number(names[2]), 64),
		delay:    o.Delay,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	b.relay.onOut = b.relayMoved
	b.feedback.driven, b.float.driven = true, true
	for _, p := range []*Pin{b.feedback, b.float} {
		p.noEdges = o.NoEdges
	}
	for _, p := range []*Pin{b.relay, b.feedback, b.float} {
		if err := gpioreg.Register(p); err != nil {
			return nil, errors.Join(fmt.Errorf("gpioboard: registering %s: %w", p.name, err), b.unregister())
		}
		b.names = append(b.names, p.name)
	}
	for _, alias := range slices.Sorted(maps.Keys(o.Aliases)) {
		if gpioreg.ByName(alias) != nil {
			return nil, errors.Join(fmt.Errorf("gpioboard: alias %s is a pin name already", alias), b.unregister())
		}
		if err := gpioreg.RegisterAlias(alias, o.Aliases[alias]); err != nil {
			return nil, errors.Join(fmt.Errorf("gpioboard: registering alias %s: %w", alias, err), b.unregister())
		}
		b.aliases = append(b.aliases, alias)
	}
	b.wg.Go(b.deliver)
	return b, nil
}

// number is the number name ends with, or -1.
func number(name string) int {
	digits := strings.TrimRightFunc(name, func(r rune) bool { return r < '0' || r > '9' })
	i := len(digits)
	for i > 0 && digits[i-1] >= '0' && digits[i-1] <= '9' {
		i--
	}
	if i == len(digits) || len(digits) != len(name) {
		return -1
	}
	n, err := strconv.Atoi(digits[i:])
	if err != nil {
		return -1
	}
	return n
}

// Relay returns the relay's coil line, an output.
func (b *Board) Relay() *Pin { return b.relay }

// Feedback returns the relay contact's feedback line, an input.
func (b *Board) Feedback() *Pin { return b.feedback }

// Float returns the float switch's line, an input.
func (b *Board) Float() *Pin { return b.float }

// Stick makes the relay's contact stick where it is (true) or free it
// again (false). A stuck relay takes every Out (its line reads the level
// written) but its contact does not move, so the feedback does not follow.
// Freed, the contact follows the line again, and the feedback after the
// delay.
func (b *Board) Stick(stuck bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stuck = stuck
	if !stuck {
		b.moveLocked(b.relay.Read())
	}
}

// CutFeedback cuts the feedback wire (true): the feedback goes to the level
// its pull gives and stays there whatever the relay does. Mended (false),
// it shows the contact again at once.
func (b *Board) CutFeedback(cut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cut = cut
	if cut {
		b.feedback.release()
		return
	}
	b.feedback.drive(b.contact)
}

// SetFloat moves the float switch through each level in turn, as a contact
// that bounces, and leaves it at the last; each change is an edge. A read
// sees the switch before or after all of them, never in between.
func (b *Board) SetFloat(levels ...gpio.Level) { b.float.drive(levels...) }

// Contact returns where the relay's contact is now.
func (b *Board) Contact() gpio.Level {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.contact
}

// Pending returns how many changes of the contact have yet to reach the
// feedback. When it is 0, the feedback shows the contact (or its pull,
// when the wire is cut) and will not change on its own.
func (b *Board) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// relayMoved is the relay line's wiring, after a successful Out.
func (b *Board) relayMoved(l gpio.Level) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stuck {
		b.moveLocked(l)
	}
}

// moveLocked moves the contact to l and schedules the feedback. b.mu must
// be held.
func (b *Board) moveLocked(l gpio.Level) {
	if b.closed || l == b.contact {
		return
	}
	b.contact = l
	b.pending = append(b.pending, change{due: time.Now().Add(b.delay), level: l})
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// deliver moves the feedback as the contact's changes come due, in order,
// until Close.
func (b *Board) deliver() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b.mu.Lock()
		for len(b.pending) > 0 && !time.Now().Before(b.pending[0].due) {
			c := b.pending[0]
			b.pending = b.pending[1:]
			if !b.cut {
				b.feedback.drive(c.level)
			}
		}
		wait := time.Hour
		if len(b.pending) > 0 {
			wait = time.Until(b.pending[0].due)
		}
		b.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-b.done:
			return
		case <-b.wake:
		case <-timer.C:
		}
	}
}

// Close stops the board's goroutine and removes its pins and aliases from
// gpioreg. A second Close does nothing.
func (b *Board) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.pending = nil
	b.mu.Unlock()
	close(b.done)
	b.wg.Wait()
	return b.unregister()
}

// unregister removes from gpioreg what New registered.
func (b *Board) unregister() error {
	var errs []error
	for _, n := range slices.Concat(b.aliases, b.names) {
		if err := gpioreg.Unregister(n); err != nil {
			errs = append(errs, fmt.Errorf("gpioboard: unregistering %s: %w", n, err))
		}
	}
	b.aliases, b.names = nil, nil
	return errors.Join(errs...)
}
