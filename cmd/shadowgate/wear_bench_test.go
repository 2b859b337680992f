package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/internal/cardtest"
)

// BenchmarkDemoWear counts what an idle demo gateway writes to a card in
// half an hour of real time, its state directory on ext4 on a loop device
// (see internal/cardtest), once it has started and settled, and its clean
// stop, and gives it per day: device-MB/day with the stop, running-MB/day
// without it. One op is half an hour, the store's interval: the stop
// writes the store once, as the interval does, so that a day is 48 such
// runs and their stops. A shorter run would count the store's fixed cost
// more often than the interval pays it.
func BenchmarkDemoWear(b *testing.B) {
	bin := shadowgateBinary(b)
	fs := cardtest.Mount(b)
	if !fs.Counted() {
		b.Skip(fs.Why)
	}
	demo, err := os.ReadFile(demoConfig(b, 0))
	if err != nil {
		b.Fatal(err)
	}
	const empty = `state_dir: ""`
	if !bytes.Contains(demo, []byte(empty)) {
		b.Fatalf("examples/demo.yaml no longer has %q", empty)
	}
	demo = bytes.Replace(demo, []byte(empty), []byte("state_dir: "+filepath.Join(fs.Dir, "state")), 1)
	config := filepath.Join(b.TempDir(), "demo.yaml")
	if err := os.WriteFile(config, demo, 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startProc(ctx, b, bin, config)
	if !p.awaitLine(ctx, `msg="gateway ready"`) {
		b.Fatalf("the demo did not start:\n%s", strings.Join(p.lines(), "\n"))
	}
	time.Sleep(10 * time.Second) // the start's own writes
	d0 := fs.Stat(b)
	minutes := 0
	for b.Loop() {
		minutes += 30
		time.Sleep(30 * time.Minute)
	}
	// A clean stop writes the store, as its interval would have: its
	// bytes count, once a half hour.
	running := fs.Stat(b).Sub(d0)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(ctx)
	d := fs.Stat(b).Sub(d0)
	perDay := 1440 / float64(minutes)
	b.ReportMetric(float64(d.Bytes)*perDay/1e6, "device-MB/day")
	b.ReportMetric(float64(running.Bytes)*perDay/1e6, "running-MB/day")
	b.ReportMetric(float64(d.Flushes)*perDay, "device-flush/day")
}
