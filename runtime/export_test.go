package runtime

import "github.com/shadowgate/shadowgate/devices"

// LockHeld reports whether e's lock is held at this moment, for the tests
// that show foreign code is never called under it.
func LockHeld(e *Engine) bool {
	if e.mu.TryLock() {
		e.mu.Unlock()
		return false
	}
	return true
}

// DecideHeld reports whether e's decision lock is held at this moment.
func DecideHeld(e *Engine) bool {
	if e.decide.TryLock() {
		e.decide.Unlock()
		return false
	}
	return true
}

// KeepReading keeps a reading as a read step does, for the benchmark of
// what a reading costs beyond the step (running interlocks, drift).
func KeepReading(e *Engine, device, capability string, rd devices.Reading) {
	e.keepReading(device, capability, rd)
}

// NewID is newID, for the test of how identifiers sort.
func NewID(prefix string) string { return newID(prefix) }
