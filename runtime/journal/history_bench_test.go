package journal

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// historyRuns is how many finished runs the history benchmarks keep: one
// per MQTT read command for a day or so of a busy gateway.
const historyRuns = 100_000

// historyFile writes, once per benchmark binary, a journal holding
// historyRuns finished runs (each a command's run; one in ten with an
// attempt, refused) that ended two hours ago, ten runs still open, and ten approvals
// pending; it returns its path.
var historyFile = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "shadowgate-history-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName)
	j, err := Open(path, Options{})
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	ended := time.Now().Add(-2 * time.Hour)
	for i := range historyRuns + 20 {
		id := fmt.Sprintf("run-%06d", i)
		e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindEnded, Run: id, Body: benchBody}}
		switch {
		case i < historyRuns:
			e.Run = &runtime.RunRecord{ID: id, Plan: runtime.CommandPlan, RequestID: "mqtt:reader/" + id, Status: runtime.RunEnded,
				StartedAt: ended.Add(-time.Millisecond), EndedAt: ended}
			if i%10 == 0 {
				// A write among the reads: its attempt, refused.
				a := runtime.Attempt{Key: id + "/1", ID: "act-" + id, Run: id, Step: 1, Device: "valve-1", Capability: "open",
					Value: value.Bool(true), State: runtime.AttemptStaged, Updated: ended}
				staged := a
				if _, err := j.Commit(ctx, runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked, Run: id, Body: benchBody}, Attempt: &staged}); err != nil {
					return "", err
				}
				a.State = runtime.AttemptRefused
				e.Attempt = &a
			}
		case i < historyRuns+10:
			e.Run = &runtime.RunRecord{ID: id, Plan: "fill", Status: runtime.RunRunning, StartedAt: time.Now()}
		default:
			e.Approval = &runtime.Approval{ID: "apr-" + id, Kind: "actuation", Status: runtime.ApprovalPending,
				RequestedAt: time.Now(), Expires: time.Now().Add(time.Hour)}
		}
		if i == historyRuns+19 {
			e.Durability = runtime.Sync
		}
		if _, err := j.Commit(ctx, e); err != nil {
			return "", err
		}
	}
	return path, j.Close()
})

// copyHistory copies the history journal to a new file of b's.
func copyHistory(b *testing.B) string {
	b.Helper()
	src, err := historyFile()
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), FileName)
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return dst
}

// BenchmarkStartWithHistory measures a start (open and load) over a
// journal of 100,000 finished runs with ten open and ten approvals
// pending. The baseline opens and closes the same file with bbolt alone.
// Only what is open may cost: the finished history must not.
func BenchmarkStartWithHistory(b *testing.B) {
	path := copyHistory(b)
	ctx := context.Background()
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
			if err != nil || len(s.Runs) != 10 || len(s.Approvals) != 10 {
				b.Fatalf("load: %d runs, %d approvals, %v", len(s.Runs), len(s.Approvals), err)
			}
			b.StopTimer() // a start is open and load; the close stops the check at open
			_ = j.Close()
			b.StartTimer()
		}
	})
}

// BenchmarkSyncAppendWhilePruning measures sync appends while retention
// prunes 100,000 finished runs and 10,000 attempts, against the same
// appends on the same journal with nothing to prune. Each op is one sync
// append; max-ms is the slowest, the one a prune could hold up.
func BenchmarkSyncAppendWhilePruning(b *testing.B) {
	ctx := context.Background()
	for _, prune := range []bool{false, true} {
		name := "alone"
		if prune {
			name = "while-pruning"
		}
		b.Run(name, func(b *testing.B) {
			keep := 30 * 24 * time.Hour // nothing to prune
			if prune {
				keep = time.Hour
			}
			j, err := Open(copyHistory(b), Options{KeepRecords: keep})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			<-j.Verified()
			done := make(chan struct{})
			if prune {
				go func() { defer close(done); j.pruneRecords(time.Now()) }()
			} else {
				close(done)
			}
			var took []time.Duration
			e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: benchBody}, Durability: runtime.Sync}
			for b.Loop() {
				t0 := time.Now()
				if _, err := j.Commit(ctx, e); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			b.StopTimer()
			<-done
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
		})
	}
}
