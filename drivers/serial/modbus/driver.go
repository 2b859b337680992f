package modbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	"github.com/shadowgate/shadowgate/value"
)

// Options configure a [Driver].
type Options struct {
	// Name names the driver, in what it says to another driver that names
	// its port.
	Name string
	// Settings are the serial line's.
	Settings port.Settings
	// Timeout bounds one request. Zero means DefaultTimeout.
	Timeout time.Duration
	// Retries is how many more times a read is tried after no answer or
	// noise. A write is never tried again.
	Retries int
	// Devices are the devices on the line.
	Devices []devices.Device
	// Units gives each device's unit id.
	Units map[string]byte
	// Points give each capability's place, by device id and capability.
	Points map[string]map[string]Point
	// LostAfter is how many requests in a row a unit may leave unanswered
	// before it is lost. Zero means 3.
	LostAfter int
	// Reopen paces the attempts to open the port again; the zero value
	// tries after 200 ms, doubling to 10 s.
	Reopen port.Backoff
	// Probe paces the probes of a lost unit, a read of its first
	// capability's register; the zero value is as Reopen's.
	Probe port.Backoff
	// CheckEvery is how often the port's path is looked at while the line
	// is idle, so that a pulled adapter is noticed without a request.
	// Zero means 1 s.
	CheckEvery time.Duration
	// Logger receives the driver's log; nil means none.
	Logger *slog.Logger
}

// Counters count what happened on the line since the driver was made.
type Counters struct {
	// Requests sent, retries and probes included.
	Requests uint64
	// Noise is frames that were not a valid answer: a bad CRC, a short
	// frame, another unit's or another function's.
	Noise uint64
	// NoAnswer is requests that timed out without a byte.
	NoAnswer uint64
	// Exceptions is exception responses.
	Exceptions uint64
}

// unit is one server on the line and whether it answers.
type unit struct {
	id      byte
	devices []string
	// probe reads the first register of the unit's first capability.
	probe Request
	// lost says why the unit cannot be reached; nil when it can.
	lost     error
	misses   int // requests in a row without an answer
	backoff  port.Backoff
	probeAt  time.Time
	probing  bool // a probe is due as soon as the port is open
	everSeen bool
}

// Driver speaks Modbus RTU to the units on one serial line. It is safe for
// concurrent use: requests take turns on the line, in the order the
// callers come, each waiting no longer than its ctx allows.
//
// It owns one goroutine, started by Open and stopped by Close, that opens
// the port, opens it again with backoff after it fails (an adapter pulled
// out and plugged in again under the same path), and probes lost units
// until they answer.
type Driver struct {
	o     Options
	owner *port.Owner // the ports this driver opened, its alone
	log   *slog.Logger
	bus   *bus
	devs  map[string]*devices.Device
	// unitOf maps a device id to its unit.
	unitOf map[string]*unit
	units  []*unit

	kick   chan struct{} // wakes the goroutine: the port failed, a unit was lost
	notify chan struct{} // wakes Watch: notices are queued
	stop   context.CancelFunc
	life   context.Context
	done   chan struct{} // closed when the goroutine has ended

	requests, noise, noAnswer, exceptions atomic.Uint64

	// mu guards everything below. It is never held across I/O.
	mu       sync.Mutex
	portErr  error // why the port is not open; nil when it is
	opened   bool
	closed   bool
	watching bool
	notices  []devices.Notice
	listed   []devices.Device
}

// New makes a driver for the options; Open starts it.
func New(o Options) (*Driver, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Name == "" {
		o.Name = "modbus on " + o.Settings.Path
	}
	if o.LostAfter <= 0 {
		o.LostAfter = 3
	}
	if o.Reopen == (port.Backoff{}) {
		o.Reopen = port.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = time.Second
	}
	if o.Probe == (port.Backoff{}) {
		o.Probe = o.Reopen
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d := &Driver{o: o, owner: port.NewOwner(o.Name), log: log, bus: newBus(o.Settings, o.Timeout), devs: map[string]*devices.Device{},
		unitOf: map[string]*unit{}, kick: make(chan struct{}, 1), notify: make(chan struct{}, 1),
		done: make(chan struct{}), portErr: errors.New("the serial port was not opened yet")}
	byID := map[byte]*unit{}
	for i := range o.Devices {
		dev := &o.Devices[i]
		id, ok := o.Units[dev.ID]
		if !ok || id < MinUnit || id > MaxUnit {
			return nil, fmt.Errorf("device %s has no unit id", dev.ID)
		}
		for _, c := range dev.Capabilities {
			p, ok := o.Points[dev.ID][c.Name]
			if !ok {
				return nil, fmt.Errorf("capability %s.%s has no register", dev.ID, c.Name)
			}
			if err := p.Check(); err != nil {
				return nil, fmt.Errorf("the register of %s.%s: %w", dev.ID, c.Name, err)
			}
		}
		u := byID[id]
		if u == nil {
			u = &unit{id: id, backoff: o.Probe, probing: true}
			if len(dev.Capabilities) > 0 {
				u.probe = o.Points[dev.ID][dev.Capabilities[0].Name].ReadRequest(id)
			}
			byID[id] = u
			d.units = append(d.units, u)
		}
		if u.probe.Function == 0 && len(dev.Capabilities) > 0 {
			u.probe = o.Points[dev.ID][dev.Capabilities[0].Name].ReadRequest(id)
		}
		u.devices = append(u.devices, dev.ID)
		u.lost = errors.New("not reached yet")
		d.devs[dev.ID] = dev
		d.unitOf[dev.ID] = u
	}
	for _, u := range d.units {
		if u.probe.Function == 0 {
			// A device without capabilities: ask for coil 0, whose
			// exception says the unit is there as well as data would.
			u.probe = Request{Unit: u.id, Function: ReadCoils, Quantity: 1}
		}
	}
	d.life, d.stop = context.WithCancel(context.Background())
	return d, nil
}

// Open opens the port and probes each unit once, within ctx, so that
// Devices lists what answers; then it starts the goroutine that keeps the
// line. A port that is missing now is not an error: it is logged and
// tried again.
func (d *Driver) Open(ctx context.Context) error {
	d.mu.Lock()
	if d.closed || d.opened {
		d.mu.Unlock()
		return &devices.OpError{Op: "open", Err: fmt.Errorf("%w (or opened twice)", devices.ErrClosed)}
	}
	d.opened = true
	d.mu.Unlock()
	if d.openPort(ctx) {
		for _, u := range d.units {
			d.probe(ctx, u)
		}
	} else if err := d.portError(); errors.Is(err, port.ErrHeld) {
		// Another driver of this gateway reaches the port: a configuration
		// that cannot work, not an adapter that is not plugged in yet.
		d.mu.Lock()
		d.opened, d.closed = false, true
		d.mu.Unlock()
		d.owner.Release()
		return &devices.OpError{Op: "open", Err: err}
	}
	go d.run()
	return nil
}

// portError is why the port could not be opened last, or nil.
func (d *Driver) portError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.portErr
}

// Close stops the goroutine, waits for a request in progress to end and
// closes the port. Calls after Close return ErrClosed.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return devices.ErrClosed
	}
	d.closed = true
	opened := d.opened
	d.mu.Unlock()
	d.stop()
	if opened {
		<-d.done
	}
	// The line is taken without a deadline: a request holds it no longer
	// than its timeout.
	_ = d.bus.acquire(context.Background())
	defer d.bus.release()
	defer d.owner.Release()
	if d.bus.p != nil {
		err := d.bus.p.Close()
		d.bus.p = nil
		if err != nil {
			return &devices.OpError{Op: "close", Err: fmt.Errorf("closing %s: %w", d.o.Settings.Path, err)}
		}
	}
	return nil
}

// Devices returns the devices whose unit answers now.
func (d *Driver) Devices() []devices.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.listed == nil {
		d.listed = []devices.Device{}
		for i := range d.o.Devices {
			if d.unitOf[d.o.Devices[i].ID].lost == nil {
				d.listed = append(d.listed, d.o.Devices[i])
			}
		}
	}
	return d.listed
}

// Why says why a device is not listed: its port is not open, or its unit
// stopped answering. It is nil for a listed device or one the driver does
// not have.
func (d *Driver) Why(device string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if u := d.unitOf[device]; u != nil {
		return u.lost
	}
	return nil
}

// Health returns nil when the port is open and some unit answers.
func (d *Driver) Health(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return devices.ErrClosed
	}
	if d.portErr != nil {
		return d.portErr
	}
	for _, u := range d.units {
		if u.lost == nil {
			return nil
		}
	}
	if len(d.units) == 0 {
		return nil
	}
	return fmt.Errorf("no unit answers on %s", d.o.Settings.Path)
}

// Stats returns the counters of the line.
func (d *Driver) Stats() Counters {
	return Counters{Requests: d.requests.Load(), Noise: d.noise.Load(), NoAnswer: d.noAnswer.Load(), Exceptions: d.exceptions.Load()}
}

// Watch tells of units lost and found again, as notices for each of their
// devices, until ctx is done or the driver is closed.
func (d *Driver) Watch(ctx context.Context, fn func(devices.Notice)) {
	d.mu.Lock()
	d.watching = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.watching, d.notices = false, nil
		d.mu.Unlock()
	}()
	for {
		d.mu.Lock()
		queued := d.notices
		d.notices = nil
		d.mu.Unlock()
		for _, n := range queued {
			if ctx.Err() != nil {
				return
			}
			fn(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.life.Done():
			return
		case <-d.notify:
		}
	}
}

// lookup finds a device's capability, its unit and its point.
func (d *Driver) lookup(op, device, capability string) (*devices.Capability, *unit, Point, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, nil, Point{}, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrClosed}
	}
	dev := d.devs[device]
	if dev == nil {
		return nil, nil, Point{}, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownDevice}
	}
	c, ok := dev.Capability(capability)
	if !ok {
		return nil, nil, Point{}, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownCapability}
	}
	return c, d.unitOf[device], d.o.Points[device][capability], nil
}

// Read reads a capability's coil or registers: a sensor's value, or the
// state an actuator's last write left (its read-back). A read without an
// answer or with noise is tried again, Retries times.
func (d *Driver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	c, u, p, err := d.lookup("read", device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	if !c.Readable() {
		return devices.Reading{}, opErr(devices.ErrNotReadable)
	}
	if why := d.Why(device); why != nil {
		return devices.Reading{}, opErr(devices.Offline(why))
	}
	req := p.ReadRequest(u.id)
	var resp Response
	for attempt := 0; ; attempt++ {
		resp, _, err = d.do(ctx, u, req)
		if err == nil || attempt >= d.o.Retries || !(errors.Is(err, errNoAnswer) || IsNoise(err)) {
			break
		}
		d.log.DebugContext(ctx, "read tried again", "device_id", device, "capability", capability, "error", err)
	}
	if err != nil {
		return devices.Reading{}, opErr(d.outcome(ctx, err, false, false))
	}
	r := devices.Reading{At: time.Now(), Quality: devices.QualityGood}
	if p.IsBool() {
		b, err := p.Bool(resp)
		if err != nil {
			return devices.Reading{}, opErr(err)
		}
		r.Value = value.Bool(b)
	} else {
		n, err := p.Number(resp)
		if err != nil {
			return devices.Reading{}, opErr(err)
		}
		r.Value = value.Number(n)
	}
	return r, nil
}

// Write writes an actuator's coil or holding registers, once. A value
// that cannot be written is a bad request and nothing is sent; an
// exception is a refusal with its code; a request sent and not answered
// (no answer, noise, a port that failed) is an unknown outcome.
func (d *Driver) Write(ctx context.Context, device, capability string, v value.Value) error {
	c, u, p, err := d.lookup("write", device, capability)
	if err != nil {
		return err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if c.Kind != devices.KindActuator {
		return opErr(devices.ErrNotWritable)
	}
	var req Request
	switch {
	case c.Type == value.TypeBool && v.Type == value.TypeBool:
		req, err = p.WriteBool(u.id, v.Bool)
	case c.Type == value.TypeNumber && v.Type == value.TypeNumber:
		req, err = p.WriteNumber(u.id, v.Num)
	default:
		err = fmt.Errorf("a %s value to a %s capability", v.Type, c.Type)
	}
	if err == nil {
		err = req.Check()
	}
	if err != nil {
		return opErr(devices.BadRequest(fmt.Sprintf("%v to %s: %v", v, p, err)))
	}
	if why := d.Why(device); why != nil {
		return opErr(devices.Offline(why))
	}
	_, sent, err := d.do(ctx, u, req)
	if err != nil {
		return opErr(d.outcome(ctx, err, true, sent))
	}
	return nil
}

// refusesWholly reports whether an exception code says a request was not
// carried out at all: an illegal function, address or value (nothing was
// done, the request was not understood) or busy (not taken).
func refusesWholly(code byte) bool {
	return code == 0x01 || code == 0x02 || code == 0x03 || code == 0x06
}

// outcome types a failed request for the runtime.
func (d *Driver) outcome(ctx context.Context, err error, write, sent bool) error {
	var ex *ExceptionError
	switch {
	case errors.As(err, &ex) && write && !refusesWholly(ex.Code):
		// Acknowledge (0x05: it will be carried out), a device failure
		// (0x04: perhaps half done), a gateway's target that did not
		// answer (0x0B: perhaps forwarded), or a code the spec does not
		// name: the write may have taken effect.
		return devices.UnknownOutcome(fmt.Errorf("unit answered %s (%s): %w", ex.HexCode(), ex.Name(), err))
	case errors.As(err, &ex):
		return devices.Refused(ex.HexCode(), ex.Name())
	case !sent:
		// Nothing left: the port is closed, or the line stayed busy until
		// the caller's deadline.
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return devices.Offline(fmt.Errorf("the line to %s stayed busy: %w", d.o.Settings.Path, err))
		}
		return devices.Offline(err)
	case write:
		// The request may have been carried out: never a plain failure.
		return devices.UnknownOutcome(err)
	case errors.Is(err, errNoAnswer), errors.Is(err, errPortFailed):
		return devices.Offline(err)
	}
	return err
}

// do is one request to u on the line, which it takes and gives back. It
// keeps u's count of unanswered requests and the counters, and hands the
// port to the goroutine when it failed.
func (d *Driver) do(ctx context.Context, u *unit, req Request) (Response, bool, error) {
	if err := d.bus.acquire(ctx); err != nil {
		return Response{}, false, err
	}
	resp, sent, err := d.bus.exchange(ctx, req)
	d.bus.release()
	if sent {
		d.requests.Add(1)
	}
	var ex *ExceptionError
	switch {
	case err == nil || errors.As(err, &ex):
		if ex != nil {
			d.exceptions.Add(1)
		}
		d.answered(u)
	case errors.Is(err, errPortFailed):
		d.portFailed(err)
	case errors.Is(err, errNoAnswer):
		d.noAnswer.Add(1)
		d.missed(u, err)
	case IsNoise(err):
		d.noise.Add(1)
		d.log.Debug("noise on the line", "unit", u.id, "error", err)
	}
	return resp, sent, err
}

// answered notes that u answered: it is found if it was lost.
func (d *Driver) answered(u *unit) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u.misses = 0
	u.everSeen = true
	if u.lost == nil {
		return
	}
	u.lost, u.probing = nil, false
	u.backoff.Reset()
	d.listed = nil
	d.log.Info("modbus unit found", "unit", u.id, "devices", u.devices)
	for _, id := range u.devices {
		d.queueLocked(devices.Notice{Device: id, Found: true})
	}
}

// missed notes a request u left unanswered; LostAfter in a row lose it.
func (d *Driver) missed(u *unit, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u.misses++
	if u.lost != nil || u.misses < d.o.LostAfter {
		return
	}
	d.loseLocked(u, fmt.Errorf("unit %d stopped answering on %s: %w", u.id, d.o.Settings.Path, err))
	d.wake()
}

// loseLocked marks u lost for why and schedules its probe.
func (d *Driver) loseLocked(u *unit, why error) {
	wasLost := u.lost != nil
	u.lost, u.probing = why, true
	u.probeAt = time.Now().Add(u.backoff.Next())
	d.listed = nil
	if wasLost {
		return
	}
	d.log.Warn("modbus unit lost", "unit", u.id, "devices", u.devices, "error", why)
	for _, id := range u.devices {
		d.queueLocked(devices.Notice{Device: id, Lost: why})
	}
}

// portFailed notes that the port failed: every unit is lost with it, and
// the goroutine reopens it.
func (d *Driver) portFailed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.portErr = fmt.Errorf("serial port %s failed: %w", d.o.Settings.Path, err)
	d.log.Warn("serial port failed", "port", d.o.Settings.Path, "error", err)
	for _, u := range d.units {
		u.backoff.Reset()
		d.loseLocked(u, d.portErr)
	}
	d.wake()
}

func (d *Driver) queueLocked(n devices.Notice) {
	if !d.watching {
		return // nobody listens: Devices and Why say the same
	}
	d.notices = append(d.notices, n)
	select {
	case d.notify <- struct{}{}:
	default:
	}
}

func (d *Driver) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// run keeps the line: it opens the port, again after it fails, and probes
// lost units when they are due. It ends when Close cancels d.life.
func (d *Driver) run() {
	defer close(d.done)
	reopen := d.o.Reopen
	for {
		var wait time.Duration
		if d.bus.isOpen(d.life) {
			reopen.Reset()
			wait = min(d.probeDue(), d.o.CheckEvery)
			d.checkPath()
		} else if d.openPort(d.life) {
			reopen.Reset()
			continue
		} else {
			wait = reopen.Next()
		}
		t := time.NewTimer(wait)
		select {
		case <-d.life.Done():
			t.Stop()
			return
		case <-d.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// checkPath closes the port when its path is gone: a USB adapter pulled
// out takes its device node with it, and the port would fail only at the
// next request.
func (d *Driver) checkPath() {
	if _, err := os.Stat(d.o.Settings.Path); err == nil || d.bus.acquire(d.life) != nil {
		return
	}
	defer d.bus.release()
	if d.bus.p == nil {
		return
	}
	_, statErr := os.Stat(d.o.Settings.Path)
	if statErr == nil {
		return
	}
	err := d.bus.fail(fmt.Errorf("the device node is gone: %w", statErr))
	// portFailed takes d.mu only: the line may stay held meanwhile.
	d.portFailed(err)
}

// isOpen reports whether the port is open, taking the line to look.
func (b *bus) isOpen(ctx context.Context) bool {
	if err := b.acquire(ctx); err != nil {
		return false
	}
	defer b.release()
	return b.p != nil
}

// openPort opens the port. On success every unit is due for a probe; on
// failure the error is logged when it is new.
func (d *Driver) openPort(ctx context.Context) bool {
	if err := d.bus.acquire(ctx); err != nil {
		return false
	}
	var err error
	if d.bus.p == nil {
		d.bus.p, err = port.OpenAs(d.o.Settings, d.owner)
		if err != nil {
			d.bus.p = nil
		}
	}
	d.bus.release()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.portErr == nil || d.portErr.Error() != err.Error() {
			d.log.Warn("serial port cannot be opened; trying again", "port", d.o.Settings.String(), "error", err)
		}
		d.portErr = err
		for _, u := range d.units {
			if u.lost == nil {
				d.loseLocked(u, err)
			} else {
				u.lost = err // the latest reason is the useful one
			}
		}
		return false
	}
	d.portErr = nil
	d.log.Info("serial port open", "port", d.o.Settings.String())
	now := time.Now()
	for _, u := range d.units {
		u.probing, u.probeAt = true, now
	}
	return true
}

// probeDue probes the lost units whose time has come and returns how long
// to wait for the next.
func (d *Driver) probeDue() time.Duration {
	next := time.Hour
	for _, u := range d.units {
		d.mu.Lock()
		due, at := u.probing, u.probeAt
		d.mu.Unlock()
		if !due {
			continue
		}
		if wait := time.Until(at); wait > 0 {
			next = min(next, wait)
			continue
		}
		d.probe(d.life, u)
		d.mu.Lock()
		if u.probing {
			u.probeAt = time.Now().Add(u.backoff.Next())
			next = min(next, time.Until(u.probeAt))
		}
		d.mu.Unlock()
	}
	return max(next, time.Millisecond)
}

// probe reads u's first register once; an answer, even an exception,
// finds it.
func (d *Driver) probe(ctx context.Context, u *unit) {
	_, _, err := d.do(ctx, u, u.probe)
	var ex *ExceptionError
	if err == nil || errors.As(err, &ex) || errors.Is(err, errPortFailed) {
		return // found, or the port failed and was handled
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if u.lost == nil {
		d.loseLocked(u, fmt.Errorf("unit %d does not answer on %s: %w", u.id, d.o.Settings.Path, err))
	} else if !u.everSeen {
		u.lost = fmt.Errorf("unit %d does not answer on %s: %w", u.id, d.o.Settings.Path, err)
	}
}

// Ensure the driver keeps the device contract.
var (
	_ devices.Driver         = (*Driver)(nil)
	_ devices.Watcher        = (*Driver)(nil)
	_ devices.Why            = (*Driver)(nil)
	_ devices.HealthReporter = (*Driver)(nil)
)
