package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// BenchmarkColdStart measures a start of the binary, from exec to READY=1
// on the notify socket systemd would give it: with an empty state
// directory, over a journal of 100,000 events, and over one of 100,000
// finished runs. The baseline is the same binary printing its version,
// which is all of a process start but the gateway's own.
func BenchmarkColdStart(b *testing.B) {
	bin := shadowgateBinary(b)
	b.Run("version", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
				b.Fatalf("shadowgate version: %v\n%s", err, out)
			}
		}
	})
	for _, c := range []struct {
		name string
		fill func(i int) runtime.Entry
	}{
		{"empty", nil},
		{"events=100k", func(int) runtime.Entry {
			return runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "valve-1",
				Body: []byte(`{"device":"valve-1","capability":"open","value":false,"quality":"good","principal":"poll"}`)}}
		}},
		{"runs=100k", func(i int) runtime.Entry {
			id := fmt.Sprintf("run-%06d", i)
			at := time.Now().Add(-time.Hour)
			return runtime.Entry{Event: runtime.Event{Kind: runtime.KindEnded, Run: id, Body: []byte(`{"status":"ended"}`)},
				Run: &runtime.RunRecord{ID: id, Plan: runtime.CommandPlan, RequestID: "mqtt:reader/" + id, Status: runtime.RunEnded, StartedAt: at, EndedAt: at}}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			if c.fill != nil {
				fillJournal(b, filepath.Join(dir, "state"), c.fill)
			}
			config := filepath.Join(dir, "start.yaml")
			if err := os.WriteFile(config, []byte(matrixConfig(dir)), 0o600); err != nil {
				b.Fatal(err)
			}
			sock := listenNotify(b)
			var ready time.Duration
			for b.Loop() {
				cmd := exec.Command(bin, "serve", "--config", config, "--log-level", "warn")
				t0 := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				m := sock.await(b, "READY=1", 30*time.Second)
				ready += m.at.Sub(t0)
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
			b.ReportMetric(float64(ready.Microseconds())/1000/float64(b.N), "ready-ms")
		})
	}
}

// fillJournal writes 100,000 entries made by entry into a journal in dir.
func fillJournal(b *testing.B, dir string, entry func(i int) runtime.Entry) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	j, err := journal.Open(journal.Path(dir), journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 100_000 {
		e := entry(i)
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
}
