package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// benchBody is about the size of a real invoked event.
var benchBody = []byte(`{"attempt":"act-44b3574f8f5132e1","authorization":"verdict:supervised","capability":"open","device":"valve-1","key":"run-dd476831e4a32a08/1","principal":"schedule:open-valve","state":"executing","value":true}`)

// spread runs n calls of fn over w goroutines.
func spread(n, w int, fn func()) {
	var wg sync.WaitGroup
	for g := range w {
		count := n / w
		if g < n%w {
			count++
		}
		wg.Go(func() {
			for range count {
				fn()
			}
		})
	}
	wg.Wait()
}

// BenchmarkSyncAppend compares sync appends through the group-committing
// writer with the naive way: one bbolt Update (one fsync) per append.
func BenchmarkSyncAppend(b *testing.B) {
	for _, w := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("naive/writers=%d", w), func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "naive.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			_ = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bJournal); return err })
			b.ResetTimer()
			spread(b.N, w, func() {
				err := db.Update(func(tx *bolt.Tx) error {
					bk := tx.Bucket(bJournal)
					seq, _ := bk.NextSequence()
					return bk.Put(binary.BigEndian.AppendUint64(nil, seq), benchBody)
				})
				if err != nil {
					b.Error(err)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
		b.Run(fmt.Sprintf("group/writers=%d", w), func(b *testing.B) {
			j, err := Open(filepath.Join(b.TempDir(), FileName), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			ctx := context.Background()
			b.ResetTimer()
			spread(b.N, w, func() {
				_, err := j.Commit(ctx, runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked, Device: "valve-1", Body: benchBody},
					Durability: runtime.Sync})
				if err != nil {
					b.Error(err)
				}
			})
			b.StopTimer()
			reportCommits(b, j)
		})
	}
}

func reportCommits(b *testing.B, j *DB) {
	st := j.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	if st.Batches > 0 {
		b.ReportMetric(float64(st.CommitTime.Microseconds())/float64(st.Batches), "µs/fsync")
		b.ReportMetric(float64(st.Events)/float64(st.Batches), "appends/fsync")
	}
}

// BenchmarkAsyncAppend measures async appends from one caller; the run
// ends with a sync append, so every event counted is on disk.
func BenchmarkAsyncAppend(b *testing.B) {
	j, err := Open(filepath.Join(b.TempDir(), FileName), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		d := runtime.Async
		if i == b.N-1 {
			d = runtime.Sync
		}
		if _, err := j.Commit(ctx, runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: benchBody}, Durability: d}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCommits(b, j)
}

// BenchmarkRecovery measures a start over a journal of 100,000 events with
// open attempts and pending approvals: open, check the head, load. The
// baseline opens and closes the same file with bbolt alone.
func BenchmarkRecovery(b *testing.B) {
	path := filepath.Join(b.TempDir(), FileName)
	j, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 100_000 {
		e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: benchBody}}
		switch {
		case i%1000 == 0:
			e.Attempt = &runtime.Attempt{Key: fmt.Sprintf("k%d", i), ID: fmt.Sprintf("act-%d", i), Device: "valve-1", Capability: "open",
				Value: value.Bool(true), State: runtime.AttemptStaged, Updated: time.Now()}
		case i%1000 == 1:
			e.Approval = &runtime.Approval{ID: fmt.Sprintf("apr-%d", i), Kind: "actuation", Status: runtime.ApprovalPending,
				RequestedAt: time.Now(), Expires: time.Now().Add(time.Hour)}
		}
		if i == 99_999 {
			e.Durability = runtime.Sync
		}
		if _, err := j.Commit(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("bbolt-open", func(b *testing.B) {
		for b.Loop() {
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			_ = db.Close()
		}
	})
	b.Run("open-and-load", func(b *testing.B) {
		for b.Loop() {
			j, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			s, err := j.Load(ctx)
			if err != nil || s.LastSeq != 100_000 || len(s.Open) != 100 || len(s.Approvals) != 100 {
				b.Fatalf("load: %d events, %d open, %d approvals, %v", s.LastSeq, len(s.Open), len(s.Approvals), err)
			}
			b.StopTimer() // a start is open and load; the close stops the check at open
			_ = j.Close()
			b.StartTimer()
		}
	})
	// Until writes may go on: the whole chain and every record verified,
	// in the background while the gateway starts.
	b.Run("open-load-verified", func(b *testing.B) {
		for b.Loop() {
			j, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := j.Load(ctx); err != nil {
				b.Fatal(err)
			}
			<-j.Verified()
			if err := j.Err(); err != nil {
				b.Fatal(err)
			}
			_ = j.Close()
		}
	})
}

// BenchmarkReadStep compares a raw sim read with a governed read step on
// the in-memory journal and on this one, in one run.
func BenchmarkReadStep(b *testing.B) {
	ctx := context.Background()
	newEngine := func(b *testing.B, j runtime.Journal) (*runtime.Engine, *sim.Greenhouse) {
		g, err := sim.New(sim.Options{Devices: greenhouse()})
		if err != nil {
			b.Fatal(err)
		}
		reg := devices.NewRegistry()
		_ = reg.Add("sim", g)
		e, err := runtime.New(ctx, runtime.Options{Registry: reg, Journal: j})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = e.Close() })
		return e, g
	}
	b.Run("raw", func(b *testing.B) {
		_, g := newEngine(b, runtimetest.NewMemJournal())
		for b.Loop() {
			if _, err := g.Read(ctx, "tank-1", "level"); err != nil {
				b.Fatal(err)
			}
		}
	})
	step := func(b *testing.B, e *runtime.Engine) {
		for b.Loop() {
			obs, err := e.Read(ctx, "bench", "tank-1", "level")
			if err != nil || obs.Kind != runtime.Completed {
				b.Fatalf("%+v %v", obs, err)
			}
		}
	}
	b.Run("governed-memory", func(b *testing.B) {
		e, _ := newEngine(b, runtimetest.NewMemJournal())
		step(b, e)
	})
	b.Run("governed-bbolt", func(b *testing.B) {
		j, err := Open(filepath.Join(b.TempDir(), FileName), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = j.Close() })
		e, _ := newEngine(b, j)
		step(b, e)
	})
}
