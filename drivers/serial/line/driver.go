package line

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	"github.com/shadowgate/shadowgate/value"
)

// Options configure a line driver.
type Options struct {
	Port    port.Settings
	Timeout time.Duration
	// Discover checks the devices against the firmware's INFO.
	Discover bool
	// Devices are the devices on the board; each Address is the
	// firmware's name of its one capability.
	Devices []devices.Device
	// Logger is where the driver says what happens on the line; nil is
	// slog.Default().
	Logger *slog.Logger
	// Name names the driver, in what it says to another driver that
	// names its port.
	Name string
	// Open opens the port; nil opens it for this driver alone
	// (port.OpenAs). Tests replace it.
	Open func(port.Settings) (port.Port, error)
	// Keepalive is how often an idle board is pinged; zero is 5s.
	Keepalive time.Duration
}

// Stats count what came over the line that was not a reply awaited.
type Stats struct {
	// Noise is lines discarded: a bad CRC, garbage, an overlong line.
	Noise int
	// Stale is replies for a request given up on (another id).
	Stale int
	// Timeouts is requests whose reply never came.
	Timeouts int
	// Boots is the times the board said it started again.
	Boots int
}

// missesToLose is how many requests in a row may go unanswered before the
// board is taken for lost.
const missesToLose = 3

// Driver is the line protocol's driver: one board on one serial port. It
// is safe for concurrent use. Requests go one at a time, each with its own
// id, and a reply is taken only for the request it answers.
type Driver struct {
	opts  Options
	owner *port.Owner
	log   *slog.Logger
	byID  map[string]*devices.Device
	// byName maps a firmware name to its device.
	byName map[string]*devices.Device

	// turn is held by the one request on the line.
	turn chan struct{}
	// kick wakes the keeper: a request was missed, or the board booted.
	kick chan struct{}
	// settled is closed once the first connection is known: the board
	// answered, or the port could not be opened.
	settled    chan struct{}
	settleOnce sync.Once
	// notices are what Watch hands on.
	notices devices.Notices

	// mu guards everything below.
	mu       sync.Mutex
	conn     *conn            // nil while the port is closed
	online   bool             // the board answers
	why      error            // why it is not online
	mismatch map[string]error // devices the firmware does not have as configured
	nextID   uint16
	wait     uint16       // the id awaited, or 0
	waitCh   chan Message // where its reply goes
	misses   int          // requests in a row unanswered
	booted   bool         // the board said it started again
	stats    Stats
	closed   bool
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// conn is one open port and its reader.
type conn struct {
	p    port.Port
	dead chan struct{} // closed when the reader ends
	err  error         // why it ended, set before dead closes
}

// New returns a driver for the devices on one board. Open starts it.
func New(opts Options) *Driver {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	owner := port.NewOwner(cmp.Or(opts.Name, "line on "+opts.Port.Path))
	if opts.Open == nil {
		opts.Open = func(s port.Settings) (port.Port, error) { return port.OpenAs(s, owner) }
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &Driver{
		opts: opts, owner: owner, log: log.With("port", opts.Port.Path),
		byID: map[string]*devices.Device{}, byName: map[string]*devices.Device{},
		turn: make(chan struct{}, 1), kick: make(chan struct{}, 1), settled: make(chan struct{}),
		why:      errors.New("the port " + opts.Port.Path + " is not open yet"),
		mismatch: map[string]error{},
	}
	for i := range opts.Devices {
		dev := &opts.Devices[i]
		d.byID[dev.ID] = dev
		d.byName[dev.Address] = dev
	}
	return d
}

// greetWait bounds how long Open waits for the board's first answer: an
// Arduino restarts when its port opens and takes about two seconds.
const greetWait = 3 * time.Second

// Open starts the driver's keeper, which opens the port, greets the board
// and keeps it: it reopens the port with backoff when it fails (a USB
// adapter unplugged and back under the same path), and takes the board
// for lost when it stops answering. Open waits, up to greetWait or ctx,
// until the board answered or the port could not be opened, so the
// gateway starts knowing which; a board that is not there is offline, with
// why, and is looked for again.
func (d *Driver) Open(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return devices.ErrClosed
	}
	if d.stop != nil {
		d.mu.Unlock()
		return errors.New("line driver on " + d.opts.Port.Path + " is open already")
	}
	kctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	d.wg.Go(func() { d.keep(kctx) })
	d.mu.Unlock()
	t := time.NewTimer(greetWait)
	defer t.Stop()
	select {
	case <-d.settled:
	case <-t.C:
	case <-ctx.Done():
	}
	if err := d.Health(ctx); errors.Is(err, port.ErrHeld) {
		// Another driver of this gateway reaches the port: a configuration
		// that cannot work, not a board that is not there yet.
		_ = d.Close()
		return &devices.OpError{Op: "open", Err: err}
	}
	return nil
}

// settle says the first connection is known.
func (d *Driver) settle() { d.settleOnce.Do(func() { close(d.settled) }) }

// Close stops the keeper and closes the port. No goroutine of the driver
// outlives it.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	stop := d.stop
	d.mu.Unlock()
	if stop != nil {
		stop()
	}
	d.wg.Wait()
	d.owner.Release()
	return nil
}

// Devices returns the devices while the board answers, less those the
// firmware does not have as configured.
func (d *Driver) Devices() []devices.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.online || d.closed {
		return nil
	}
	out := make([]devices.Device, 0, len(d.opts.Devices))
	for _, dev := range d.opts.Devices {
		if d.mismatch[dev.ID] == nil {
			out = append(out, dev)
		}
	}
	return out
}

// Why says why a device is not listed.
func (d *Driver) Why(device string) error {
	if d.byID[device] == nil {
		return nil // not one of this board's devices
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.mismatch[device]; err != nil {
		return err
	}
	if !d.online {
		return d.why
	}
	return nil
}

// Health is nil while the board answers, or why it does not.
func (d *Driver) Health(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return devices.ErrClosed
	}
	if d.online {
		return nil
	}
	return d.why
}

// Stats returns the counts of what the line brought that was not awaited.
func (d *Driver) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Watch tells of events the board sends and of the board lost and found,
// until ctx is done.
func (d *Driver) Watch(ctx context.Context, fn func(devices.Notice)) { d.notices.Watch(ctx, fn) }

// setOnline records whether the board answers, and tells of each device
// that came or went.
func (d *Driver) setOnline(online bool, why error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.online
	d.online, d.why = online, why
	if online == was {
		return
	}
	if online {
		d.log.Info("line board online")
	} else {
		d.log.Warn("line board offline", "reason", why)
	}
	for _, dev := range d.opts.Devices {
		if d.mismatch[dev.ID] != nil {
			continue
		}
		if online {
			d.notices.Tell(devices.Notice{Device: dev.ID, Found: true})
		} else {
			d.notices.Tell(devices.Notice{Device: dev.ID, Lost: why})
		}
	}
}

// keep opens the port and keeps the board until ctx is done.
func (d *Driver) keep(ctx context.Context) {
	back := port.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for ctx.Err() == nil {
		c, err := d.connect()
		if err != nil {
			d.setOnline(false, err)
			d.settle()
			d.log.Debug("line port not open", "error", err)
			if !sleep(ctx, back.Next()) {
				return
			}
			continue
		}
		d.serve(ctx, c, &back)
		d.mu.Lock()
		d.conn = nil
		d.mu.Unlock()
		_ = c.p.Close()
		<-c.dead
		if ctx.Err() != nil {
			return // closing: nobody is told the board went
		}
		why := c.err
		if why == nil {
			why = errors.New("the port closed")
		}
		d.setOnline(false, why)
		if !sleep(ctx, back.Next()) {
			return
		}
	}
}

// connect opens the port and starts its reader.
func (d *Driver) connect() (*conn, error) {
	p, err := d.opts.Open(d.opts.Port)
	if err != nil {
		return nil, err
	}
	if err := p.SetReadTimeout(100 * time.Millisecond); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("serial port %s: %w", d.opts.Port.Path, err)
	}
	_ = p.ResetInputBuffer()
	c := &conn{p: p, dead: make(chan struct{})}
	d.mu.Lock()
	d.conn = c
	d.mu.Unlock()
	d.wg.Go(func() { d.read(c) })
	return c, nil
}

// serve greets the board on an open port and keeps it: a ping when idle,
// a greeting again when it booted, until the port fails or ctx is done.
func (d *Driver) serve(ctx context.Context, c *conn, back *port.Backoff) {
	t := time.NewTimer(0)
	defer t.Stop()
	greeted := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.dead:
			return
		case <-t.C:
		case <-d.kick:
		}
		d.mu.Lock()
		booted, missed := d.booted, d.misses >= missesToLose
		d.booted = false
		d.mu.Unlock()
		if !greeted || booted {
			// A board that was just plugged in (an Arduino resets when its
			// port opens) takes a moment: the greeting is tried again.
			err := d.greet(ctx)
			if err != nil {
				d.setOnline(false, err)
				t.Reset(back.Next())
				continue
			}
			greeted = true
			back.Reset()
			d.setOnline(true, nil)
			d.refreshReadings(ctx)
			d.settle()
			t.Reset(d.opts.Keepalive)
			continue
		}
		if _, err := d.request(ctx, "PING"); err != nil {
			if missed || d.missesNow() >= missesToLose {
				d.setOnline(false, fmt.Errorf("the board on %s stopped answering: %w", d.opts.Port.Path, err))
				greeted = false
			}
			t.Reset(back.Next())
			continue
		}
		t.Reset(d.opts.Keepalive)
	}
}

func (d *Driver) missesNow() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.misses
}

// greet pings the board and, with Discover, checks the devices against
// what it says it has.
func (d *Driver) greet(ctx context.Context) error {
	if _, err := d.request(ctx, "PING"); err != nil {
		return fmt.Errorf("the board on %s does not answer: %w", d.opts.Port.Path, err)
	}
	if !d.opts.Discover {
		return nil
	}
	m, err := d.request(ctx, "INFO")
	if err != nil {
		return fmt.Errorf("the board on %s did not say what it has: %w", d.opts.Port.Path, err)
	}
	info, err := parseInfo(m.Fields)
	if err != nil {
		return fmt.Errorf("the board on %s: %w", d.opts.Port.Path, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.mismatch)
	seen := map[string]bool{}
	for _, dev := range d.opts.Devices {
		seen[dev.Address] = true
		if err := info.fits(dev); err != nil {
			d.mismatch[dev.ID] = err
			d.log.Warn("line device does not fit its firmware", "device_id", dev.ID, "reason", err)
		}
	}
	for _, c := range info.caps {
		if !seen[c.name] {
			d.log.Info("the firmware offers a capability no device is configured for", "firmware", info.firmware,
				"version", info.version, "capability", c.name, "kind", c.kind, "type", c.typ, "unit", c.unit)
		}
	}
	d.log.Info("line firmware", "firmware", info.firmware, "version", info.version, "capabilities", len(info.caps))
	return nil
}

// refreshReadings reads every readable capability after a greeting, so
// what the board holds is known again, and tells of each reading.
func (d *Driver) refreshReadings(ctx context.Context) {
	for _, dev := range d.opts.Devices {
		c := &dev.Capabilities[0]
		if !c.Readable() || d.Why(dev.ID) != nil {
			continue
		}
		rd, err := d.Read(ctx, dev.ID, c.Name)
		if err != nil {
			d.log.Debug("line read after greeting failed", "device_id", dev.ID, "error", err)
			continue
		}
		d.mu.Lock()
		d.notices.Tell(devices.Notice{Device: dev.ID, Capability: c.Name, Reading: &rd})
		d.mu.Unlock()
	}
}

// read reads lines from the port until it fails or closes.
func (d *Driver) read(c *conn) {
	defer close(c.dead)
	buf := make([]byte, 512)
	line := make([]byte, 0, MaxLine)
	overlong := false
	for {
		n, err := c.p.Read(buf)
		if err != nil {
			c.err = fmt.Errorf("reading %s: %w", d.opts.Port.Path, err)
			return
		}
		for _, b := range buf[:n] {
			if b != '\n' {
				if len(line) < MaxLine {
					line = append(line, b)
				} else {
					overlong = true
				}
				continue
			}
			if overlong {
				d.noise(errors.New("a line over the limit of 256 bytes"))
			} else if len(line) > 0 {
				d.take(line)
			}
			line, overlong = line[:0], false
		}
	}
}

// noise counts a line discarded.
func (d *Driver) noise(err error) {
	d.mu.Lock()
	d.stats.Noise++
	d.mu.Unlock()
	d.log.Debug("line noise discarded", "reason", err)
}

// take handles one line from the board.
func (d *Driver) take(b []byte) {
	m, err := Parse(b)
	if err != nil {
		d.noise(err)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch m.Kind {
	case OK, Err:
		if m.ID != d.wait || d.waitCh == nil {
			d.stats.Stale++
			return
		}
		d.waitCh <- m // buffered for one, and wait is cleared after
		d.wait, d.waitCh = 0, nil
	case Event:
		if m.Name == "boot" {
			d.stats.Boots++
			d.booted = true
			d.log.Warn("line board started again", "version", m.Value)
			d.wake()
			return
		}
		dev := d.byName[m.Name]
		if dev == nil || d.mismatch[dev.ID] != nil || !d.online {
			// Not a device of ours, or not one offered now: a board taken
			// for lost is not heard until it answers again.
			return
		}
		c := &dev.Capabilities[0]
		v, err := parseValue(c, m.Value)
		if err != nil {
			d.stats.Noise++
			d.log.Debug("line event with a bad value", "device_id", dev.ID, "error", err)
			return
		}
		rd := devices.Reading{Value: v, At: time.Now(), Quality: devices.QualityGood}
		d.notices.Tell(devices.Notice{Device: dev.ID, Capability: c.Name, Reading: &rd})
	}
}

// wake kicks the keeper without blocking.
func (d *Driver) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// errNoReply is a request whose reply did not come in time.
var errNoReply = errors.New("no reply")

// request sends one request and waits for its reply. sent is false when
// nothing reached the port; an error after sending is errNoReply (the
// timeout), the link lost, or ctx's.
func (d *Driver) request(ctx context.Context, verb string, args ...string) (Message, error) {
	m, _, err := d.exchange(ctx, verb, args...)
	return m, err
}

// exchange is request, also saying whether the request left.
func (d *Driver) exchange(ctx context.Context, verb string, args ...string) (m Message, sent bool, err error) {
	select {
	case d.turn <- struct{}{}:
	case <-ctx.Done():
		return Message{}, false, ctx.Err()
	}
	defer func() { <-d.turn }()
	d.mu.Lock()
	c := d.conn
	if c == nil {
		why := d.why
		d.mu.Unlock()
		return Message{}, false, devices.Offline(why)
	}
	d.nextID++
	if d.nextID == 0 {
		d.nextID = 1
	}
	id := d.nextID
	ch := make(chan Message, 1)
	d.wait, d.waitCh = id, ch
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.wait == id {
			d.wait, d.waitCh = 0, nil
		}
		switch {
		case err == nil:
			d.misses = 0
		case errors.Is(err, errNoReply):
			d.misses++
			d.stats.Timeouts++
			if d.misses >= missesToLose {
				d.wake()
			}
		}
		d.mu.Unlock()
	}()
	n, werr := c.p.Write(AppendRequest(nil, id, verb, args...))
	if werr != nil {
		if n == 0 {
			return Message{}, false, devices.Offline(fmt.Errorf("writing to %s: %w", d.opts.Port.Path, werr))
		}
		return Message{}, true, fmt.Errorf("writing to %s: %w", d.opts.Port.Path, werr)
	}
	t := time.NewTimer(d.opts.Timeout)
	defer t.Stop()
	select {
	case m := <-ch:
		return m, true, nil
	case <-t.C:
		return Message{}, true, fmt.Errorf("%w to %d %s within %v", errNoReply, id, verb, d.opts.Timeout)
	case <-c.dead:
		return Message{}, true, fmt.Errorf("the port closed while waiting for the reply to %d %s: %w", id, verb, c.err)
	case <-ctx.Done():
		return Message{}, true, ctx.Err()
	}
}

// lookup finds a device's capability, or the error to return.
func (d *Driver) lookup(op, device, capability string) (*devices.Device, *devices.Capability, error) {
	dev := d.byID[device]
	if dev == nil {
		return nil, nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownDevice}
	}
	c := &dev.Capabilities[0]
	if c.Name != capability {
		return nil, nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownCapability}
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrClosed}
	}
	if err := d.Why(device); err != nil {
		return nil, nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.Offline(err)}
	}
	return dev, c, nil
}

// Read asks the board for a capability's value (GET).
func (d *Driver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	dev, c, err := d.lookup("read", device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	if !c.Readable() {
		return devices.Reading{}, opErr(devices.ErrNotReadable)
	}
	m, err := d.request(ctx, "GET", dev.Address)
	if err != nil {
		return devices.Reading{}, opErr(err)
	}
	if m.Kind == Err {
		return devices.Reading{}, opErr(devices.Refused(m.Code, m.Text))
	}
	if len(m.Fields) != 1 {
		return devices.Reading{}, opErr(fmt.Errorf("the board answered GET %s with %d values, not one", dev.Address, len(m.Fields)))
	}
	v, err := parseValue(c, m.Fields[0])
	if err != nil {
		return devices.Reading{}, opErr(err)
	}
	return devices.Reading{Value: v, At: time.Now(), Quality: devices.QualityGood}, nil
}

// Write sets an actuator (SET). It returns once the board said it set the
// output. A request whose reply never came may have been carried out: it
// is an unknown outcome, never a failure.
func (d *Driver) Write(ctx context.Context, device, capability string, v value.Value) error {
	dev, c, err := d.lookup("write", device, capability)
	if err != nil {
		return err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if c.Kind != devices.KindActuator {
		return opErr(devices.ErrNotWritable)
	}
	text, err := formatValue(c, v)
	if err != nil {
		return opErr(devices.BadRequest(err.Error()))
	}
	m, sent, err := d.exchange(ctx, "SET", dev.Address, text)
	switch {
	case err != nil && !sent:
		if devices.Classify(err) == devices.OutcomeOffline {
			return opErr(err)
		}
		return opErr(devices.Offline(err))
	case err != nil:
		return opErr(devices.UnknownOutcome(err))
	case m.Kind == Err:
		return opErr(devices.Refused(m.Code, m.Text))
	case len(m.Fields) != 0:
		// An OK was given; what it carried is not ours to read.
		d.log.Debug("line SET answered with extra fields", "device_id", device, "fields", m.Fields)
	}
	return nil
}

// parseValue reads a value the board sent for capability c.
func parseValue(c *devices.Capability, s string) (value.Value, error) {
	switch c.Type {
	case value.TypeBool:
		switch s {
		case "true":
			return value.Bool(true), nil
		case "false":
			return value.Bool(false), nil
		}
	case value.TypeNumber:
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return value.Number(f), nil
		}
	case value.TypeEnum:
		if slices.Contains(c.Enum, s) {
			return value.Enum(s), nil
		}
	}
	return value.Value{}, fmt.Errorf("the board sent %q for %s, which is not a %s of it", s, c.Name, c.Type)
}

// formatValue writes v for a SET of c.
func formatValue(c *devices.Capability, v value.Value) (string, error) {
	if v.Type != c.Type {
		return "", fmt.Errorf("%s takes a %s, not a %s", c.Name, c.Type, v.Type)
	}
	var s string
	switch v.Type {
	case value.TypeBool:
		s = strconv.FormatBool(v.Bool)
	case value.TypeNumber:
		s = strconv.FormatFloat(v.Num, 'g', -1, 64)
	case value.TypeEnum:
		s = v.Text
	}
	if !ValidValue(s) {
		return "", fmt.Errorf("%q cannot be written on the line protocol", s)
	}
	return s, nil
}

// sleep waits d or until ctx is done; false when ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// info is what a board said of itself (INFO).
type info struct {
	firmware, version string
	caps              []infoCap
}

type infoCap struct {
	name, kind, unit string
	typ              value.Type
	enum             []string
}

// parseInfo reads INFO's fields: firmware, version, then name:type:kind[:unit].
func parseInfo(f []string) (info, error) {
	if len(f) < 2 {
		return info{}, errors.New("INFO did not give a firmware name and version")
	}
	in := info{firmware: f[0], version: f[1]}
	for _, s := range f[2:] {
		p := strings.Split(s, ":")
		if len(p) < 3 || len(p) > 4 || !ValidName(p[0]) {
			return info{}, fmt.Errorf("INFO capability %q is not name:type:kind[:unit]", s)
		}
		c := infoCap{name: p[0], kind: p[2]}
		if len(p) == 4 {
			c.unit = p[3]
		}
		switch {
		case p[1] == "bool":
			c.typ = value.TypeBool
		case p[1] == "number":
			c.typ = value.TypeNumber
		case strings.HasPrefix(p[1], "enum="):
			c.typ, c.enum = value.TypeEnum, strings.Split(strings.TrimPrefix(p[1], "enum="), "|")
		default:
			return info{}, fmt.Errorf("INFO capability %s has type %q (want bool, number or enum=a|b)", p[0], p[1])
		}
		if c.kind != "sensor" && c.kind != "actuator" {
			return info{}, fmt.Errorf("INFO capability %s has kind %q (want sensor or actuator)", p[0], c.kind)
		}
		in.caps = append(in.caps, c)
	}
	return in, nil
}

// fits says whether dev is what the firmware has under its address.
func (in info) fits(dev devices.Device) error {
	c := dev.Capabilities[0]
	for _, fc := range in.caps {
		if fc.name != dev.Address {
			continue
		}
		if fc.kind != c.Kind.String() || fc.typ != c.Type {
			return fmt.Errorf("the firmware (%s %s) has %s as a %s %s; the configuration says %s %s",
				in.firmware, in.version, fc.name, fc.typ, fc.kind, c.Type, c.Kind)
		}
		if c.Type == value.TypeEnum {
			for _, e := range c.Enum {
				if !slices.Contains(fc.enum, e) {
					return fmt.Errorf("the firmware (%s %s) has no value %q for %s; it has %s",
						in.firmware, in.version, e, fc.name, strings.Join(fc.enum, ", "))
				}
			}
		}
		return nil
	}
	names := make([]string, len(in.caps))
	for i, fc := range in.caps {
		names[i] = fc.name
	}
	return fmt.Errorf("the firmware (%s %s) has no capability %s; it has %s",
		in.firmware, in.version, dev.Address, strings.Join(names, ", "))
}
