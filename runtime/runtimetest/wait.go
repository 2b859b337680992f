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
