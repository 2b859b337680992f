package gpio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"periph.io/x/conn/v3/driver/driverreg"
	periphgpio "periph.io/x/conn/v3/gpio"
	"periph.io/x/host/v3"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Pull is an input's bias.
type Pull uint8

// The biases of an input.
const (
	// PullNone disables the bias: the line floats unless something drives
	// it.
	PullNone Pull = iota
	PullUp
	PullDown
)

// Line is how the driver handles one device's line. The zero value is an
// active-high line: an output left at its level at open, an input without
// pull that waits for edges.
type Line struct {
	// ActiveLow inverts the line: true is the low level.
	ActiveLow bool
	// Initial is an output's value at open; nil leaves the line as it is.
	Initial *bool
	// Pull is an input's bias.
	Pull Pull
	// Debounce is how long an input must stay quiet before its level is
	// reported. Zero means 20ms.
	Debounce time.Duration
	// NoEdges polls the input instead of waiting for edges.
	NoEdges bool
	// Poll is how often an input is read when it is polled (NoEdges, or a
	// chip that cannot tell of edges). Zero means 100ms.
	Poll time.Duration
}

// Defaults of a line and of the driver's loops.
const (
	defaultDebounce = 20 * time.Millisecond
	defaultPoll     = 100 * time.Millisecond
	// edgeWait bounds one WaitForEdge. periph's pins disagree on what 0 and
	// -1 mean, so the driver never waits without a positive timeout; after
	// each, it looks at the line anyway, in case an edge was missed.
	edgeWait = time.Second
	// backoffMin and backoffMax bound the wait between two attempts to
	// re-acquire a lost line.
	backoffMin = 100 * time.Millisecond
	backoffMax = 10 * time.Second
)

// Options configure a driver.
type Options struct {
	// Devices are the devices the driver serves, each one line: its Address
	// is the pin's name in periph's gpioreg and it has exactly one bool
	// capability. An actuator is an output, a sensor an input.
	Devices []devices.Device
	// Lines are the lines' settings by device id; a device without one has
	// the zero Line.
	Lines map[string]Line
	// Logger receives what the driver logs: lines lost and found, periph's
	// host drivers that failed. Nil means slog.Default().
	Logger devices.Logger
	// Now is the clock of readings. Nil means time.Now.
	Now func() time.Time
}

// hostInit loads periph's host drivers. It is a variable so that a test can
// leave the machine's real chips out.
var hostInit = host.Init

// Driver drives GPIO lines. It is safe for concurrent use.
//
// The driver owns one goroutine per line from Open to Close: an input's
// watches its edges or polls it, an output's re-acquires it when it is
// lost. Close stops and waits for them all.
type Driver struct {
	log        devices.Logger
	now        func() time.Time
	lines      []*line
	byID       map[string]*line
	backoffMin time.Duration
	backoffMax time.Duration
	hub        hub
	done       chan struct{} // closed by Close

	// mu guards the fields below.
	mu     sync.Mutex
	state  state
	cancel context.CancelFunc // ends the lines' goroutines
	// opening is closed when an Open in progress ends.
	opening chan struct{}
	wg      sync.WaitGroup // the lines' goroutines
}

type state uint8

const (
	stateNew state = iota
	stateOpening
	stateOpen
	stateClosed
)

// New checks that every device is one line and returns the driver, not
// yet open. It names every device that is not.
func New(o Options) (*Driver, error) {
	d := &Driver{
		log:        o.Logger,
		now:        o.Now,
		byID:       map[string]*line{},
		backoffMin: backoffMin,
		backoffMax: backoffMax,
		done:       make(chan struct{}),
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.now == nil {
		d.now = time.Now
	}
	var errs []error
	for _, dev := range o.Devices {
		if len(dev.Capabilities) != 1 || dev.Capabilities[0].Type != value.TypeBool {
			errs = append(errs, fmt.Errorf("gpio device %s: a GPIO line has exactly one bool capability", dev.ID))
			continue
		}
		if _, dup := d.byID[dev.ID]; dup {
			errs = append(errs, fmt.Errorf("gpio device %s is given twice", dev.ID))
			continue
		}
		dev.Capabilities = slices.Clone(dev.Capabilities)
		l := &line{dev: dev, cfg: o.Lines[dev.ID], output: dev.Capabilities[0].Kind == devices.KindActuator, wake: make(chan struct{}, 1)}
		if l.cfg.Debounce <= 0 {
			l.cfg.Debounce = defaultDebounce
		}
		if l.cfg.Poll <= 0 {
			l.cfg.Poll = defaultPoll
		}
		d.lines = append(d.lines, l)
		d.byID[dev.ID] = l
	}
	for id := range o.Lines {
		if _, ok := d.byID[id]; !ok {
			errs = append(errs, fmt.Errorf("gpio line settings for %s: no such device", id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// Open loads periph's host drivers, finds every device's pin and sets it
// up: an output at its initial level, an input with its pull and edge
// detection. It fails, naming the device and the pin, when a pin is not
// on this machine (listing those that are), when two devices are the same
// physical pin, or when a pin cannot be set up; it then leaves nothing
// running. Its ctx bounds nothing but the start: the lines are watched
// until Close.
func (d *Driver) Open(ctx context.Context) error {
	d.mu.Lock()
	switch d.state {
	case stateClosed:
		d.mu.Unlock()
		return &devices.OpError{Op: "open", Err: devices.ErrClosed}
	case stateOpening, stateOpen:
		d.mu.Unlock()
		return &devices.OpError{Op: "open", Err: errors.New("the gpio driver is open already")}
	}
	d.state = stateOpening
	opened := make(chan struct{})
	d.opening = opened
	d.mu.Unlock()
	defer close(opened)
	err := d.open(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.state != stateClosed {
			d.state = stateNew // it may be opened again; a Close meanwhile stands
		}
		d.release()
		return err
	}
	if d.state == stateClosed {
		// Close came while the pins were being set up: it found nothing to
		// stop, so halt them here and start nothing.
		d.haltAll()
		d.release()
		return &devices.OpError{Op: "open", Err: devices.ErrClosed}
	}
	d.state = stateOpen
	ctx, d.cancel = context.WithCancel(context.Background())
	for _, l := range d.lines {
		if l.output {
			d.wg.Go(func() { d.runOutput(ctx, l) })
		} else {
			d.wg.Go(func() { d.runInput(ctx, l) })
		}
	}
	return nil
}

// open does Open's work, with no goroutine started.
func (d *Driver) open(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &devices.OpError{Op: "open", Err: err}
	}
	st, err := hostInit()
	if err != nil {
		return &devices.OpError{Op: "open", Err: fmt.Errorf("loading periph's host drivers: %w", err)}
	}
	hostProblem := d.logHost(st)
	if err := d.resolve(st, hostProblem); err != nil {
		return err
	}
	for i, l := range d.lines {
		if err := d.setUp(l); err != nil {
			for _, set := range d.lines[:i] {
				_ = set.pin.Halt()
			}
			return &devices.OpError{Op: "open", Device: l.dev.ID, Err: err}
		}
	}
	return nil
}

// logHost logs what periph's host drivers could not load, and returns the
// first failure that was for want of permission, to explain a pin that is
// missing.
func (d *Driver) logHost(st *driverreg.State) error {
	if st == nil {
		return nil
	}
	var perm error
	for _, f := range st.Failed {
		d.log.Warn("periph host driver failed", "driver", implName(f), "error", f.Err)
		if perm == nil && isPermission(f.Err) {
			perm = fmt.Errorf("periph's %s: %w", implName(f), f.Err)
		}
	}
	for _, f := range st.Skipped {
		d.log.Debug("periph host driver skipped", "driver", implName(f), "error", f.Err)
	}
	return perm
}

// setUp sets a resolved line up as the configuration says.
func (d *Driver) setUp(l *line) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.output {
		if l.cfg.Initial == nil {
			return nil
		}
		lvl := l.physical(*l.cfg.Initial)
		if err := l.pin.Out(lvl); err != nil {
			return gpioError(fmt.Errorf("setting %s %s at open: %w", l.dev.Address, lvl, err))
		}
		l.driven, l.drivenKnown = lvl, true
		return nil
	}
	return d.inputLocked(l)
}

// inputLocked makes l's pin an input with its pull, with edge detection
// unless the line is polled or the pin cannot tell of edges, and takes its
// level. l.mu must be held.
func (d *Driver) inputLocked(l *line) error {
	pull := l.cfg.Pull.periph()
	l.edges = false
	if !l.cfg.NoEdges {
		err := l.pin.In(pull, periphgpio.BothEdges)
		if err == nil {
			l.edges = true
		} else if isPermission(err) {
			return gpioError(fmt.Errorf("setting %s as an input: %w", l.dev.Address, err))
		} else {
			d.log.Warn("gpio edge detection unavailable, polling", "device_id", l.dev.ID, "pin", l.dev.Address, "poll", l.cfg.Poll, "error", err)
		}
	}
	if !l.edges {
		if err := l.pin.In(pull, periphgpio.NoEdge); err != nil {
			return gpioError(fmt.Errorf("setting %s as an input: %w", l.dev.Address, err))
		}
	}
	l.level = l.logical(l.pin.Read())
	return nil
}

// Devices returns the devices whose line is not lost; none before Open or
// after Close. The caller must not modify the returned slice.
func (d *Driver) Devices() []devices.Device {
	if !d.isOpen() {
		return nil
	}
	out := make([]devices.Device, 0, len(d.lines))
	for _, l := range d.lines {
		if l.lostErr() == nil {
			out = append(out, l.dev)
		}
	}
	return out
}

// Why returns why a device's line is lost, or nil.
func (d *Driver) Why(device string) error {
	if l, ok := d.byID[device]; ok {
		return l.lostErr()
	}
	return nil
}

// Health returns nil when every line is reachable, or which are lost and
// why.
func (d *Driver) Health(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	st := d.state
	d.mu.Unlock()
	switch st {
	case stateClosed:
		return devices.ErrClosed
	case stateNew, stateOpening:
		return errors.New("the gpio driver is not open")
	}
	var lost []string
	for _, l := range d.lines {
		if err := l.lostErr(); err != nil {
			lost = append(lost, fmt.Sprintf("%s (%s): %v", l.dev.ID, l.dev.Address, err))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d GPIO lines lost: %s", len(lost), len(d.lines), strings.Join(lost, "; "))
}

// Read returns a line's level: an input's, or an output's read-back.
func (d *Driver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	l, err := d.find("read", device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	if err := ctx.Err(); err != nil {
		return devices.Reading{}, l.opError("read", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return devices.Reading{}, l.opError("read", devices.Offline(l.lost))
	}
	var lvl periphgpio.Level
	switch {
	case !l.output || l.readsBack:
		lvl = l.pin.Read()
	case l.drivenKnown:
		lvl = l.driven
	default:
		return devices.Reading{}, l.opError("read", fmt.Errorf("%s has not been driven since the driver opened it or found it again, and reading an output of this chip would make it an input; its level is unknown until a write drives it (or, at open, its initial level)", l.dev.Address))
	}
	return devices.Reading{Value: value.Bool(l.logical(lvl)), At: d.now(), Quality: devices.QualityGood}, nil
}

// Write drives an output's line. An error from periph means the line was
// not set: the write fails with devices.Offline and the device is lost
// until the driver re-acquires it.
func (d *Driver) Write(ctx context.Context, device, capability string, v value.Value) error {
	l, err := d.find("write", device, capability)
	if err != nil {
		return err
	}
	if !l.output {
		return l.opError("write", devices.ErrNotWritable)
	}
	if v.Type != value.TypeBool {
		return l.opError("write", devices.BadRequest(fmt.Sprintf("a GPIO line takes a bool, not a %s", v.Type)))
	}
	if err := ctx.Err(); err != nil {
		// Nothing was sent.
		return l.opError("write", devices.Offline(err))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.opError("write", devices.Offline(l.lost))
	}
	lvl := l.physical(v.Bool)
	if err := l.pin.Out(lvl); err != nil {
		cause := gpioError(fmt.Errorf("setting %s %s: %w", l.dev.Address, lvl, err))
		d.loseLocked(l, cause)
		if !l.drivenKnown && !isPermission(err) {
			// The line was not yet driven by this driver: periph makes it
			// an output first (driving it low) and sets the level after,
			// so a failure may have left it changed. (A line it may not
			// open at all was not changed.)
			return l.opError("write", devices.UnknownOutcome(cause))
		}
		// Setting the level of a line that is an output already is one
		// request that either took or did not.
		return l.opError("write", devices.Offline(cause))
	}
	l.driven, l.drivenKnown = lvl, true
	return nil
}

// find returns the line of device.capability, or the error of op on it.
func (d *Driver) find(op, device, capability string) (*line, error) {
	d.mu.Lock()
	st := d.state
	d.mu.Unlock()
	switch st {
	case stateClosed:
		return nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrClosed}
	case stateNew, stateOpening:
		return nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.Offline(errors.New("the gpio driver is not open"))}
	}
	l, ok := d.byID[device]
	if !ok {
		return nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownDevice}
	}
	if l.dev.Capabilities[0].Name != capability {
		return nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownCapability}
	}
	return l, nil
}

// isOpen reports whether the driver is open.
func (d *Driver) isOpen() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state == stateOpen
}

// Close halts every pin, which unblocks a pending WaitForEdge, and waits
// for the driver's goroutines. Outputs stay at their level. Calls after
// Close return devices.ErrClosed.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.state == stateClosed {
		d.mu.Unlock()
		return &devices.OpError{Op: "close", Err: devices.ErrClosed}
	}
	wasOpen, opening := d.state == stateOpen, d.state == stateOpening
	d.state = stateClosed
	cancel, opened := d.cancel, d.opening
	d.mu.Unlock()
	close(d.done)
	if opening {
		// An Open in progress sees the close when it ends, halts what it
		// set up and starts nothing: wait for it, so that no pin is
		// driven after Close returned.
		<-opened
	}
	if !wasOpen {
		return nil
	}
	defer d.release()
	cancel()
	stopped := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(stopped)
	}()
	// A goroutine may go into WaitForEdge just after a Halt: halt again
	// until every one has seen that the driver is closing.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		errs := d.haltAll()
		select {
		case <-stopped:
			return errs
		case <-t.C:
		}
	}
}

// haltAll halts every resolved pin and returns what failed.
func (d *Driver) haltAll() error {
	var errs []error
	for _, l := range d.lines {
		l.mu.Lock()
		p := l.pin
		l.mu.Unlock()
		if p == nil {
			continue
		}
		if err := p.Halt(); err != nil {
			errs = append(errs, l.opError("close", fmt.Errorf("halting %s: %w", l.dev.Address, err)))
		}
	}
	return errors.Join(errs...)
}
