package opcua

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// options configure a driver; configure makes them from the file.
type options struct {
	Name       string
	URL        string
	Policy     string // a policy URI
	Mode       ua.MessageSecurityMode
	Thumbprint string // pinned, lower-case hex; "" pins nothing (policy None only)
	Username   string
	Password   string
	CertFile   string // "" makes or reuses opcua-<Name>.der in StateDir
	KeyFile    string
	StateDir   string
	Timeout    time.Duration
	Devices    []devices.Device
	Logger     *slog.Logger
	points     map[string]map[string]*point

	// check is how often the session is looked at (its state, and a read
	// of the server's clock every pingEvery checks); zero is 1s.
	check time.Duration
	// backoffMin and backoffMax space out connection attempts; zero is
	// 500ms doubling to 30s.
	backoffMin, backoffMax time.Duration
}

// pingEvery is how many session checks pass between two reads of the
// server's clock, which finds a server that stopped answering without
// closing the connection.
const pingEvery = 5

// missedPings is how many reads of the server's clock in a row may fail
// before the session is taken for lost.
const missedPings = 2

// Driver reaches the variables of one OPC UA server. It is safe for
// concurrent use. Its keeper goroutine, started by Open and waited for by
// Close, connects (after checking the server certificate against the
// pinned thumbprint), follows the subscriptions, watches the session, and
// connects again with backoff when the session or the secure channel
// drops; gopcua's own reconnection is off, so that every loss is seen,
// told (Notice.Lost) and its subscriptions built anew.
type Driver struct {
	o    options
	log  *slog.Logger
	byID map[string]*devices.Device

	// kick asks the keeper to look at the session now: a request failed.
	kick chan struct{}
	// settled is closed once the first connection attempt is over.
	settled    chan struct{}
	settleOnce sync.Once
	// notices are what Watch hands on; they have their own lock.
	notices devices.Notices

	// mu guards everything below.
	mu     sync.Mutex
	conn   *session // nil while not connected
	online bool
	why    error // why not online
	closed bool
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// session is one connection to the server, with what was learnt at
// connecting.
type session struct {
	c *gopcua.Client
	// types are the data types of the nodes, by node id text.
	types map[string]dataType
	// misfit says why a node cannot be used (no such node, a data type
	// the driver does not convert, one the capability does not fit), by
	// device, capability and then "write" or "read".
	misfit map[string]error
}

func misfitKey(device, capability, op string) string {
	return device + "\x00" + capability + "\x00" + op
}

// newDriver returns a driver; Open starts it.
func newDriver(o options) (*Driver, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.check <= 0 {
		o.check = time.Second
	}
	if o.backoffMin <= 0 {
		o.backoffMin = 500 * time.Millisecond
	}
	if o.backoffMax < o.backoffMin {
		o.backoffMax = max(o.backoffMin, 30*time.Second)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default().With("component", "opcua", "driver", o.Name)
	}
	d := &Driver{
		o: o, log: log.With("url", o.URL), byID: map[string]*devices.Device{},
		kick: make(chan struct{}, 1), settled: make(chan struct{}),
		why: errors.New("not connected to " + o.URL + " yet"),
	}
	for i := range o.Devices {
		dev := &o.Devices[i]
		for _, c := range dev.Capabilities {
			if o.points[dev.ID][c.Name] == nil {
				return nil, fmt.Errorf("opcua driver %s: %s.%s has no node", o.Name, dev.ID, c.Name)
			}
		}
		d.byID[dev.ID] = dev
	}
	return d, nil
}

// openWait bounds how long Open waits for the first connection.
const openWait = 5 * time.Second

// Open makes the client's certificate if security needs one and none is
// there yet, and starts the keeper. It waits, up to openWait or ctx, for
// the first connection attempt, so the gateway starts knowing whether the
// server is there; a server that is not is offline, with why, and is
// tried again with backoff. Open fails only for what retrying cannot mend
// (the client certificate cannot be made or read).
func (d *Driver) Open(ctx context.Context) error {
	if d.o.Mode == ua.MessageSecurityModeNone && d.o.Thumbprint != "" {
		d.log.Warn("opcua security None: the pinned thumbprint catches a wrong server, not an impostor; use Basic256Sha256 to make the server prove it",
			"thumbprint", d.o.Thumbprint)
	}
	var ident *identity
	if d.o.Mode != ua.MessageSecurityModeNone {
		der, key, err := clientIdentity(d.o.StateDir, d.o.Name, d.o.CertFile, d.o.KeyFile)
		if err != nil {
			return &devices.OpError{Op: "open", Err: fmt.Errorf("opcua driver %s: %w", d.o.Name, err)}
		}
		ident = &identity{der, key}
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return devices.ErrClosed
	}
	if d.stop != nil {
		d.mu.Unlock()
		return errors.New("opcua driver " + d.o.Name + " is open already")
	}
	kctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	d.wg.Go(func() { d.keep(kctx, ident) })
	d.mu.Unlock()
	t := time.NewTimer(openWait)
	defer t.Stop()
	select {
	case <-d.settled:
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// Close stops the keeper and closes the session. No goroutine of the
// driver, nor of its client, outlives it.
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
	return nil
}

// Devices returns every device while the session is up, none while not.
func (d *Driver) Devices() []devices.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.online || d.closed {
		return nil
	}
	return d.o.Devices
}

// Why says why a device is not listed: the session is not up, and why.
func (d *Driver) Why(device string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID[device] == nil || d.online {
		return nil
	}
	return d.why
}

// Health is nil while the session is up, or why it is not.
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

// Watch tells of readings from subscriptions and of the server lost and
// found, until ctx is done.
func (d *Driver) Watch(ctx context.Context, fn func(devices.Notice)) { d.notices.Watch(ctx, fn) }

// setConn records the session (nil: none) and tells of each device that
// came or went.
func (d *Driver) setConn(s *session, why error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.online
	d.conn, d.online = s, s != nil
	if s == nil {
		d.why = why
	}
	if d.online == was {
		return
	}
	if d.online {
		d.log.Info("opcua server online")
	} else {
		d.log.Warn("opcua server offline", "reason", why)
	}
	for _, dev := range d.o.Devices {
		if d.online {
			d.notices.Tell(devices.Notice{Device: dev.ID, Found: true})
		} else {
			d.notices.Tell(devices.Notice{Device: dev.ID, Lost: why})
		}
	}
}

// setWhy records why a connection attempt failed while offline.
func (d *Driver) setWhy(why error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.online {
		d.why = why
	}
}

func (d *Driver) settle() { d.settleOnce.Do(func() { close(d.settled) }) }

// wake asks the keeper to look at the session, without blocking.
func (d *Driver) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// stableSession is how long a session must hold for the reconnect backoff
// to start again from its minimum.
const stableSession = 30 * time.Second

// keep connects and keeps the session until ctx is done.
func (d *Driver) keep(ctx context.Context, ident *identity) {
	back := backoff{min: d.o.backoffMin, max: d.o.backoffMax}
	for ctx.Err() == nil {
		s, err := d.connectSafely(ctx, ident)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.setWhy(err)
			d.settle()
			d.log.Debug("opcua connection failed", "error", err)
			if !sleep(ctx, back.next()) {
				return
			}
			continue
		}
		d.setConn(s, nil)
		d.settle()
		up := time.Now()
		why := d.serve(ctx, s)
		if time.Since(up) >= stableSession {
			// Only a session that held resets the backoff: one that drops
			// at once (a server that takes connections and fails them) is
			// tried again ever more slowly, not in a storm.
			back.reset()
		}
		if ctx.Err() != nil {
			d.mu.Lock()
			d.conn = nil
			d.mu.Unlock()
			d.closeClient(s)
			return // closing: nobody is told the server went
		}
		d.setConn(nil, why)
		d.closeClient(s)
		if !sleep(ctx, back.next()) {
			return
		}
	}
}

// connectSafely is connect, with a panic inside gopcua's client (a server
// whose session signature or certificate it cannot handle: it dereferences
// a session it did not make, asserts an RSA key it was not given) turned
// into a failed connection: a misbehaving PLC must not end the gateway.
func (d *Driver) connectSafely(ctx context.Context, ident *identity) (s *session, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("connecting to %s: the OPC-UA client failed on the server's answers: %v", d.o.URL, r)
			d.log.Error("opcua client panicked while connecting", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	return d.connect(ctx, ident)
}

// closeClient closes a session's client, bounded in time: a server that
// is gone does not answer CloseSession.
func (d *Driver) closeClient(s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), min(d.o.Timeout, time.Second))
	defer cancel()
	_ = s.c.Close(ctx)
}

// identity is the client's certificate and key.
type identity struct {
	der []byte
	key *rsa.PrivateKey
}

// lookup finds a device's capability and its point.
func (d *Driver) lookup(op, device, capability string) (*devices.Capability, *point, error) {
	dev := d.byID[device]
	if dev == nil {
		return nil, nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownDevice}
	}
	c, ok := dev.Capability(capability)
	if !ok {
		return nil, nil, &devices.OpError{Op: op, Device: device, Capability: capability, Err: devices.ErrUnknownCapability}
	}
	return c, d.o.points[device][capability], nil
}

// current returns the session, or the error a call gets without one.
func (d *Driver) current() (*session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, devices.ErrClosed
	}
	if d.conn == nil {
		return nil, devices.Offline(d.why)
	}
	return d.conn, nil
}

// Read reads the capability's node (an actuator's read_back node, if it
// has one): its Value attribute. A bad status is a refusal with the
// status's name; an uncertain one a stale reading. The reading's time is
// when it arrived, not the server's timestamp, so that a PLC's clock does
// not make a reading look fresher than it is.
func (d *Driver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	c, p, err := d.lookup("read", device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	if !c.Readable() {
		return devices.Reading{}, opErr(devices.ErrNotReadable)
	}
	s, err := d.current()
	if err != nil {
		return devices.Reading{}, opErr(err)
	}
	if err := s.misfit[misfitKey(device, capability, "read")]; err != nil {
		return devices.Reading{}, opErr(devices.BadRequest(err.Error()))
	}
	rctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	node := p.readNode()
	res, err := s.c.Read(rctx, &ua.ReadRequest{
		NodesToRead:        []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDValue}},
		TimestampsToReturn: ua.TimestampsToReturnNeither,
	})
	if err != nil {
		d.wake()
		if errors.Is(err, ua.StatusBadServerNotConnected) {
			return devices.Reading{}, opErr(devices.Offline(fmt.Errorf("reading %s: %w", node, err)))
		}
		return devices.Reading{}, opErr(fmt.Errorf("reading %s: %w", node, err))
	}
	if res == nil || len(res.Results) != 1 || res.Results[0] == nil {
		return devices.Reading{}, opErr(fmt.Errorf("reading %s: the server answered with %d results for one node", node, resultCount(res)))
	}
	return readingOf(c, node, res.Results[0], time.Now(), opErr)
}

func resultCount(res *ua.ReadResponse) int {
	if res == nil {
		return 0
	}
	return len(res.Results)
}

// readingOf makes a reading of a data value the server sent for c.
func readingOf(c *devices.Capability, node *ua.NodeID, dv *ua.DataValue, at time.Time, opErr func(error) error) (devices.Reading, error) {
	q := devices.QualityGood
	switch {
	case isBad(dv.Status):
		code, text := statusName(dv.Status)
		return devices.Reading{}, opErr(devices.Refused(code, text))
	case isUncertain(dv.Status):
		q = devices.QualityStale
	}
	v, err := fromVariant(c, dv.Value)
	if err != nil {
		return devices.Reading{}, opErr(fmt.Errorf("node %s: %w", node, err))
	}
	return devices.Reading{Value: v, At: at, Quality: q}, nil
}

// Write writes the capability's node. The value is converted to the node's
// data type first; a value that does not fit is a bad request, and nothing
// is sent. A good status is done; a bad one a refusal with the status's
// name; a request whose answer never came (a timeout, the session lost
// after sending) an unknown outcome: the value may have been written.
func (d *Driver) Write(ctx context.Context, device, capability string, v value.Value) error {
	c, p, err := d.lookup("write", device, capability)
	if err != nil {
		return err
	}
	opErr := func(err error) error {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if c.Kind != devices.KindActuator {
		return opErr(devices.ErrNotWritable)
	}
	s, err := d.current()
	if err != nil {
		return opErr(err)
	}
	if err := s.misfit[misfitKey(device, capability, "write")]; err != nil {
		return opErr(devices.BadRequest(err.Error()))
	}
	t := s.types[p.node.String()]
	vr, err := toVariant(c, t, v)
	if err != nil {
		return opErr(devices.BadRequest(fmt.Sprintf("node %s: %v", p.node, err)))
	}
	wctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	res, err := s.c.Write(wctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{
		NodeID: p.node, AttributeID: ua.AttributeIDValue,
		Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: vr},
	}}})
	switch {
	case errors.Is(err, ua.StatusBadServerNotConnected):
		// The client had no secure channel: nothing left.
		d.wake()
		return opErr(devices.Offline(fmt.Errorf("writing %s: %w", p.node, err)))
	case err != nil:
		d.wake()
		return opErr(devices.UnknownOutcome(fmt.Errorf("writing %s: %w", p.node, err)))
	case res == nil || len(res.Results) != 1:
		n := 0
		if res != nil {
			n = len(res.Results)
		}
		return opErr(devices.UnknownOutcome(fmt.Errorf("writing %s: the server answered with %d results for one node", p.node, n)))
	}
	st := res.Results[0]
	switch {
	case isBad(st):
		code, text := statusName(st)
		return opErr(devices.Refused(code, text))
	case isUncertain(st):
		code, text := statusName(st)
		return opErr(devices.UnknownOutcome(fmt.Errorf("writing %s: the server answered %s (%s)", p.node, code, text)))
	}
	return nil
}

func isBad(s ua.StatusCode) bool       { return s&0xC0000000 == 0x80000000 || s&0xC0000000 == 0xC0000000 }
func isUncertain(s ua.StatusCode) bool { return s&0xC0000000 == 0x40000000 }

// statusName returns a status code's name without gopcua's prefix
// ("BadNotWritable") and its description; an unknown code is its hex.
func statusName(s ua.StatusCode) (code, text string) {
	if d, ok := ua.StatusCodes[s]; ok {
		name := d.Name
		if len(name) > len("Status") && name[:len("Status")] == "Status" {
			name = name[len("Status"):]
		}
		return name, d.Text
	}
	// The low 16 bits are flags and info bits: look the code up without them.
	if _, ok := ua.StatusCodes[s&0xFFFF0000]; ok && s&0xFFFF0000 != s {
		return statusName(s & 0xFFFF0000)
	}
	return fmt.Sprintf("0x%08X", uint32(s)), ""
}

// backoff spaces out connection attempts: min, doubling up to max.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur < b.min {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d
}

func (b *backoff) reset() { b.cur = 0 }

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
