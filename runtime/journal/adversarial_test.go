package journal

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
)

// Every sequence and count a client can send reaches Events: none may
// panic, wrap around, or return events that are not after since.
func TestAdversarialJournalEvents(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	fill(t, j, 40)
	extremes := []uint64{0, 1, 39, 40, 41, 1 << 31, 1<<53 + 1, math.MaxInt64, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
	limits := []int{0, -1, 1, 1 << 31, math.MaxInt64, math.MinInt64}
	for _, since := range extremes {
		for _, limit := range limits {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			evs, err := j.Events(ctx, since, limit)
			cancel()
			if err != nil {
				t.Fatalf("Events(%d, %d) = %v", since, limit, err)
			}
			for _, e := range evs {
				if e.Seq <= since {
					t.Fatalf("Events(%d, %d) returned seq %d", since, limit, e.Seq)
				}
			}
			want := 0
			if since < 40 {
				want = int(40 - since)
			}
			if limit > 0 {
				want = min(want, limit)
			}
			if len(evs) != want {
				t.Fatalf("Events(%d, %d) returned %d events, want %d", since, limit, len(evs), want)
			}
		}
	}
}

// A panic inside a journal operation leaves no lock held: the next commit
// and read complete, and Close returns.
func TestPanicInsideTheJournalLeavesNoLockHeld(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	fill(t, j, 5)
	var once atomic.Bool
	SetEventsHookForTest(t, func(uint64, int) {
		if once.CompareAndSwap(false, true) {
			panic("injected inside Events")
		}
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the injected panic did not happen")
			}
		}()
		_, _ = j.Events(context.Background(), 0, 10)
	}()
	done := make(chan error, 1)
	go func() {
		_, err := j.Commit(context.Background(), runtime.Entry{Event: ev(runtime.KindObserved, `{}`), Durability: runtime.Sync})
		if err == nil {
			_, err = j.Events(context.Background(), 0, 10)
		}
		if err == nil {
			err = j.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the journal hangs after a panic inside it: its lock is still held")
	}
}
