package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/internal/cardtest"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// What the journal costs an SD card, counted. The journal's own counters
// give the fdatasyncs of the log and the store's transactions (two
// fdatasyncs each: bbolt syncs its pages, then its meta page). Where this
// process may mount a file system, the journal lives on ext4 (noatime, as
// Raspberry Pi OS mounts its root) on a loop device, and the device's own
// counters give every byte and cache flush the journal caused, ext4's
// journal included: what reaches a card.

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
	devs := runtimetest.Greenhouse("gh", "tank-1", "flow-1", "air-1", "valve-1", "heater-1")
	g, err := sim.New(sim.Options{Devices: devs})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	reg := devices.NewRegistry()
	_ = reg.Add("sim", g)
	j.mu.Lock()
	since := j.committed // the start's events follow
	j.mu.Unlock()
	readBack := &runtime.Confirm{ReadBack: true, Within: time.Second}
	e, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: j, Rules: rules, Mode: mode,
		Policies: map[string]runtime.CapPolicy{"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack}}})
	if err != nil {
		b.Fatal(err)
	}
	<-j.Verified()
	// The first step journals each device online, a durable point each:
	// not counted against what follows.
	if _, err := e.Read(context.Background(), "bench", "tank-1", "level"); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		evs, err := j.Events(context.Background(), since, 1000)
		n := 0
		for _, e := range evs {
			if e.Kind == runtime.KindDeviceOnline {
				n++
			}
		}
		if err == nil && n == len(devs) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d devices online in the journal after 10s (%d events since %d, %v)", n, len(devs), len(evs), since, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// age fills a journal in dir to at least n events as a working gateway
// leaves it after weeks: governed writes, each with its run, attempt and
// receipt records, about six events each (the journal the wear was first
// measured on held 35,552 events of 5,884 writes).
func age(b *testing.B, dir string, n int) {
	b.Helper()
	w := startWear(b, dir, Options{}, allowAll, "")
	ctx := context.Background()
	for i := 0; ; i++ {
		w.j.mu.Lock()
		done := w.j.committed >= uint64(n)
		w.j.mu.Unlock()
		if done {
			break
		}
		obs, err := w.e.Do(ctx, runtime.Command{Principal: "mqtt:bench", Origin: "mqtt", RequestID: fmt.Sprintf("age-%d", i),
			Device: "valve-1", Capability: "open", Value: value.Bool(i%2 == 0)})
		if err != nil || obs.Kind != runtime.Acted {
			b.Fatalf("ageing write %d: %+v %v", i, obs, err)
		}
		if i%1000 == 999 { // as the store's interval would
			if err := w.j.syncStore(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	w.close(b)
}

var allowAll = []governance.Rule{{ID: "bench", Principal: "*", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}}

// BenchmarkWear counts what the journal writes per operation. Each case
// reports the log's fdatasyncs per operation (the durable points), and
// where a loop device could be made, the bytes and cache flushes the card
// would see, the store's share included.
func BenchmarkWear(b *testing.B) {
	ctx := context.Background()
	// A lone governed write on a journal of 36,000 events, alone in its
	// five seconds as one write a minute is: ext4 commits its own journal
	// every 5 s, and a write that shares the commit with others (writes
	// back to back) would be charged a share of it, not the whole. One op
	// is a write and the 6 s after it. The store's share is that of one
	// batch written every 30th write, as at one write a minute and the
	// default store interval of 30 minutes: 30 writes then the store.
	b.Run("lone-write", func(b *testing.B) {
		fs := cardtest.Mount(b)
		age(b, fs.Dir, 36_000)
		w := startWear(b, fs.Dir, Options{}, allowAll, "")
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
		time.Sleep(6 * time.Second) // the start's own writes committed
		d0, s0 := fs.Stat(b), w.j.Stats()
		n = 0
		for b.Loop() {
			write()
			time.Sleep(6 * time.Second)
		}
		lone := n
		s1 := w.j.Stats()
		report(b, fs, lone, "write", s0, s1, d0)
		// The store's share: 30 writes, then their batch.
		for range 30 {
			write()
		}
		before := fs.Stat(b)
		if err := w.j.syncStore(ctx); err != nil {
			b.Fatal(err)
		}
		store := fs.Stat(b).Sub(before)
		if fs.Counted() {
			b.ReportMetric(float64(store.Bytes)/30, "store-device-B/write")
		}
	})
	// An approval asked, approved, and its act.
	b.Run("approval", func(b *testing.B) {
		fs := cardtest.Mount(b)
		w := startWear(b, fs.Dir, Options{}, nil, "supervised")
		defer w.close(b)
		d0, s0 := fs.Stat(b), w.j.Stats()
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
	// One sensor polled every 250 ms for 10 s, with nothing else going on,
	// at the shortest flush interval an operator would choose (Home
	// Assistant's, 5 s): the default (30 s) makes a sixth of its
	// fdatasyncs, and would not flush once in these 10 s.
	b.Run("poll-250ms", func(b *testing.B) {
		fs := cardtest.Mount(b)
		w := startWear(b, fs.Dir, Options{FlushInterval: 5 * time.Second}, nil, "")
		defer w.close(b)
		d0, s0 := fs.Stat(b), w.j.Stats()
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
func report(b *testing.B, fs *cardtest.FS, n int, unit string, s0, s1 Stats, d0 cardtest.Stat) {
	b.Helper()
	d := fs.Stat(b).Sub(d0)
	b.ReportMetric(float64(s1.LogSyncs-s0.LogSyncs)/float64(n), "log-fdatasync/"+unit)
	b.ReportMetric(float64(2*(s1.StoreBatches-s0.StoreBatches))/float64(n), "store-fdatasync/"+unit)
	b.ReportMetric(float64(s1.LogBytes-s0.LogBytes)/float64(n), "log-B/"+unit)
	if fs.Counted() {
		b.ReportMetric(float64(d.Bytes)/float64(n), "device-B/"+unit)
		b.ReportMetric(float64(d.Flushes)/float64(n), "device-flush/"+unit)
	} else {
		b.Log(fs.Why)
	}
}

// BenchmarkWearSite runs the reference site for a minute of real time
// (the card's own clocks, ext4's journal commits among them, do not run
// faster): ten sensors polled every 5 s, their polls spread over the
// interval, and one governed write a minute. The store is written once at
// the end, as its interval would: a day is 1,440 such minutes, an upper
// bound for the store, whose fixed cost a longer interval shares; the
// log's part and the store's are reported apart. One op is one minute.
func BenchmarkWearSite(b *testing.B) {
	// The default first, then Home Assistant's recorder interval.
	for _, flush := range []time.Duration{30 * time.Second, 5 * time.Second} {
		b.Run("flush="+flush.String(), func(b *testing.B) { wearSite(b, flush) })
	}
}

func wearSite(b *testing.B, flush time.Duration) {
	ctx := context.Background()
	fs := cardtest.Mount(b)
	age(b, fs.Dir, 36_000)
	// The log on a card of its own, so that its bytes and the store's are
	// counted apart.
	logDir := walDir(filepath.Join(fs.Dir, FileName))
	if err := os.RemoveAll(logDir); err != nil { // stopped cleanly: the store holds it all
		b.Fatal(err)
	}
	logFS := cardtest.MountAt(b, logDir)
	w := startWear(b, fs.Dir, Options{FlushInterval: flush}, allowAll, "")
	defer w.close(b)
	if err := w.j.syncStore(ctx); err != nil {
		b.Fatal(err)
	}
	sensors := [][2]string{{"tank-1", "level"}, {"flow-1", "rate"}, {"air-1", "temperature"}}
	write := func(n int) {
		obs, err := w.e.Do(ctx, runtime.Command{Principal: "mqtt:bench", Origin: "mqtt", RequestID: fmt.Sprintf("site-%d", n),
			Device: "valve-1", Capability: "open", Value: value.Bool(n%2 == 1)})
		if err != nil || obs.Kind != runtime.Acted {
			b.Fatalf("the minute's write: %+v %v", obs, err)
		}
	}
	d0, s0 := logFS.Stat(b), w.j.Stats()
	minutes := 0
	for b.Loop() {
		minutes++
		poll := time.NewTicker(500 * time.Millisecond) // ten sensors, one every 0.5 s: each every 5 s
		half := time.NewTimer(30 * time.Second)
		end := time.NewTimer(time.Minute)
		for i, done := 0, false; !done; {
			select {
			case <-poll.C:
				sn := sensors[i%len(sensors)]
				i++
				if _, err := w.e.Read(ctx, "bench", sn[0], sn[1]); err != nil {
					b.Fatal(err)
				}
			case <-half.C:
				write(minutes)
			case <-end.C:
				done = true
			}
		}
		poll.Stop()
	}
	s1 := w.j.Stats()
	dl := logFS.Stat(b).Sub(d0)
	// The store's share: what it writes for half an hour of the site's
	// events (its default StoreInterval, unless StoreEvents come first),
	// made as fast as the simulated devices allow. Only the store's card
	// is counted: its batches as they come, and the last one.
	ds0 := fs.Stat(b)
	events0 := w.j.Stats()
	for i := range 30 * 120 {
		sn := sensors[i%len(sensors)]
		if _, err := w.e.Read(ctx, "bench", sn[0], sn[1]); err != nil {
			b.Fatal(err)
		}
		if i%120 == 119 {
			write(minutes + 1 + i/120)
		}
	}
	if err := w.j.syncStore(ctx); err != nil {
		b.Fatal(err)
	}
	ds := fs.Stat(b).Sub(ds0)
	events1 := w.j.Stats()
	perDay := 1440 / float64(minutes)
	b.ReportMetric(float64(s1.LogSyncs-s0.LogSyncs)*perDay, "log-fdatasync/day")
	b.ReportMetric(float64(events1.StoreBatches-events0.StoreBatches)*48, "store-batch/day")
	if fs.Counted() && logFS.Counted() {
		b.ReportMetric(float64(dl.Bytes)*perDay/1e6+float64(ds.Bytes)*48/1e6, "device-MB/day")
		b.ReportMetric(float64(dl.Bytes)*perDay/1e6, "log-MB/day")
		b.ReportMetric(float64(ds.Bytes)*48/1e6, "store-MB/day")
		b.ReportMetric(float64(dl.Flushes)*perDay+float64(ds.Flushes)*48, "device-flush/day")
	} else {
		b.Log(fs.Why)
	}
}
