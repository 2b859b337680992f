package journal

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// crash closes j as a power cut would leave it: what the log holds is
// durable, the store is not brought up to it, no segment is removed.
func crash(t *testing.T, j *DB) {
	t.Helper()
	j.crashForTest = true
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// storeHead returns the newest event the store holds, reading the file
// with bbolt alone.
func storeHead(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var head uint64
	_ = db.View(func(tx *bolt.Tx) error {
		head, _, _ = newHistory(tx).last()
		return nil
	})
	return head
}

func segments(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(walDir(path), "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// A journal stopped with its store behind the log is brought up to date
// at open: every durable event and record is there, the log's segments
// are gone, and the chain verifies.
func TestTheStoreIsBroughtUpToTheLog(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 30)
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("k1", runtime.AttemptStaged) })
	crash(t, j)
	if h := storeHead(t, path); h >= 31 {
		t.Fatalf("the store holds up to %d before the open: the test shows nothing", h)
	}
	before := segments(t, path)
	if len(before) == 0 {
		t.Fatal("no log segment after a crash")
	}
	j = open(t, path, Options{})
	var h uint64
	_ = j.db.View(func(tx *bolt.Tx) error {
		h, _, _ = newHistory(tx).last()
		return nil
	})
	if h != 31 {
		t.Fatalf("after the open the store holds up to %d, want 31", h)
	}
	// What is left is the segment the open started, and nothing in it.
	if s := segments(t, path); len(s) != 1 || slices.Contains(before, s[0]) || j.wal.segs[0].last != 31 {
		t.Errorf("segments after the store holds them: %q (before the open: %q); want only a new one, empty", s, before)
	}
	snap, err := j.Load(t.Context())
	if err != nil || len(snap.Open) != 1 || snap.LastSeq != 31 {
		t.Fatalf("Load = %+v, %v; want the attempt the log held", snap, err)
	}
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Count != 31 {
		t.Fatalf("verify = %s, %v", rep, err)
	}
}

// A read-only open (verify, export while the gateway is down) sees what
// the log holds past the store, and verifies it.
func TestReadOnlyOpenReadsTheLog(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 12)
	crash(t, j)
	j = open(t, path, Options{ReadOnly: true})
	evs, err := j.Events(t.Context(), 0, 100)
	if err != nil || len(evs) != 12 || evs[11].Seq != 12 {
		t.Fatalf("Events = %d events, %v; want 12", len(evs), err)
	}
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Count != 12 || rep.Last != 12 {
		t.Fatalf("verify = %s, %v", rep, err)
	}
	if len(segments(t, path)) == 0 {
		t.Error("a read-only open removed the log")
	}
}

// A frame cut short by a crash (written in part, never synced, never
// acknowledged) is cut at open and the journal goes on from the event
// before it.
func TestATornTailIsCut(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 5)
	crash(t, j)
	segs := segments(t, path)
	last := segs[len(segs)-1]
	_, sc, err := openWAL(walDir(path), DefaultSegmentSize, false)
	if err != nil || len(sc.entries) != 5 {
		t.Fatalf("the log holds %d entries, %v", len(sc.entries), err)
	}
	end := sc.entries[len(sc.entries)-1].seg.end
	// Half a frame: a header that promises more than is there.
	f, err := os.OpenFile(last, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := []byte{0x53, 0x47, 0x46, 0x31, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 1, 1, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3}
	if _, err := f.WriteAt(half, end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j = open(t, path, Options{})
	<-j.Verified()
	if err := j.Err(); err != nil {
		t.Fatalf("Err after a torn tail = %v", err)
	}
	e := commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil)
	if e.Seq != 6 {
		t.Fatalf("the next event is %d, want 6", e.Seq)
	}
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Count != 6 {
		t.Fatalf("verify = %s, %v", rep, err)
	}
}

// Damage anywhere but the tail fails closed, naming the segment: a bad
// frame with frames after it, a missing segment, a truncated one, a log
// that does not continue the store.
func TestADamagedLogFailsClosed(t *testing.T) {
	// Segments of one page, so that a few events take several.
	opts := Options{SegmentSize: 4096}
	make := func(t *testing.T) string {
		path := tempPath(t)
		j := open(t, path, opts)
		for range 12 {
			// Random, so that it does not compress.
			var pad strings.Builder
			for range 30 {
				pad.WriteString(rand.Text())
			}
			commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{"pad":"`+pad.String()+`"}`), nil)
		}
		crash(t, j)
		if n := len(segments(t, path)); n < 3 {
			t.Fatalf("%d segments; the test needs at least 3", n)
		}
		return path
	}
	cases := []struct {
		name, want string
		damage     func(t *testing.T, path string, segs []string)
	}{
		{"a bad frame in the middle", "the log going on after it", func(t *testing.T, path string, segs []string) {
			flip(t, segs[len(segs)-1], segHeader+frameHead+5)
			// and a frame after it in the same segment: add one.
		}},
		{"a bad frame in an older segment", "the log going on after it", func(t *testing.T, path string, segs []string) {
			flip(t, segs[0], segHeader+frameHead+5)
		}},
		{"a segment deleted in the middle", "missing", func(t *testing.T, path string, segs []string) {
			if err := os.Remove(segs[1]); err != nil {
				t.Fatal(err)
			}
		}},
		{"the newest segment deleted", "missing", func(t *testing.T, path string, segs []string) {
			if err := os.Remove(segs[len(segs)-1]); err != nil {
				t.Fatal(err)
			}
		}},
		{"a segment truncated", "truncated", func(t *testing.T, path string, segs []string) {
			if err := os.Truncate(segs[len(segs)-1], 2000); err != nil {
				t.Fatal(err)
			}
		}},
		{"the oldest segment deleted", "missing", func(t *testing.T, path string, segs []string) {
			if err := os.Remove(segs[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"the store replaced by another journal's", "disagree", func(t *testing.T, path string, segs []string) {
			other := tempPath(t)
			o := open(t, other, Options{})
			fill(t, o, 3)
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(other)
			if err == nil {
				err = os.WriteFile(path, b, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := make(t)
			segs := segments(t, path)
			tc.damage(t, path, segs)
			_, err := Open(path, opts)
			var ce *CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v; want a corrupt journal, %q", err, tc.want)
			}
		})
	}
}

// flip changes one byte of a file.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A lone sync commit costs one fdatasync of the log and none of the
// store; async commits cost none until one comes.
func TestACommitIsOneFdatasync(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil) // the first segment is made
	s0 := j.Stats()
	for range 5 {
		commit(t, j, runtime.Async, ev(runtime.KindObserved, `{}`), nil)
	}
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), nil)
	s1 := j.Stats()
	if d := s1.LogSyncs - s0.LogSyncs; d != 1 {
		t.Errorf("five readings and a sync commit took %d fdatasyncs of the log, want 1", d)
	}
	if d := s1.StoreBatches - s0.StoreBatches; d != 0 {
		t.Errorf("the store was written %d times on the commit's path, want 0", d)
	}
	_ = context.Background()
}

// settled waits until the engine's start has journaled each device
// online (each a durable point of its own), so that what follows is
// counted alone.
func settled(t *testing.T, r *rig) {
	t.Helper()
	<-r.j.Verified()
	runtimetest.WaitFor(t, "every device online in the journal", func() bool {
		evs, err := r.j.Events(t.Context(), 0, 1000)
		n := 0
		for _, e := range evs {
			if e.Kind == runtime.KindDeviceOnline {
				n++
			}
		}
		return err == nil && n == len(greenhouse())
	})
}

// A lone governed write makes exactly its two durable points: the intent
// before the driver is called, the receipt (with the run's end) before
// the reply; the store is not written on its path. An approval asked,
// approved and acted on makes four.
func TestAGovernedWriteIsTwoFdatasyncs(t *testing.T) {
	r := startRig(t, t.TempDir(), rigOptions{rules: []governance.Rule{allowValve}})
	settled(t, r)
	do(t, r.e, "warm", "valve-1", "open", value.Bool(false)) // the log's first segment is made
	for i := range 5 {
		s0 := r.j.Stats()
		obs := do(t, r.e, fmt.Sprintf("w-%d", i), "valve-1", "open", value.Bool(i%2 == 0))
		s1 := r.j.Stats()
		if obs.Kind != runtime.Acted {
			t.Fatalf("write %d = %+v", i, obs)
		}
		if d := s1.LogSyncs - s0.LogSyncs; d != 2 {
			t.Errorf("write %d made %d fdatasyncs of the log, want 2", i, d)
		}
		if s1.StoreBatches != s0.StoreBatches {
			t.Errorf("write %d wrote the store on its path", i)
		}
	}
	// The run's end is in the log with the receipt: nothing is queued.
	r.j.mu.Lock()
	queued := len(r.j.queue)
	r.j.mu.Unlock()
	if queued != 0 {
		t.Errorf("%d events wait after the write's reply, want none (the run's end rides with the receipt)", queued)
	}

	a := startRig(t, t.TempDir(), rigOptions{mode: "supervised"})
	settled(t, a)
	commit(t, a.j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil) // the log's first segment is made
	s0 := a.j.Stats()
	obs := do(t, a.e, "ask", "valve-1", "open", value.Bool(true))
	if obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("the write in supervised mode = %+v, want an approval request", obs)
	}
	if _, err := a.e.Answer(t.Context(), obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.e.Wait(t.Context(), obs.Run); err != nil {
		t.Fatal(err)
	}
	if d := a.j.Stats().LogSyncs - s0.LogSyncs; d != 4 {
		t.Errorf("asked, approved and acted: %d fdatasyncs of the log, want 4", d)
	}
}

// A journal written by the build before the log (everything in the bbolt
// file, testdata/bbolt-only.db, written by commit 98aa26d) opens and goes
// on: its chain and records verify, a start loads what it holds, new
// events go to the log and then to the same file, and it verifies after.
func TestAJournalWrittenBeforeTheLogOpens(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "bbolt-only.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := tempPath(t)
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	j := open(t, path, Options{})
	<-j.Verified()
	if err := j.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}
	snap, err := j.Load(t.Context())
	if err != nil || len(snap.Approvals) != 1 || len(snap.Rules) != 1 || snap.Mode == nil || len(snap.Runs) != 1 || len(snap.Open) != 1 || len(snap.States) != 1 {
		t.Fatalf("Load = %+v, %v; want the approval, rule, mode, run, open attempt and state it holds", snap, err)
	}
	// The retention pass that starts once the chain is verified may delete
	// the file's expired session with an event of its own, before or after
	// this one: the new event follows the loaded ones either way.
	last := snap.LastSeq
	e := commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil)
	if e.Seq <= last || e.Seq > last+2 {
		t.Fatalf("the next event is %d, want it to follow %d", e.Seq, last)
	}
	if len(segments(t, path)) == 0 {
		t.Error("the new event is not in a log segment")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := verifyCopy(t, path); !rep.OK || rep.Last < e.Seq || rep.Last > last+2 {
		t.Fatalf("verify after = %s; want ok through %d", rep, e.Seq)
	}
}

// A segment set aside once the store held it is reused under a new index:
// what it held before is never read as log, however often the gateway
// stops cleanly or is killed in turn.
func TestAReusedSegmentHoldsNoOldFrames(t *testing.T) {
	path := tempPath(t)
	total := 0
	for round := range 6 {
		j := open(t, path, Options{})
		<-j.Verified()
		fill(t, j, 7+round)
		total += 7 + round
		if round%2 == 0 {
			if err := j.Close(); err != nil { // the store takes all; the segment is set aside
				t.Fatal(err)
			}
		} else {
			crash(t, j)
		}
	}
	j := open(t, path, Options{})
	<-j.Verified()
	if err := j.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Last != uint64(total) {
		t.Fatalf("verify = %s, %v; want ok through %d", rep, err, total)
	}
}

// A backup taken read-only of a journal whose log holds events the store
// does not (the gateway was killed) is refused, saying why, rather than a
// copy that leaves them out.
func TestABackupLeavesNothingOut(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 9)
	crash(t, j)
	j = open(t, path, Options{ReadOnly: true})
	var out strings.Builder
	if _, err := j.Backup(&out); err == nil || !strings.Contains(err.Error(), "log holds events the store does not") {
		t.Fatalf("Backup = %v; want refused", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{}) // a start brings the store up to the log
	<-j.Verified()
	backup := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Backup(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if rep := verifyCopy(t, backup); !rep.OK || rep.Last != 9 {
		t.Fatalf("the copy = %s; want all 9 events", rep)
	}
}

// A crash while a new segment is made (its zeros written, its header not
// yet, or a spare renamed and its header not yet rewritten) is a crash,
// not damage: the segment is set aside and every event the log held
// before it is there.
func TestACrashWhileASegmentStartsIsNoDamage(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string, segs []string) string
	}{
		{"zeros, no header", func(t *testing.T, path string, segs []string) string {
			return string(make([]byte, 64<<10))
		}},
		{"a spare's header", func(t *testing.T, path string, segs []string) string {
			b, err := os.ReadFile(segs[len(segs)-1])
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tempPath(t)
			j := open(t, path, Options{})
			fill(t, j, 6)
			crash(t, j)
			segs := segments(t, path)
			last := filepath.Base(segs[len(segs)-1])
			idx, err := strconv.ParseUint(strings.TrimSuffix(last, ".seg"), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			next := filepath.Join(walDir(path), segName(idx+1))
			if err := os.WriteFile(next, []byte(tc.make(t, path, segs)), 0o600); err != nil {
				t.Fatal(err)
			}
			j = open(t, path, Options{})
			<-j.Verified()
			if err := j.Err(); err != nil {
				t.Fatalf("Err = %v", err)
			}
			if e := commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil); e.Seq != 7 {
				t.Fatalf("the next event is %d, want 7", e.Seq)
			}
		})
	}
}

// A batch bigger than a frame holds is written as several frames, made
// durable together, and read back whole.
func TestABigBatchIsReadBackWhole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x.wal")
	w := &wal{dir: dir, segSize: 64 << 20}
	var ents []logEntry
	var prev hash
	for i := range 40 {
		ev := runtime.Event{Seq: uint64(i + 1), Kind: runtime.KindObserved, Body: []byte(`{"pad":"` + strings.Repeat(rand.Text(), 1<<13) + `"}`)}
		v, h := encodeEvent(&ev, nil, prev)
		ents = append(ents, logEntry{value: v})
		prev = h
	}
	if err := w.append(1, ents, true); err != nil {
		t.Fatal(err)
	}
	if w.syncs != 3 { // the segment's header and directory, then the batch
		t.Errorf("%d syncs, want 3", w.syncs)
	}
	w.close()
	_, sc, err := openWAL(dir, 64<<20, false)
	if err != nil || len(sc.entries) != 40 || sc.torn != nil {
		t.Fatalf("read back %d entries, torn %v, %v; want 40", len(sc.entries), sc.torn, err)
	}
}

// A log deleted while the gateway was down, after a stop that left events
// in it the store does not hold, fails the start closed, naming the
// segment the store expects: it does not lose them without a word. The
// same deletion after a clean stop loses nothing and is no damage.
func TestADeletedLogFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name   string
		delete func(t *testing.T, path string)
	}{
		{"the whole log", func(t *testing.T, path string) {
			if err := os.RemoveAll(walDir(path)); err != nil {
				t.Fatal(err)
			}
		}},
		{"its segments, not its spares", func(t *testing.T, path string) {
			for _, s := range segments(t, path) {
				if err := os.Remove(s); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := tempPath(t)
			j := open(t, path, Options{})
			fill(t, j, 20)
			crash(t, j)
			c.delete(t, path)
			_, err := Open(path, Options{})
			var ce *CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the log was deleted") || !strings.Contains(err.Error(), ".seg") {
				t.Fatalf("open after the log was deleted: %v; want a *CorruptError naming the segment", err)
			}
			if rep := verifyCopy(t, path); rep.OK {
				t.Errorf("verify after the log was deleted = %s, want not ok", rep)
			}
		})
	}
	t.Run("after a clean stop", func(t *testing.T) {
		path := tempPath(t)
		j := open(t, path, Options{})
		fill(t, j, 20)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(walDir(path)); err != nil {
			t.Fatal(err)
		}
		j = open(t, path, Options{})
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if rep := verifyCopy(t, path); !rep.OK || rep.Last != 20 {
			t.Errorf("verify = %s, want ok through 20", rep)
		}
	})
}

// A file whose first open stopped before its buckets were made opens
// read-only (verify, export, restore's lock) as it did before the log.
func TestAFileWithoutBucketsOpensReadOnly(t *testing.T) {
	path := tempPath(t)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	j, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a file without buckets: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// noise returns n characters that do not compress: the store keeps its
// events compressed, and a test that must fill the file fills it with this.
func noise(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(rand.Text())
	}
	return b.String()[:n]
}

// TestAPromptCommitIsWrittenWithoutTheFlushInterval: a prompt commit (a
// refusal, a login refused) returns at once, and is written and served
// without waiting for the flush interval, taking the readings queued
// before it along in the same fdatasync.
func TestAPromptCommitIsWrittenWithoutTheFlushInterval(t *testing.T) {
	j := open(t, tempPath(t), Options{FlushInterval: time.Hour})
	commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil)
	s0 := j.Stats()
	reading := commit(t, j, runtime.Async, ev(runtime.KindObserved, `{"value":1}`), nil)
	refused := commit(t, j, runtime.Prompt, ev(runtime.KindRefused, `{"why":"no"}`), nil)
	runtimetest.WaitFor(t, "the refusal served", func() bool {
		evs, err := j.Events(t.Context(), reading.Seq-1, 10)
		return err == nil && len(evs) == 2 && evs[1].Seq == refused.Seq
	})
	if d := j.Stats().LogSyncs - s0.LogSyncs; d != 1 {
		t.Fatalf("the reading and the refusal took %d fdatasyncs, want 1", d)
	}
	// An async commit alone still waits for the interval.
	late := commit(t, j, runtime.Async, ev(runtime.KindObserved, `{"value":2}`), nil)
	time.Sleep(200 * time.Millisecond)
	if evs, _ := j.Events(t.Context(), late.Seq-1, 10); len(evs) != 0 {
		t.Fatalf("a lone reading was served before the flush interval: %+v", evs)
	}
}

// TestPendingIsWhatIsQueuedAndNotWritten: Pending returns, in order, the
// events queued for the next write and none that is written, so that a
// surface can show a reading at once and its event once witnessed.
func TestPendingIsWhatIsQueuedAndNotWritten(t *testing.T) {
	j := open(t, tempPath(t), Options{FlushInterval: time.Hour})
	first := commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{}`), nil)
	if p := j.Pending(0, 10); len(p) != 0 {
		t.Fatalf("a written event is pending: %+v", p)
	}
	a := commit(t, j, runtime.Async, ev(runtime.KindObserved, `{"value":1}`), nil)
	b := commit(t, j, runtime.Async, ev(runtime.KindObserved, `{"value":2}`), nil)
	seqs := func(evs []runtime.Event) (out []uint64) {
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	for _, c := range []struct {
		since uint64
		limit int
		want  []uint64
	}{{0, 10, []uint64{a.Seq, b.Seq}}, {first.Seq, 10, []uint64{a.Seq, b.Seq}}, {a.Seq, 10, []uint64{b.Seq}}, {0, 1, []uint64{a.Seq}}, {b.Seq, 10, nil}, {b.Seq + 5, 10, nil}} {
		if got := seqs(j.Pending(c.since, c.limit)); !slices.Equal(got, c.want) {
			t.Errorf("Pending(%d, %d) = %v, want %v", c.since, c.limit, got, c.want)
		}
	}
	if evs, _ := j.Events(t.Context(), first.Seq, 10); len(evs) != 0 {
		t.Fatalf("queued events are served as written: %+v", evs)
	}
	if p := j.Pending(0, 10); p[0].Hash != a.Hash || p[1].Prev != a.Hash {
		t.Fatalf("the pending events are not the chained ones: %+v", p)
	}
	// A durable point writes them: none is pending, all are served.
	commit(t, j, runtime.Sync, ev(runtime.KindActed, `{}`), nil)
	if p := j.Pending(0, 10); len(p) != 0 {
		t.Fatalf("events written are still pending: %+v", p)
	}
	if evs, _ := j.Events(t.Context(), first.Seq, 10); len(evs) != 3 {
		t.Fatalf("served %d events after the durable point, want 3", len(evs))
	}
}

// frameOf returns a frame of the log holding ents from first, in
// segment segIndex, with the codec and payload given.
func frameOf(segIndex, first uint64, count int, codec byte, payload []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, frameMagic)
	f = binary.BigEndian.AppendUint32(f, uint32(len(payload)))
	f = binary.BigEndian.AppendUint64(f, first)
	f = binary.BigEndian.AppendUint32(f, uint32(count))
	f = append(f, codec, 0, 0, 0)
	f = binary.BigEndian.AppendUint32(f, frameCRC(segIndex, f, payload))
	return append(f, payload...)
}

// chained returns n chained log entries from seq 1, readings and, every
// third, an event with a record.
func chained(n int) []logEntry {
	var out []logEntry
	var prev hash
	for i := range n {
		ev := runtime.Event{Seq: uint64(i + 1), At: time.Unix(1_700_000_000, int64(i)*5e9), Mono: int64(i) * 5e9, BootID: "b", Kind: runtime.KindObserved,
			Device: "tank-1", Body: fmt.Appendf(nil, `{"value":%d}`, i)}
		var refs []ref
		var js [][]byte
		if i%3 == 2 {
			rec := []byte(`{"device":"tank-1"}`)
			refs = []ref{{bucket: "state", key: "reading/tank-1.level", op: opPut, digest: digestOf(rec)}}
			js = [][]byte{rec}
		}
		v, h := encodeEvent(&ev, refs, prev)
		out = append(out, logEntry{value: v, js: js})
		prev = h
	}
	return out
}

// TestTheLogReadsEveryCodec: frames as this build writes them (packed,
// compressed or not) and as earlier builds wrote them (entries whole, raw
// or DEFLATE) read back to the same entries; a packed frame whose events
// were altered, its CRC made again, does not.
func TestTheLogReadsEveryCodec(t *testing.T) {
	ents := chained(12)
	packed := packEntries(nil, ents)
	enc, _, err := coders()
	if err != nil {
		t.Fatal(err)
	}
	var deflated bytes.Buffer
	zw, _ := flate.NewWriter(&deflated, flate.BestSpeed)
	_, _ = zw.Write(encodeEntries(nil, ents))
	_ = zw.Close()
	for name, f := range map[string][]byte{
		"packed":        frameOf(1, 1, len(ents), codecPacked, packed),
		"packed zstd":   frameOf(1, 1, len(ents), codecPackedZstd, enc.EncodeAll(packed, nil)),
		"packed snappy": frameOf(1, 1, len(ents), codecPackedSnappy, s2.EncodeSnappy(nil, packed)),
		"raw":           frameOf(1, 1, len(ents), codecRaw, encodeEntries(nil, ents)),
		"deflate":       frameOf(1, 1, len(ents), codecFlate, deflated.Bytes()),
	} {
		n, got, seal, err := readFrame(f, 1, 1)
		if err != nil || seal || n != int64(len(f)) || len(got) != len(ents) {
			t.Fatalf("%s: read %d bytes, %d entries, seal %v, %v", name, n, len(got), seal, err)
		}
		for i := range ents {
			if !bytes.Equal(got[i].value, ents[i].value) || len(got[i].js) != len(ents[i].js) || (len(ents[i].js) > 0 && !bytes.Equal(got[i].js[0], ents[i].js[0])) {
				t.Fatalf("%s: entry %d read back otherwise", name, i)
			}
		}
	}
	// A Snappy frame that says it holds more than a reader decompresses.
	huge := binary.AppendUvarint(nil, maxBlockRaw+1)
	huge = append(huge, 0, 0, 0, 0)
	if _, _, _, err := readFrame(frameOf(1, 1, len(ents), codecPackedSnappy, huge), 1, 1); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a Snappy frame over the limit read as %v", err)
	}
	// An altered event: its canonical bytes changed inside the packed
	// payload, the frame's CRC made again to match.
	altered := bytes.Clone(packed)
	i := bytes.Index(altered, []byte(`{"value":7}`))
	altered[i+9] = '8'
	if _, _, _, err := readFrame(frameOf(1, 1, len(ents), codecPacked, altered), 1, 1); err == nil || !strings.Contains(err.Error(), "altered") {
		t.Fatalf("an altered packed frame read as %v", err)
	}
}

// FuzzReadFrame feeds bytes to the log's frame reader: it never panics,
// and the entries of a frame it accepts are consecutive chained events.
func FuzzReadFrame(f *testing.F) {
	ents := chained(5)
	packed := packEntries(nil, ents)
	enc, _, err := coders()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(frameOf(1, 1, 5, codecPacked, packed))
	f.Add(frameOf(1, 1, 5, codecPackedZstd, enc.EncodeAll(packed, nil)))
	f.Add(frameOf(1, 1, 5, codecPackedSnappy, s2.EncodeSnappy(nil, packed)))
	f.Add(frameOf(1, 1, 5, codecRaw, encodeEntries(nil, ents)))
	f.Add(frameOf(1, 1, 0, codecRaw, nil))
	f.Add(frameOf(1, 1, 5, codecPacked, packed[:40]))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, got, _, err := readFrame(b, 1, 1)
		if err != nil {
			return
		}
		for i, e := range got {
			if len(e.value) < 2*hashSize+1 {
				t.Fatalf("entry %d of an accepted frame is %d bytes", i, len(e.value))
			}
			d, err := decodeEvent(e.value)
			if b[20] >= codecPacked && (err != nil || d.ev.Seq != uint64(i+1) || chain(d.canonical, d.prev) != d.hash) {
				t.Fatalf("entry %d of an accepted packed frame: %+v, %v", i, d.ev, err)
			}
		}
	})
}

// Where the file system allows it, the log is written directly, in whole
// units: frames of every size, which begin and end inside units, read
// back whole after a clean stop and after a crash, and the frame that
// follows a reopen continues the unit the one before it ended in.
func TestTheLogIsWrittenDirectly(t *testing.T) {
	path := tempPath(t)
	total := 0
	for round := range 4 {
		j := open(t, path, Options{})
		<-j.Verified()
		probe := j.wal.segs[len(j.wal.segs)-1]
		if round == 0 {
			if a := directAlign(j.wal.f); a == 0 {
				t.Skip("this file system does not write directly: the page cache's path is the one every other test takes")
			}
		}
		// Ends of frames fall at many places within a unit.
		for n := range 9 + round {
			commit(t, j, runtime.Sync, ev(runtime.KindObserved, fmt.Sprintf(`{"i":%d,"pad":"%s"}`, n, strings.Repeat("x", 37*n+round))), nil)
			total++
		}
		if s := j.wal.segs[len(j.wal.segs)-1]; s != probe || s.align == 0 {
			t.Fatalf("round %d: the segment's writes are not direct (align %d)", round, s.align)
		}
		if round%2 == 0 {
			crash(t, j)
		} else if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	j := open(t, path, Options{})
	<-j.Verified()
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Last < uint64(total) {
		t.Fatalf("verify = %s, %v; want ok through at least %d", rep, err, total)
	}
}

// A direct write the file system refuses is made through the page cache,
// and so is every later write to that file: nothing is lost and the
// journal goes on.
func TestARefusedDirectWriteGoesThroughThePageCache(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	<-j.Verified()
	if directAlign(j.wal.f) == 0 {
		t.Skip("this file system does not write directly")
	}
	fill(t, j, 3)
	s := j.wal.segs[len(j.wal.segs)-1]
	// A unit of one byte: offsets and lengths the device cannot take
	// directly, so the next write is refused.
	s.align, j.wal.lastSeg = 1, nil
	fill(t, j, 3)
	if s.align != 0 {
		t.Fatalf("align = %d after a refused direct write; want 0 (the page cache)", s.align)
	}
	crash(t, j)
	j = open(t, path, Options{})
	<-j.Verified()
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Last < 6 {
		t.Fatalf("verify = %s, %v; want ok through at least 6", rep, err)
	}
}

// A frame a caller waits for is compressed with Snappy, fast; a frame of
// readings nobody waits for, written at the flush interval, with zstd.
// Both read back.
func TestAWaitedFrameIsCompressedFast(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{FlushInterval: 20 * time.Millisecond})
	<-j.Verified()
	body := func(i int) string {
		return fmt.Sprintf(`{"capability":"level","reading":{"value":%d.5,"quality":"good"}}`, i)
	}
	for i := range 30 {
		commit(t, j, runtime.Async, ev(runtime.KindObserved, body(i)), nil)
	}
	time.Sleep(200 * time.Millisecond) // the interval writes them, with no one waiting
	for i := range 30 {
		commit(t, j, runtime.Async, ev(runtime.KindObserved, body(i)), nil)
	}
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{"state":"executing"}`), nil)
	crash(t, j)
	data, err := os.ReadFile(segments(t, path)[0])
	if err != nil {
		t.Fatal(err)
	}
	var codecs []byte
	for off := segHeader; off+frameHead <= len(data) && binary.BigEndian.Uint32(data[off:]) == frameMagic; {
		codecs = append(codecs, data[off+20])
		off += frameHead + int(binary.BigEndian.Uint32(data[off+4:]))
	}
	if !bytes.Contains(codecs, []byte{codecPackedZstd}) || codecs[len(codecs)-1] != codecPackedSnappy {
		t.Fatalf("codecs of the frames %v: want readings flushed alone in zstd (%d), the durable point last in Snappy (%d)", codecs, codecPackedZstd, codecPackedSnappy)
	}
	j = open(t, path, Options{})
	<-j.Verified()
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Last < 61 {
		t.Fatalf("verify = %s, %v; want ok through at least 61", rep, err)
	}
}

// What the log holds reaches the store within the store's interval, with
// nothing else happening: no bound on events or bytes is needed to write
// it, nor a stop.
func TestTheStoreIsWrittenAtItsInterval(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{StoreInterval: 50 * time.Millisecond})
	<-j.Verified()
	time.Sleep(100 * time.Millisecond) // the start's own events stored, the writer idle
	before := j.Stats().StoreBatches
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{"state":"executing"}`), nil)
	deadline := time.Now().Add(5 * time.Second)
	for j.Stats().StoreBatches == before {
		if time.Now().After(deadline) {
			t.Fatalf("the store was not written within 5s of a durable event, its interval 50ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	crash(t, j)
	if head := storeHead(t, path); head == 0 {
		t.Fatal("the store holds nothing after its batch")
	}
}
