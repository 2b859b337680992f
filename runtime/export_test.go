package runtime

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
