package runtimetest

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test naming what it
// waited for if it does not within 30 seconds. The bound is not a timing
// assertion: it only keeps a broken test from hanging the suite.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Within runs fn in a goroutine of its own and fails the test if fn has
// not returned within limit: a lock left held or a stop that never ends
// blocks fn forever, and no context reaches a goroutine waiting on a
// mutex. The goroutine is left behind if it never returns.
func Within(t testing.TB, what string, limit time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not complete within %s (is a lock still held?)", what, limit)
	}
}
