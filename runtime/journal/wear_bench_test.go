package journal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// What the journal costs an SD card, counted. The journal's own counters
// give the fdatasyncs of the log and the store's transactions (two
// fdatasyncs each: bbolt syncs its pages, then its meta page). Where this
// process may mount a file system, the journal lives on ext4 (noatime, as
// Raspberry Pi OS mounts its root) on a loop device, and the device's own
// counters give every byte and cache flush the journal caused, ext4's
// journal included: what reaches a card.

// loopFS is an ext4 file system on a loop device, or a plain directory
// where one cannot be made.
type loopFS struct {
	dir  string
	dev  string // "loop0"; empty for a plain directory
	note string // why it is a plain directory
}

// newLoopFS makes a 512 MiB ext4 on a loop device and mounts it, unless
// the process is not root or lacks the tools.
func newLoopFS(b *testing.B) *loopFS {
	b.Helper()
	tmp := b.TempDir()
	if os.Geteuid() != 0 {
		return &loopFS{dir: tmp, note: "not root: no device counts"}
	}
	img, mnt := filepath.Join(tmp, "card.img"), filepath.Join(tmp, "card")
	run := func(name string, args ...string) (string, error) {
		out, err := exec.Command(name, args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		b.Fatal(err)
	}
	if f, err := os.Create(img); err != nil || f.Truncate(512<<20) != nil || f.Close() != nil {
		b.Fatalf("making the image: %v", err)
	}
	if out, err := run("mkfs.ext4", "-q", "-F", img); err != nil {
		return &loopFS{dir: tmp, note: "no mkfs.ext4: " + out}
	}
	dev, err := run("losetup", "-f", "--show", img)
	if err != nil {
		return &loopFS{dir: tmp, note: "no loop device: " + dev}
	}
	if out, err := run("mount", "-o", "noatime", dev, mnt); err != nil {
		_, _ = run("losetup", "-d", dev)
		return &loopFS{dir: tmp, note: "cannot mount: " + out}
	}
	b.Cleanup(func() {
		_, _ = run("umount", mnt)
		_, _ = run("losetup", "-d", dev)
	})
	return &loopFS{dir: mnt, dev: filepath.Base(dev)}
}

// deviceStat is what a block device has written: bytes and cache flushes.
type deviceStat struct{ bytes, flushes int64 }

// stat reads the device's counters, after writing back what the page
// cache holds of this file system, so that the counts are whole.
func (l *loopFS) stat(b *testing.B) deviceStat {
	if l.dev == "" {
		return deviceStat{}
	}
	_ = exec.Command("sync", "-f", l.dir).Run()
	raw, err := os.ReadFile("/sys/block/" + l.dev + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	num := func(i int) int64 {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return n
	}
	// Field 7 is sectors written; field 16, where the kernel has it,
	// flush requests.
	return deviceStat{bytes: num(6) * 512, flushes: num(15)}
}

// wearRig is an engine on a journal on l.
type wearRig struct {
	j *DB
	e *runtime.Engine
}

func startWear(b *testing.B, dir string, opts Options, rules []governance.Rule, mode string) *wearRig {
	b.Helper()
	j, err := Open(filepath.Join(dir, FileName), opts)
	if err != nil {
		b.Fatal(err)
	}
	g, err := sim.New(sim.Options{Devices: greenhouse()})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	reg := devices.NewRegistry()
	_ = reg.Add("sim", g)
	readBack := &runtime.Confirm{ReadBack: true, Within: time.Second}
	e, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: j, Rules: rules, Mode: mode,
		Policies: map[string]runtime.CapPolicy{"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack}}})
	if err != nil {
		b.Fatal(err)
	}
	<-j.Verified()
	// The log's first segment is made, as it is once per 4 MiB of log:
	// not counted against what follows.
	if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved}, Durability: runtime.Sync}); err != nil {
		b.Fatal(err)
	}
	return &wearRig{j: j, e: e}
}

func (w *wearRig) close(b *testing.B) {
	_ = w.e.Close()
	if err := w.j.Close(); err != nil {
		b.Fatal(err)
	}
}

// age fills a journal in dir with n events of a working gateway's mix, as
// a journal is after weeks: readings, and a governed write's events.
func age(b *testing.B, dir string, n int) {
	b.Helper()
	j, err := Open(filepath.Join(dir, FileName), Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1",
			Body: fmt.Appendf(nil, `{"capability":"level","reading":{"value":%d.25,"at":"2026-12-01T10:00:00Z","quality":"good"}}`, i%100)}}
		if i%6 == 0 {
			e.Event = runtime.Event{Kind: runtime.KindInvoked, Device: "valve-1", Run: fmt.Sprintf("run-%016x", i), Body: benchBody}
		}
		if i == n-1 {
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

var allowAll = []governance.Rule{{ID: "bench", Principal: "*", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}}

// BenchmarkWear counts what the journal writes per operation. Each case
// reports the log's fdatasyncs per operation (the durable points), and
// where a loop device could be made, the bytes and cache flushes the card
// would see, the store's share included.
func BenchmarkWear(b *testing.B) {
	ctx := context.Background()
	// A lone governed write on a journal of 36,000 events: the store is
	// written every fifth write, as at one write a minute and the default
	// store interval of five minutes.
	b.Run("lone-write", func(b *testing.B) {
		fs := newLoopFS(b)
		age(b, fs.dir, 36_000)
		w := startWear(b, fs.dir, Options{}, allowAll, "")
		defer w.close(b)
		n := 0
		write := func() {
			n++
			obs, err := w.e.Do(ctx, runtime.Command{Principal: "mqtt:bench", Origin: "mqtt", RequestID: fmt.Sprintf("w-%d", n),
				Device: "valve-1", Capability: "open", Value: value.Bool(n%2 == 1)})
			if err != nil || obs.Kind != runtime.Acted {
				b.Fatalf("write %d: %+v %v", n, obs, err)
			}
		}
		if err := w.j.syncStore(ctx); err != nil {
			b.Fatal(err)
		}
		d0, s0 := fs.stat(b), w.j.Stats()
		var store deviceStat
		var forced int64
		n = 0
		for b.Loop() {
			write()
			if n%5 == 0 {
				// The store's write, as its interval would make it; the
				// log's writes it forces (what waits in the queue) are not
				// the write's.
				b.StopTimer()
				before, ls := fs.stat(b), w.j.Stats().LogSyncs
				if err := w.j.syncStore(ctx); err != nil {
					b.Fatal(err)
				}
				after := fs.stat(b)
				store.bytes += after.bytes - before.bytes
				store.flushes += after.flushes - before.flushes
				forced += w.j.Stats().LogSyncs - ls
				b.StartTimer()
			}
		}
		s1 := w.j.Stats()
		s1.LogSyncs -= forced
		report(b, fs, n, "write", s0, s1, d0)
		if fs.dev != "" {
			b.ReportMetric(float64(store.bytes)/float64(n), "store-device-B/write")
		}
	})
	// An approval asked, approved, and its act.
	b.Run("approval", func(b *testing.B) {
		fs := newLoopFS(b)
		w := startWear(b, fs.dir, Options{}, nil, "supervised")
		defer w.close(b)
		d0, s0 := fs.stat(b), w.j.Stats()
		n := 0
		for b.Loop() {
			n++
			obs, err := w.e.Do(ctx, runtime.Command{Principal: "mqtt:bench", Origin: "mqtt", RequestID: fmt.Sprintf("a-%d", n),
				Device: "valve-1", Capability: "open", Value: value.Bool(n%2 == 1)})
			if err != nil || obs.Kind != runtime.ApprovalRequest {
				b.Fatalf("request %d: %+v %v", n, obs, err)
			}
			if _, err := w.e.Answer(ctx, obs.Approval.ID, runtime.Answer{By: "console:ann", Decision: runtime.Approve}); err != nil {
				b.Fatal(err)
			}
			if _, err := w.e.Wait(ctx, obs.Run); err != nil {
				b.Fatal(err)
			}
		}
		report(b, fs, n, "flow", s0, w.j.Stats(), d0)
	})
	// One sensor polled every 250 ms for 10 s, with nothing else going on.
	b.Run("poll-250ms", func(b *testing.B) {
		fs := newLoopFS(b)
		w := startWear(b, fs.dir, Options{}, nil, "")
		defer w.close(b)
		d0, s0 := fs.stat(b), w.j.Stats()
		n := 0
		for b.Loop() {
			t := time.NewTicker(250 * time.Millisecond)
			for range 40 {
				<-t.C
				if _, err := w.e.Read(ctx, "bench", "tank-1", "level"); err != nil {
					b.Fatal(err)
				}
				n++
			}
			t.Stop()
		}
		report(b, fs, n, "poll", s0, w.j.Stats(), d0)
	})
}

// report gives the counts per operation: the log's fdatasyncs, the
// store's, and the card's bytes and flushes.
func report(b *testing.B, fs *loopFS, n int, unit string, s0, s1 Stats, d0 deviceStat) {
	b.Helper()
	d1 := fs.stat(b)
	b.ReportMetric(float64(s1.LogSyncs-s0.LogSyncs)/float64(n), "log-fdatasync/"+unit)
	b.ReportMetric(float64(2*(s1.StoreBatches-s0.StoreBatches))/float64(n), "store-fdatasync/"+unit)
	b.ReportMetric(float64(s1.LogBytes-s0.LogBytes)/float64(n), "log-B/"+unit)
	if fs.dev != "" {
		b.ReportMetric(float64(d1.bytes-d0.bytes)/float64(n), "device-B/"+unit)
		b.ReportMetric(float64(d1.flushes-d0.flushes)/float64(n), "device-flush/"+unit)
	} else {
		b.Log(fs.note)
	}
}
