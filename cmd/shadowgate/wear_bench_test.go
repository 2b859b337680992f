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
// (see internal/cardtest), once it has started and settled, and gives it
// per day (device-MB/day). One op is half an hour, in which the store is
// written once, as its interval (30 minutes) does: the demo runs with a
// store interval of 29 minutes, so that its one batch falls inside the
// half hour counted, and a day is 48 such half hours. The clean stop that
// ends it, which a day does not have (it drives every actuator to safe
// and writes the store), is reported apart, in stop-kB.
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
	const journal = "journal:\n"
	if !bytes.Contains(demo, []byte(journal)) {
		b.Fatalf("examples/demo.yaml no longer has %q", journal)
	}
	demo = bytes.Replace(demo, []byte(journal), []byte(journal+"  store_interval: 29m\n"), 1)
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
	running := fs.Stat(b).Sub(d0)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(ctx)
	stop := fs.Stat(b).Sub(d0).Sub(running)
	perDay := 1440 / float64(minutes)
	b.ReportMetric(float64(running.Bytes)*perDay/1e6, "device-MB/day")
	b.ReportMetric(float64(running.Flushes)*perDay, "device-flush/day")
	b.ReportMetric(float64(stop.Bytes)/1e3, "stop-kB")
	if batches := strings.Count(strings.Join(p.lines(), "\n"), `msg="journal store written"`); batches < minutes/30+1 {
		// Its half hours' batches, and the stop's.
		b.Fatalf("the store was written %d times in %d minutes and the stop; want one a half hour, and the stop's", batches, minutes)
	}
}
