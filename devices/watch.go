package devices

import (
	"context"
	"sync"
)

// Watcher is a driver that tells of changes as they happen instead of
// waiting to be asked: an input pin's edge, a device's unsolicited event
// line, a link lost or found again. A driver that cannot tell is polled
// (Capability.Poll) and its devices are looked at on every step.
//
// The engine calls Watch once, after Open, from a goroutine it owns. Watch
// calls fn with each notice, one at a time, until ctx is done, and then
// returns; it never calls fn after it returned. fn may block briefly (it
// journals what it is told), so a driver must not call it while holding a
// lock its Read or Write need.
type Watcher interface {
	Watch(ctx context.Context, fn func(Notice))
}

// Notice is one change a Watcher tells of. Exactly one of Reading, Lost and
// Found is set.
type Notice struct {
	// Device is the device's id.
	Device string
	// Capability and Reading are a new reading the device gave of its own
	// accord: a debounced edge, an EVT line. The driver's Read returns at
	// least as new a reading afterwards.
	Capability string
	Reading    *Reading
	// Lost says the device can no longer be reached, and why: the port
	// closed, the board stopped answering. Devices no longer lists it.
	Lost error
	// Found says the device can be reached again: Devices lists it.
	Found bool
}

// Why is a driver that can say why one of its devices is not listed by
// Devices, for a device that vanished while nobody watched.
type Why interface {
	// Why returns why the device cannot be reached now, or nil when it can
	// or the driver does not know it.
	Why(device string) error
}

// Notices is the queue a driver keeps between the notices it makes and
// its Watch: Tell never blocks (a driver may tell while it holds its own
// locks), and Watch hands them on in order. It holds at most MaxNotices;
// when a Watch does not keep up, the oldest go first and are counted. The
// zero value is ready to use; it is safe for concurrent use.
type Notices struct {
	// mu guards everything below.
	mu      sync.Mutex
	q       []Notice
	wake    chan struct{} // closed and replaced when q grows
	dropped int
}

// MaxNotices bounds the notices a Notices keeps.
const MaxNotices = 1024

// Tell queues n for Watch.
func (ns *Notices) Tell(n Notice) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if len(ns.q) >= MaxNotices {
		ns.q = ns.q[1:]
		ns.dropped++
	}
	ns.q = append(ns.q, n)
	if ns.wake != nil {
		close(ns.wake)
		ns.wake = nil
	}
}

// Dropped returns how many notices were dropped for want of a Watch that
// kept up.
func (ns *Notices) Dropped() int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.dropped
}

// Watch calls fn with each notice told, in order, until ctx is done.
func (ns *Notices) Watch(ctx context.Context, fn func(Notice)) {
	for {
		ns.mu.Lock()
		batch := ns.q
		ns.q = nil
		if ns.wake == nil {
			ns.wake = make(chan struct{})
		}
		wake := ns.wake
		ns.mu.Unlock()
		for _, n := range batch {
			if ctx.Err() != nil {
				return
			}
			fn(n)
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}
