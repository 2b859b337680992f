package gpio

import (
	"context"
	"fmt"
	"sync"
	"time"

	periphgpio "periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Bounds of watching an input.
const (
	// settleRounds bounds how many debounce periods an input may keep
	// chattering before its level is taken anyway.
	settleRounds = 10
	// drainMax bounds how many queued edges one look at the line takes.
	drainMax = 64
	// drainWait is how long a look at the line waits for one more queued
	// edge: positive, as every wait of the driver.
	drainWait = time.Millisecond
	// queueMax bounds the readings waiting for a slow watcher; Lost and
	// Found are always kept.
	queueMax = 1024
)

// Watch tells fn of each debounced change of an input and of each line
// lost or found again, one at a time and in the order they happened for
// each line, until ctx is done or the driver is closed. It never calls fn
// after it returned. Changes that happen while nobody watches are not
// kept: Read gives the level then.
func (d *Driver) Watch(ctx context.Context, fn func(devices.Notice)) {
	s := d.hub.subscribe()
	defer d.hub.unsubscribe(s)
	// A watcher learns first where each input stands: an edge tells only
	// of a change, and a feedback contact that never moves would otherwise
	// never be known.
	for _, n := range d.levels() {
		if ctx.Err() != nil {
			return
		}
		fn(n)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.done:
			return
		case <-s.wake:
		}
		for _, n := range d.hub.take(s) {
			if ctx.Err() != nil {
				return
			}
			fn(n)
		}
	}
}

// levels returns a reading of each input that is not lost, as it was
// last reported.
func (d *Driver) levels() []devices.Notice {
	var out []devices.Notice
	for _, l := range d.lines {
		l.mu.Lock()
		if !l.output && l.lost == nil && l.pin != nil {
			out = append(out, devices.Notice{Device: l.dev.ID, Capability: l.capability(),
				Reading: &devices.Reading{Value: value.Bool(l.level), At: d.now(), Quality: devices.QualityGood}})
		}
		l.mu.Unlock()
	}
	return out
}

// hub hands notices to the watchers. It never calls one.
type hub struct {
	// mu guards subs and their queues.
	mu   sync.Mutex
	subs []*subscriber
}

type subscriber struct {
	queue []devices.Notice
	wake  chan struct{} // capacity 1
}

func (h *hub) subscribe() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = append(h.subs, s)
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, o := range h.subs {
		if o == s {
			h.subs = append(h.subs[:i], h.subs[i+1:]...)
			return
		}
	}
}

// publish queues n for every watcher. It returns how many watchers were
// too slow to take a reading, which is then dropped for them.
func (h *hub) publish(n devices.Notice) (dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if n.Reading != nil && len(s.queue) >= queueMax {
			dropped++
			continue
		}
		s.queue = append(s.queue, n)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return dropped
}

// take returns and empties s's queue.
func (h *hub) take(s *subscriber) []devices.Notice {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// runInput watches an input until ctx is done: it waits for edges or polls,
// and re-acquires the line when it is lost.
func (d *Driver) runInput(ctx context.Context, l *line) {
	for ctx.Err() == nil {
		l.mu.Lock()
		lost, edges, pin := l.lost, l.edges, l.pin
		l.mu.Unlock()
		switch {
		case lost != nil:
			d.reacquire(ctx, l)
		case edges:
			d.awaitEdge(ctx, l, pin)
		default:
			if sleep(ctx, l.cfg.Poll) {
				d.look(ctx, l)
			}
		}
	}
}

// awaitEdge waits for one edge (or the bounded timeout) and reports the
// level once the line has been quiet for the debounce time.
func (d *Driver) awaitEdge(ctx context.Context, l *line, pin periphgpio.PinIO) {
	start := time.Now()
	if !pin.WaitForEdge(edgeWait) {
		// A pin that gives up at once (a chip that lost its edge
		// detection) is in effect polled, not spun on.
		if ctx.Err() == nil && (time.Since(start) >= edgeWait/2 || sleep(ctx, l.cfg.Poll)) {
			d.look(ctx, l)
		}
		return
	}
	for range settleRounds {
		if !sleep(ctx, l.cfg.Debounce) {
			return
		}
		if !drain(pin) {
			break
		}
	}
	d.sample(l)
}

// drain takes the edges queued on pin and reports whether there were any.
func drain(pin periphgpio.PinIO) bool {
	n := 0
	for n < drainMax && pin.WaitForEdge(drainWait) {
		n++
	}
	return n > 0
}

// look checks, without an edge, that the line is still there and still at
// the level last reported; a change is reported when it outlasts the
// debounce time. It catches what an edge did not tell: a polled line, a
// missed edge, a pin that went away.
func (d *Driver) look(ctx context.Context, l *line) {
	l.mu.Lock()
	pin, real, last := l.pin, l.real, l.level
	l.mu.Unlock()
	if now := gpioreg.ByName(l.dev.Address); now == nil || !samePin(realPin(now), real) {
		l.mu.Lock()
		d.loseLocked(l, fmt.Errorf("pin %s is no longer registered: its chip or board went away", l.dev.Address))
		l.mu.Unlock()
		return
	}
	if l.logical(pin.Read()) == last {
		return
	}
	if sleep(ctx, l.cfg.Debounce) {
		d.sample(l)
	}
}

// sample reads an input and reports its level if it changed.
func (d *Driver) sample(l *line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return
	}
	v := l.logical(l.pin.Read())
	if v == l.level {
		return
	}
	l.level = v
	d.publishLocked(l, devices.Notice{Device: l.dev.ID, Capability: l.capability(),
		Reading: &devices.Reading{Value: value.Bool(v), At: d.now(), Quality: devices.QualityGood}})
}

// runOutput re-acquires an output each time it is lost, and checks every
// edgeWait that its pin is still there, until ctx is done.
func (d *Driver) runOutput(ctx context.Context, l *line) {
	t := time.NewTicker(edgeWait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-t.C:
			l.mu.Lock()
			real, lost := l.real, l.lost
			l.mu.Unlock()
			if now := gpioreg.ByName(l.dev.Address); lost == nil && (now == nil || !samePin(realPin(now), real)) {
				l.mu.Lock()
				d.loseLocked(l, fmt.Errorf("pin %s is no longer registered: its chip or board went away", l.dev.Address))
				l.mu.Unlock()
			}
		}
		if l.lostErr() != nil {
			d.reacquire(ctx, l)
		}
	}
}

// loseLocked marks l lost for why, tells the watchers and wakes l's
// goroutine to re-acquire it. l.mu must be held: the notice is queued in
// order with l's others.
func (d *Driver) loseLocked(l *line, why error) {
	if l.lost != nil {
		return
	}
	l.lost = why
	d.log.Warn("gpio line lost", "device_id", l.dev.ID, "pin", l.dev.Address, "error", why)
	d.publishLocked(l, devices.Notice{Device: l.dev.ID, Lost: why})
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// reacquire tries to get a lost line back, with a backoff, until it does
// or ctx is done.
func (d *Driver) reacquire(ctx context.Context, l *line) {
	wait := d.backoffMin
	for sleep(ctx, wait) {
		err := d.acquire(l)
		if err == nil {
			return
		}
		d.log.Debug("gpio line still lost", "device_id", l.dev.ID, "pin", l.dev.Address, "error", err, "retry_in", wait)
		wait = min(2*wait, d.backoffMax)
	}
}

// acquire finds l's pin again and sets it up: an input as at open; an
// output at the level it drove before it was lost (the failed write left
// it there), or untouched when it never drove one. On success the line
// is found again, and an input's level is reported if it changed.
func (d *Driver) acquire(l *line) error {
	p := gpioreg.ByName(l.dev.Address)
	if p == nil {
		return fmt.Errorf("no pin %q on this machine", l.dev.Address)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !samePin(realPin(p), l.real) {
		// The pin came back as a new object: its board was plugged again.
		l.pin, l.real = p, realPin(p)
	}
	was := l.level
	if l.output {
		// An output found again is not driven at all: driving it back to
		// where a command left it, or to its initial level, would be an act
		// nobody judged, on a world that may have changed (the interlock
		// that allowed it may not hold now). Its level is unknown until a
		// governed write drives it.
		l.drivenKnown = false
	} else if err := d.inputLocked(l); err != nil {
		return err
	}
	l.lost = nil
	d.log.Info("gpio line found", "device_id", l.dev.ID, "pin", l.dev.Address)
	d.publishLocked(l, devices.Notice{Device: l.dev.ID, Found: true})
	if !l.output && l.level != was {
		d.publishLocked(l, devices.Notice{Device: l.dev.ID, Capability: l.capability(),
			Reading: &devices.Reading{Value: value.Bool(l.level), At: d.now(), Quality: devices.QualityGood}})
	}
	return nil
}

// publishLocked hands n to the watchers. l.mu must be held.
func (d *Driver) publishLocked(l *line, n devices.Notice) {
	if dropped := d.hub.publish(n); dropped > 0 {
		d.log.Warn("gpio reading dropped for a slow watcher", "device_id", l.dev.ID, "watchers", dropped)
	}
}

// sleep waits for dt or until ctx is done, and reports whether dt passed.
func sleep(ctx context.Context, dt time.Duration) bool {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
