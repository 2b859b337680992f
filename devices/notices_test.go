package devices

import (
	"context"
	"sync"
	"testing"
)

func TestNoticesKeepOrderAndDropTheOldest(t *testing.T) {
	var ns Notices
	for i := range MaxNotices + 3 {
		ns.Tell(Notice{Device: "d", Capability: string(rune('a' + i%26)), Found: i%2 == 0})
	}
	if ns.Dropped() != 3 {
		t.Fatalf("Dropped = %d, want 3", ns.Dropped())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []Notice
	ns.Watch(ctx, func(n Notice) {
		got = append(got, n)
		if len(got) == MaxNotices {
			cancel()
		}
	})
	// The three oldest went; the rest came in the order told.
	if len(got) != MaxNotices || got[0].Capability != string(rune('a'+3)) || got[MaxNotices-1].Capability != string(rune('a'+(MaxNotices+2)%26)) {
		t.Fatalf("got %d notices, first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
}

func TestNoticesWakeAWaitingWatch(t *testing.T) {
	var ns Notices
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	seen := make(chan Notice, 1)
	wg.Go(func() { ns.Watch(ctx, func(n Notice) { seen <- n }) })
	ns.Tell(Notice{Device: "pump-1", Found: true})
	if n := <-seen; n.Device != "pump-1" || !n.Found {
		t.Fatalf("Watch gave %+v", n)
	}
	cancel()
	wg.Wait()
}
