package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
	"github.com/shadowgate/shadowgate/value"
)

func open(t testing.TB, path string, opts Options) *DB {
	t.Helper()
	j, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), FileName) }

func ev(kind runtime.Kind, body string) runtime.Event {
	return runtime.Event{Kind: kind, Device: "valve-1", Body: []byte(body), At: time.Unix(1_700_000_000, 0)}
}

func commit(t testing.TB, j *DB, d runtime.Durability, e runtime.Event, with func(*runtime.Entry)) runtime.Event {
	t.Helper()
	ent := runtime.Entry{Event: e, Durability: d}
	if with != nil {
		with(&ent)
	}
	out, err := j.Commit(context.Background(), ent)
	if err != nil {
		t.Fatalf("Commit %s: %v", e.Kind, err)
	}
	return out
}

// settle writes every queued event to the log and the store, and then
// the prune that writing may have found due, as time would.
func settle(t testing.TB, j *DB) {
	t.Helper()
	for range 2 {
		if err := j.syncStore(context.Background()); err != nil {
			t.Fatalf("writing the store: %v", err)
		}
	}
}

func fill(t testing.TB, j *DB, n int) {
	t.Helper()
	for i := range n {
		d := runtime.Async
		if i == n-1 {
			d = runtime.Sync // the last one waits for every one before it
		}
		commit(t, j, d, ev(runtime.KindObserved, fmt.Sprintf(`{"i":%d}`, i)), nil)
	}
}

func TestChainSurvivesReopen(t *testing.T) {
	path := tempPath(t)
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, j, 5)
	last := commit(t, j, runtime.Sync, ev(runtime.KindActed, `{"x":"<b>&"}`), nil)
	if last.Seq != 6 || last.Hash == "" || last.BootID == "" {
		t.Fatalf("last event = %+v", last)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{})
	next := commit(t, j, runtime.Sync, ev(runtime.KindStarted, `{}`), nil)
	if next.Seq != 7 || next.Prev != last.Hash {
		t.Fatalf("after reopen: seq %d prev %s, want 7 and %s", next.Seq, next.Prev, last.Hash)
	}
	if next.BootID == last.BootID {
		t.Fatal("a new opening kept the old boot id")
	}
	evs, err := j.Events(context.Background(), 0, 100)
	if err != nil || len(evs) != 7 {
		t.Fatalf("Events = %d, %v; want 7", len(evs), err)
	}
	// The body comes back byte for byte, unescaped.
	if string(evs[5].Body) != `{"x":"<b>&"}` || evs[5].Hash != last.Hash {
		t.Fatalf("event 6 came back as %+v", evs[5])
	}
	rep, err := j.Verify(context.Background())
	if err != nil || !rep.OK || rep.Count != 7 || rep.First != 1 || rep.Last != 7 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func attempt(key string, s runtime.AttemptState) *runtime.Attempt {
	return &runtime.Attempt{Key: key, ID: "act-" + key, Device: "valve-1", Capability: "open", Value: value.Bool(true),
		Principal: "mqtt:alice", State: s, Updated: time.Now()}
}

func TestAttemptTransitions(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	step := func(key string, s runtime.AttemptState) error {
		_, err := j.Commit(context.Background(), runtime.Entry{Event: ev(runtime.KindInvoked, `{}`), Durability: runtime.Sync, Attempt: attempt(key, s)})
		return err
	}
	for _, s := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting, runtime.AttemptReceipt} {
		if err := step("a", s); err != nil {
			t.Fatalf("a -> %s: %v", s, err)
		}
	}
	illegal := []struct {
		key  string
		path []runtime.AttemptState
	}{
		{"b", []runtime.AttemptState{runtime.AttemptAuthorized}},                                                                          // must start staged
		{"c", []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptExecuting}},                                                    // skips authorized
		{"a", []runtime.AttemptState{runtime.AttemptExecuting}},                                                                           // a receipt is terminal
		{"d", []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptStaged}},                                                       // no repeat
		{"e", []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptReconciled}},                                                   // only unknown reconciles
		{"f", []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting, runtime.AttemptRefused}}, // too late to refuse
	}
	for _, tc := range illegal {
		var err error
		for _, s := range tc.path {
			if err = step(tc.key, s); err != nil {
				break
			}
		}
		if !errors.Is(err, runtime.ErrIllegalTransition) || !strings.Contains(err.Error(), "attempt "+tc.key) {
			t.Errorf("%s %v: err = %v, want an illegal transition naming the key", tc.key, tc.path, err)
		}
	}
	for _, s := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptRefused} {
		if err := step("g", s); err != nil {
			t.Fatalf("g -> %s: %v", s, err)
		}
	}
	for _, s := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting} {
		if err := step("h", s); err != nil {
			t.Fatalf("h -> %s: %v", s, err)
		}
	}
	// What was refused stored nothing: the chain has one event per legal step.
	rep, _ := j.Verify(context.Background())
	if !rep.OK || rep.Count != 4+1+1+1+3+2+3 {
		t.Fatalf("Verify = %+v", rep)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// After a restart the stored states still rule.
	j = open(t, path, Options{})
	snap, err := j.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var openKeys []string
	for _, a := range snap.Open {
		openKeys = append(openKeys, a.Key+"="+string(a.State))
	}
	if got := strings.Join(openKeys, ","); got != "c=staged,d=staged,e=staged,f=executing,h=executing" {
		t.Fatalf("open attempts = %s", got)
	}
	if err := step("a", runtime.AttemptReconciled); !errors.Is(err, runtime.ErrIllegalTransition) {
		t.Fatalf("a terminal attempt moved after reopen: %v", err)
	}
	if err := step("h", runtime.AttemptUnknown); err != nil {
		t.Fatal(err)
	}
	if err := step("h", runtime.AttemptReconciled); err != nil {
		t.Fatal(err)
	}
	a, found, err := j.Attempt(context.Background(), "h")
	if err != nil || !found || a.State != runtime.AttemptReconciled {
		t.Fatalf("Attempt h = %+v %v %v", a, found, err)
	}
}

func TestRecordsAndStateSurviveReopen(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	now := time.Now().UTC().Round(0)
	pendingApr := runtime.Approval{ID: "apr-1", Kind: "actuation", Device: "heater-1", Capability: "on", Value: value.Bool(true),
		Status: runtime.ApprovalPending, RequestedAt: now, Expires: now.Add(5 * time.Minute)}
	answered := pendingApr
	answered.ID, answered.Status = "apr-2", runtime.ApprovalDenied
	rd := devices.Reading{Value: value.Number(42.5), At: now, Quality: devices.QualityGood}
	commit(t, j, runtime.Sync, ev(runtime.KindApprovalRequested, `{}`), func(e *runtime.Entry) { e.Approval = &pendingApr })
	commit(t, j, runtime.Sync, ev(runtime.KindApprovalAnswered, `{}`), func(e *runtime.Entry) { e.Approval = &answered })
	commit(t, j, runtime.Sync, ev(runtime.KindModeChanged, `{}`), func(e *runtime.Entry) {
		e.Mode = &runtime.ModeRecord{Name: "maintenance", Since: now, By: "console:root"}
	})
	commit(t, j, runtime.Sync, ev(runtime.KindStarted, `{}`), func(e *runtime.Entry) {
		e.Run = &runtime.RunRecord{ID: "run-1", Plan: "irrigate", Status: runtime.RunParked, Approval: "apr-1"}
	})
	commit(t, j, runtime.Async, ev(runtime.KindObserved, `{}`), func(e *runtime.Entry) {
		e.State = &runtime.StateRecord{Device: "tank-1", Capability: "level", Reading: &rd}
	})
	commit(t, j, runtime.Sync, ev(runtime.KindActed, `{}`), func(e *runtime.Entry) {
		e.State = &runtime.StateRecord{Device: "valve-1", Capability: "open", Receipt: &runtime.Receipt{Key: "k", Confirmation: runtime.Confirmed}}
	})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{})
	s, err := j.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Approvals) != 1 || s.Approvals[0].ID != "apr-1" || !s.Approvals[0].Expires.Equal(pendingApr.Expires) {
		t.Errorf("pending approvals = %+v", s.Approvals)
	}
	if s.Mode == nil || s.Mode.Name != "maintenance" {
		t.Errorf("mode = %+v", s.Mode)
	}
	if len(s.Runs) != 1 || s.Runs[0].Status != runtime.RunParked {
		t.Errorf("runs = %+v", s.Runs)
	}
	if s.LastSeq != 6 {
		t.Errorf("LastSeq = %d", s.LastSeq)
	}
	if len(s.States) != 2 || s.States[0].Device != "tank-1" || s.States[0].Reading == nil ||
		!s.States[0].Reading.Value.Equal(value.Number(42.5)) || s.States[0].Reading.Quality != devices.QualityGood ||
		s.States[1].Receipt == nil || s.States[1].Receipt.Confirmation != runtime.Confirmed {
		t.Errorf("states = %+v", s.States)
	}
}

// corruptCopy copies the journal at src, lets mutate change the copy's
// journal bucket with raw bbolt, and verifies the copy.
func corruptCopy(t *testing.T, src string, mutate func(b *bolt.Bucket) error) store.Report {
	t.Helper()
	return verifyCopy(t, tamperCopy(t, src, func(tx *bolt.Tx) error { return mutate(tx.Bucket(bJournal)) }))
}

func TestVerifyFindsTampering(t *testing.T) {
	path := tempPath(t)
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, j, 20)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(b *bolt.Bucket) error
		seq    uint64
		reason string
	}{
		{"flipped byte in a body", func(b *bolt.Bucket) error {
			v := append([]byte(nil), b.Get(seqKey(7))...)
			v[len(v)-2*hashSize-3] ^= 0x01
			return b.Put(seqKey(7), v)
		}, 7, "altered"},
		{"flipped byte in a time", func(b *bolt.Bucket) error {
			v := append([]byte(nil), b.Get(seqKey(3))...)
			v[12] ^= 0x80
			return b.Put(seqKey(3), v)
		}, 3, "altered"},
		{"deleted event", func(b *bolt.Bucket) error { return b.Delete(seqKey(11)) }, 11, "missing"},
		{"reordered pair", func(b *bolt.Bucket) error {
			v5, v6 := append([]byte(nil), b.Get(seqKey(5))...), append([]byte(nil), b.Get(seqKey(6))...)
			return errors.Join(b.Put(seqKey(5), v6), b.Put(seqKey(6), v5))
		}, 5, "moved"},
		{"deleted newest", func(b *bolt.Bucket) error { return b.Delete(seqKey(20)) }, 20, "removed from the end"},
		{"replaced event re-hashed", func(b *bolt.Bucket) error {
			d, err := decodeEvent(b.Get(seqKey(9)))
			if err != nil {
				return err
			}
			d.ev.Body = []byte(`{"i":"forged"}`)
			v, _ := encodeEvent(&d.ev, d.refs, d.prev)
			return b.Put(seqKey(9), v)
		}, 10, "prev does not match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := corruptCopy(t, path, tc.mutate)
			if rep.OK || rep.BadSeq != tc.seq || !strings.Contains(rep.Reason, tc.reason) {
				t.Fatalf("report = %+v (%s); want bad seq %d, %q", rep, rep, tc.seq, tc.reason)
			}
		})
	}
	// The original is untouched.
	j = open(t, path, Options{ReadOnly: true})
	if rep, err := j.Verify(context.Background()); err != nil || !rep.OK || rep.Count != 20 {
		t.Fatalf("original: %+v %v", rep, err)
	}
}

func TestRetentionKeepsAnAnchor(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{MaxEvents: 100})
	fill(t, j, 250)
	// A prune is an event of its own, written after the store's write
	// that found it due, and done when the store writes it.
	fill(t, j, 1)
	settle(t, j)
	rep, err := j.Verify(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if rep.Count > 100 || rep.Last != 252 || rep.Anchor != rep.First-1 || rep.Anchor == 0 {
		t.Fatalf("after retention: %+v", rep)
	}
	if j.Stats().PrunedEvents != 252-rep.Count {
		t.Fatalf("pruned %d, want %d", j.Stats().PrunedEvents, 252-rep.Count)
	}
	// Reading from before the anchor starts at the first event kept.
	evs, err := j.Events(context.Background(), 0, 5)
	if err != nil || len(evs) == 0 || evs[0].Seq != rep.First {
		t.Fatalf("Events(0) = %v, %v; want from %d", evs, err, rep.First)
	}

	// By bytes: each event here is about 110 bytes.
	j2 := open(t, tempPath(t), Options{MaxBytes: 4000})
	fill(t, j2, 200)
	settle(t, j2)
	rep, err = j2.Verify(context.Background())
	if err != nil || !rep.OK || rep.Count > 4000/100 || rep.Anchor == 0 {
		t.Fatalf("by bytes: %+v, %v", rep, err)
	}
}

func TestRetentionKeepsWhatMatters(t *testing.T) {
	path := tempPath(t)
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-60 * 24 * time.Hour)
	recent := time.Now().Add(-time.Hour)
	oldDone := attempt("old", runtime.AttemptStaged)
	oldDone.Updated = old
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = oldDone })
	oldDone.State = runtime.AttemptRefused
	commit(t, j, runtime.Sync, ev(runtime.KindRefused, `{}`), func(e *runtime.Entry) { e.Attempt = oldDone })
	oldOpen := attempt("old-open", runtime.AttemptStaged)
	oldOpen.Updated = old
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = oldOpen })
	newDone := attempt("new", runtime.AttemptStaged)
	newDone.Updated = recent
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = newDone })
	newDone.State = runtime.AttemptRefused
	commit(t, j, runtime.Sync, ev(runtime.KindRefused, `{}`), func(e *runtime.Entry) { e.Attempt = newDone })
	for _, a := range []runtime.Approval{
		{ID: "apr-old-pending", Status: runtime.ApprovalPending, RequestedAt: old},
		{ID: "apr-old-answered", Status: runtime.ApprovalApproved, RequestedAt: old},
	} {
		commit(t, j, runtime.Sync, ev(runtime.KindApprovalRequested, `{}`), func(e *runtime.Entry) { e.Approval = &a })
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{}) // retention prunes records as it starts, beside the writer
	j.pruneRecords(time.Now())   // and this pass is waited for
	commit(t, j, runtime.Sync, ev(runtime.KindStarted, `{}`), nil)
	var keys []string
	err = j.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bEffects, bApprovals} {
			_ = tx.Bucket(b).ForEach(func(k, _ []byte) error { keys = append(keys, string(k)); return nil })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "new,old-open,apr-old-pending" {
		t.Fatalf("records kept = %s", got)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := tempPath(t)
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, j, 3)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
	})
	_ = raw.Close()
	_, err = Open(path, Options{})
	var se *SchemaError
	if !errors.As(err, &se) || se.Found != SchemaVersion+1 || !strings.Contains(err.Error(), "newer than this build knows") {
		t.Fatalf("Open = %v; want a schema error", err)
	}
}

func TestSecondOpenNamesTheHolder(t *testing.T) {
	path := tempPath(t)
	open(t, path, Options{})
	_, err := Open(path, Options{LockTimeout: 50 * time.Millisecond})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("second Open = %v; want a lock error naming pid %d", err, os.Getpid())
	}
}

func TestCorruptFileIsNamed(t *testing.T) {
	path := tempPath(t)
	if err := os.WriteFile(path, []byte(strings.Repeat("not a bbolt file ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{})
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v; want a corrupt error naming the file", err)
	}
}

func TestFullDiskFailsClosed(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{MaxFileSize: 256 << 10, StoreBytes: 32 << 10})
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		big := `{"pad":"` + noise(4000) + `"}`
		_, err = j.Commit(context.Background(), runtime.Entry{Event: ev(runtime.KindObserved, big), Durability: runtime.Sync})
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, berrors.ErrMaxSizeReached) {
		t.Fatalf("commit on a full file = %v", err)
	}
	if j.Err() == nil {
		t.Fatal("Err() is nil after a failed write")
	}
	// Sticky: a small commit fails too, async or sync, with the same reason.
	if _, err := j.Commit(context.Background(), runtime.Entry{Event: ev(runtime.KindObserved, `{}`)}); !errors.Is(err, ErrFailed) {
		t.Fatalf("async commit after failure = %v", err)
	}
	// What was written before the failure is intact.
	if rep, err := j.Verify(context.Background()); err != nil || !rep.OK {
		t.Fatalf("Verify after failure = %+v, %v", rep, err)
	}
}

func TestConcurrentSyncCommitsShareFsyncs(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	const writers, each = 32, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				commit(t, j, runtime.Sync, ev(runtime.KindInvoked, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)), nil)
			}
		})
	}
	wg.Wait()
	st := j.Stats()
	if st.Events != writers*each || st.Batches >= writers*each {
		t.Fatalf("stats = %+v: want %d events in fewer batches", st, writers*each)
	}
	rep, err := j.Verify(context.Background())
	if err != nil || !rep.OK || rep.Count != writers*each {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func TestAsyncCommitIsServedOnceWritten(t *testing.T) {
	path := tempPath(t)
	j, err := Open(path, Options{FlushInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	written := make(chan uint64, 10)
	j.Notify(func(seq uint64) { written <- seq })
	out := commit(t, j, runtime.Async, ev(runtime.KindObserved, `{"v":1}`), nil)
	if evs, _ := j.Events(context.Background(), 0, 10); len(evs) != 0 {
		t.Fatalf("Events served a queued, unwritten event: %v", evs)
	}
	select {
	case seq := <-written:
		if seq != out.Seq {
			t.Fatalf("Notify said %d, want %d", seq, out.Seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the async commit was never written")
	}
	evs, err := j.Events(context.Background(), 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Hash != out.Hash {
		t.Fatalf("Events after the write = %v, %v", evs, err)
	}
	commit(t, j, runtime.Async, ev(runtime.KindObserved, `{"v":2}`), nil)
	// Closing writes what is queued.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{ReadOnly: true})
	if rep, err := j.Verify(context.Background()); err != nil || rep.Count != 2 {
		t.Fatalf("after close: %+v, %v", rep, err)
	}
	if _, err := j.Commit(context.Background(), runtime.Entry{Event: ev(runtime.KindObserved, `{}`)}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("commit on a read-only journal = %v", err)
	}
}

// TestDamagedPagesNeverPanic flips random bytes past the meta pages of a
// real journal file. Opening, loading and verifying it must report the
// damage, never crash.
func TestDamagedPagesNeverPanic(t *testing.T) {
	src := tempPath(t)
	j, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, j, 3000)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	clean, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range 20 {
		b := append([]byte(nil), clean...)
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		for range 20 {
			b[8192+r.IntN(len(b)-8192)] ^= byte(1 + r.IntN(255))
		}
		path := filepath.Join(t.TempDir(), "damaged.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("seed %d: panic %v", seed, p)
				}
			}()
			d, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				return // refused at open: fine
			}
			defer d.Close()
			_, _ = d.Load(context.Background())
			rep, err := d.Verify(context.Background())
			if err == nil && rep.OK && rep.Count != 3000 {
				t.Fatalf("seed %d: verify says ok over %d of 3000 events", seed, rep.Count)
			}
		}()
	}
}

// A journal's failure reaches clients by its public reason, which names
// what is wrong but not where the file lives.
func TestPublicReasonsLeaveThePathOut(t *testing.T) {
	const path = "/var/lib/shadowgate/journal.db"
	for _, err := range []interface{ PublicReason() string }{
		&CorruptError{Path: path, Err: fmt.Errorf("verifying journal %s: record rules/rule-x disagrees", path)},
		&WriteError{First: 5, Last: 9, Path: path, Err: fmt.Errorf("write %s: no space left on device", path)},
	} {
		got := err.PublicReason()
		if strings.Contains(got, path) || !strings.Contains(got, "the journal's file") {
			t.Errorf("PublicReason() = %q, want the path left out", got)
		}
	}
	we := &WriteError{First: 5, Last: 9, Path: path, Err: errors.New("boom")}
	if !errors.Is(we, ErrFailed) || !strings.Contains(we.Error(), path) {
		t.Errorf("WriteError %q: want ErrFailed and the path for the log", we)
	}
}
