package devicetest

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// ErrLostAck is the cause of the unknown outcome of a write whose
// acknowledgement was lost on purpose (Fault.LostAck).
var ErrLostAck = errors.New("the acknowledgement was lost (injected fault)")

// Fault is what a test injects into one device. The zero value is healthy.
type Fault struct {
	// Offline removes the device: it leaves Devices, and every read and
	// write of it fails with devices.ErrOffline without reaching the
	// wrapped driver.
	Offline bool
	// Stuck makes a write succeed without passing it on: the world does not
	// move, so a read-back contradicts the write.
	Stuck bool
	// WriteDelay delays a write before it is passed on; ReadDelay delays a
	// read. Both honour ctx: a call whose ctx ends first returns ctx's
	// error and passes nothing on.
	WriteDelay, ReadDelay time.Duration
	// AckDelay delays the answer of a write that was passed on, as a device
	// whose acknowledgement is slow. If ctx ends first, the write returns an
	// unknown outcome wrapping ctx's error: the effect happened, and the
	// caller cannot know it.
	AckDelay time.Duration
	// LostAck makes a write that was passed on return an unknown outcome
	// wrapping ErrLostAck, after AckDelay: the acknowledgement never came.
	LostAck bool
	// WriteErr and ReadErr make calls fail with this error, after the
	// delay, without passing them on. A typed outcome (devices.Refused,
	// devices.BadRequest) tests how the caller handles it; the error is
	// returned inside an *devices.OpError.
	WriteErr, ReadErr error
	// Travel makes an actuator slow: a write is acknowledged at once and
	// passed on only after Travel, as a valve that takes its time to move.
	Travel time.Duration
	// Returns makes an actuator go back: Returns after a write was passed
	// on, the value it had before is written again, as a spring-return
	// valve or a contactor that drops out.
	Returns time.Duration
}

// healthy reports whether f injects nothing.
func (f Fault) healthy() bool {
	return !f.Offline && !f.Stuck && f.WriteDelay == 0 && f.ReadDelay == 0 && f.AckDelay == 0 && !f.LostAck &&
		f.WriteErr == nil && f.ReadErr == nil && f.Travel == 0 && f.Returns == 0
}

// Options configure a wrapper. The zero value injects nothing.
type Options struct {
	// Faults are injected from the start, by device id.
	Faults map[string]Fault
	// Received, if set, is called when a write reaches a device that is not
	// offline, before a delay or an error holds it up: the device has the
	// command in hand. An error from it fails the write, which is then not
	// passed on. A simulated device that keeps a record of the commands it
	// received (in a state file that outlives the process) keeps it here.
	Received func(device, capability string, v value.Value) error
}

// Driver is a devices.Driver that passes every call on to the driver it
// wraps, except where a fault says otherwise. Faults can be changed at any
// time with SetFault; it is safe for concurrent use. It does not report
// its wrapped driver's health: Unwrap reaches the driver for that.
type Driver struct {
	inner    devices.Driver
	received func(device, capability string, v value.Value) error
	// faults is replaced as a whole on every change, so that a call reads
	// it without a lock.
	faults atomic.Pointer[faultSet]

	// mu guards counts, the cache of Devices, later and closed, and
	// serializes SetFault.
	mu     sync.Mutex
	counts map[call]int
	cache  devicesCache
	// later holds the writes Travel and Returns left for later; Close
	// stops them.
	later  []*time.Timer
	closed bool
}

// faultSet is the faults in force, never modified once stored.
type faultSet struct {
	m       map[string]Fault
	offline int // how many of m are offline
}

// call names an operation on one capability, for Count.
type call struct{ op, device, capability string }

// devicesCache is the last list Devices returned with an offline device
// left out, and what it was made from.
type devicesCache struct {
	faults *faultSet
	from   []devices.Device
	list   []devices.Device
}

// Wrap returns d with the fault knobs of o. It does not open d.
func Wrap(d devices.Driver, o Options) *Driver {
	w := &Driver{inner: d, received: o.Received, counts: map[call]int{}}
	fs := &faultSet{m: map[string]Fault{}}
	for id, f := range o.Faults {
		if !f.healthy() {
			fs.m[id] = f
			if f.Offline {
				fs.offline++
			}
		}
	}
	w.faults.Store(fs)
	return w
}

// Unwrap returns the wrapped driver.
func (w *Driver) Unwrap() devices.Driver { return w.inner }

// SetFault injects a fault into a device, replacing the one it had; the
// zero Fault heals it. Calls already under way keep the fault they began
// with.
func (w *Driver) SetFault(device string, f Fault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.faults.Load()
	next := &faultSet{m: maps.Clone(old.m), offline: old.offline}
	if old.m[device].Offline {
		next.offline--
	}
	if f.healthy() {
		delete(next.m, device)
	} else {
		next.m[device] = f
		if f.Offline {
			next.offline++
		}
	}
	w.faults.Store(next)
}

// Fault returns the fault a device has now.
func (w *Driver) Fault(device string) Fault { return w.faults.Load().m[device] }

// Count returns how many times op ("read" or "write") was called on
// device.capability, failed calls included.
func (w *Driver) Count(op, device, capability string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[call{op, device, capability}]
}

func (w *Driver) count(op, device, capability string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[call{op, device, capability}]++
}

// Open opens the wrapped driver.
func (w *Driver) Open(ctx context.Context) error { return w.inner.Open(ctx) }

// Close closes the wrapped driver.
func (w *Driver) Close() error {
	w.mu.Lock()
	w.closed = true
	for _, t := range w.later {
		t.Stop()
	}
	w.later = nil
	w.mu.Unlock()
	return w.inner.Close()
}

// afterwards writes v to the wrapped driver after d, unless the wrapper
// is closed first.
func (w *Driver) afterwards(d time.Duration, device, capability string, v value.Value, then func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.later = append(w.later, time.AfterFunc(d, func() {
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if closed {
			return
		}
		if err := w.inner.Write(context.Background(), device, capability, v); err == nil && then != nil {
			then()
		}
	}))
}

// Devices returns the wrapped driver's devices, without the offline ones.
// The caller must not modify the returned slice.
func (w *Driver) Devices() []devices.Device {
	all := w.inner.Devices()
	fs := w.faults.Load()
	if fs.offline == 0 {
		return all
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &w.cache
	if c.faults == fs && sameSlice(c.from, all) {
		return c.list
	}
	list := make([]devices.Device, 0, len(all))
	for _, d := range all {
		if !fs.m[d.ID].Offline {
			list = append(list, d)
		}
	}
	*c = devicesCache{faults: fs, from: all, list: list}
	return list
}

// Why says why an offline device is not listed: the fault a test set.
func (w *Driver) Why(device string) error {
	if w.Fault(device).Offline {
		return errors.New("offline by an injected fault")
	}
	return nil
}

// sameSlice reports whether a and b are the same slice, not only equal.
func sameSlice(a, b []devices.Device) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Read reads through the wrapped driver, unless a fault says otherwise.
func (w *Driver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	w.count("read", device, capability)
	f := w.Fault(device)
	opErr := func(err error) error {
		return &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	if f.Offline {
		return devices.Reading{}, opErr(devices.Offline(nil))
	}
	if err := wait(ctx, f.ReadDelay); err != nil {
		return devices.Reading{}, opErr(err)
	}
	if f.ReadErr != nil {
		return devices.Reading{}, opErr(f.ReadErr)
	}
	return w.inner.Read(ctx, device, capability)
}

// Write writes through the wrapped driver, unless a fault says otherwise.
func (w *Driver) Write(ctx context.Context, device, capability string, v value.Value) error {
	w.count("write", device, capability)
	f := w.Fault(device)
	opErr := func(err error) error {
		return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
	}
	if f.Offline {
		return opErr(devices.Offline(nil))
	}
	if w.received != nil {
		if err := w.received(device, capability, v); err != nil {
			return err
		}
	}
	if err := wait(ctx, f.WriteDelay); err != nil {
		return opErr(err)
	}
	if f.WriteErr != nil {
		return opErr(f.WriteErr)
	}
	var back func()
	if f.Returns > 0 && !f.Stuck {
		if rd, err := w.inner.Read(ctx, device, capability); err == nil && !rd.Value.Equal(v) {
			was := rd.Value
			back = func() { w.afterwards(f.Returns, device, capability, was, nil) }
		}
	}
	switch {
	case f.Stuck:
	case f.Travel > 0:
		w.afterwards(f.Travel, device, capability, v, back)
	default:
		if err := w.inner.Write(ctx, device, capability, v); err != nil {
			return err
		}
		if back != nil {
			back()
		}
	}
	if err := wait(ctx, f.AckDelay); err != nil {
		return opErr(devices.UnknownOutcome(err))
	}
	if f.LostAck {
		return opErr(devices.UnknownOutcome(ErrLostAck))
	}
	return nil
}

// wait blocks for d or until ctx is done. It does not look at ctx when
// there is nothing to wait for: the wrapped driver answers for that.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
