package gpio

import (
	"sync"

	periphgpio "periph.io/x/conn/v3/gpio"

	"github.com/shadowgate/shadowgate/devices"
)

// line is one device's line.
type line struct {
	dev    devices.Device
	cfg    Line
	output bool
	wake   chan struct{} // capacity 1: an output was lost, re-acquire it

	// mu guards the fields below. It is held across a call on the pin
	// (In, Out, Read: one ioctl or register access that does not block), so
	// that what the driver knows of the line is what the line is; it is
	// never held across WaitForEdge or a wait.
	mu sync.Mutex
	// pin is the pin as gpioreg gave it by the device's address; real is
	// the pin behind the alias, whose name is the physical pin's.
	pin, real periphgpio.PinIO
	// readsBack says that Read on the output reports the line without
	// changing it (see readsBackSafely).
	readsBack bool
	// lost is why the line cannot be used now, or nil.
	lost error
	// driven is the level an output drives, when drivenKnown: set at open
	// with an initial level or by a write.
	driven      periphgpio.Level
	drivenKnown bool
	// edges says that an input waits for edges; otherwise it is polled.
	edges bool
	// level is an input's value last reported.
	level bool
}

// physical is the level that means v on the line.
func (l *line) physical(v bool) periphgpio.Level { return periphgpio.Level(v != l.cfg.ActiveLow) }

// logical is the value the level lvl means on the line.
func (l *line) logical(lvl periphgpio.Level) bool { return bool(lvl) != l.cfg.ActiveLow }

// lostErr returns why the line is lost, or nil.
func (l *line) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// capability is the line's one capability's name.
func (l *line) capability() string { return l.dev.Capabilities[0].Name }

// opError is err of op on the line's capability.
func (l *line) opError(op string, err error) error {
	return &devices.OpError{Op: op, Device: l.dev.ID, Capability: l.capability(), Err: err}
}

// periph is the pull as periph names it.
func (p Pull) periph() periphgpio.Pull {
	switch p {
	case PullUp:
		return periphgpio.PullUp
	case PullDown:
		return periphgpio.PullDown
	}
	return periphgpio.Float
}
