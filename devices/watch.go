package devices

import "context"

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
