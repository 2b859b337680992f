package journal

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
)

// A pending approval taken out of the start index would be forgotten by
// the next start: the check made at open finds it, and the journal is not
// trusted.
func TestStartIndexWithAnEntryRemovedIsDistrusted(t *testing.T) {
	path := tamperCopy(t, realJournal(t), func(tx *bolt.Tx) error {
		return tx.Bucket(bStarting).Delete(startingKey(bApprovals, []byte("apr-1")))
	})
	if rep := verifyCopy(t, path); rep.OK || !strings.Contains(strings.Join(rep.BadRecords, "\n"), "approvals/apr-1: in force but missing from the start index") {
		t.Fatalf("verify = %+v; want approvals/apr-1 named as missing from the start index", rep)
	}
	j := open(t, path, Options{})
	<-j.Verified()
	if err := j.Err(); err == nil || !strings.Contains(err.Error(), "approvals/apr-1") {
		t.Fatalf("Err = %v; want the journal distrusted, naming approvals/apr-1", err)
	}
}

// An entry the records do not account for is named too.
func TestStartIndexWithAnEntryInsertedIsDistrusted(t *testing.T) {
	path := tamperCopy(t, realJournal(t), func(tx *bolt.Tx) error {
		return tx.Bucket(bStarting).Put(startingKey(bApprovals, []byte("apr-ghost")), indexed1)
	})
	if rep := verifyCopy(t, path); rep.OK || !strings.Contains(strings.Join(rep.BadRecords, "\n"), "apr-ghost") {
		t.Fatalf("verify = %+v; want the ghost entry named", rep)
	}
}

// A file without indexes (written before they were kept) is indexed when
// it opens, and loads as before.
func TestFileWithoutIndexesIsIndexedAtOpen(t *testing.T) {
	path := tamperCopy(t, realJournal(t), func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bStarting, bEnded} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Delete(kIndexed)
	})
	if rep := verifyCopy(t, path); !rep.OK {
		t.Fatalf("verify of a file without indexes = %+v, want ok", rep)
	}
	checkIndexedLoad(t, path)
}

// A file an older build wrote after this one (its head is past the one
// the indexes were kept to) is indexed again: an approval that build
// asked for, and the index does not name, is loaded.
func TestIndexesBehindTheHeadAreBuiltAgain(t *testing.T) {
	path := tamperCopy(t, realJournal(t), func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if err := meta.Put(kIndexed, binary.BigEndian.AppendUint64(nil, indexedHead(meta)-1)); err != nil {
			return err
		}
		return tx.Bucket(bStarting).Delete(startingKey(bApprovals, []byte("apr-1")))
	})
	checkIndexedLoad(t, path)
}

// checkIndexedLoad opens path, loads it, and checks that what realJournal
// left open is there and that the check at open finds the indexes sound.
func checkIndexedLoad(t *testing.T, path string) {
	t.Helper()
	j := open(t, path, Options{})
	s, err := j.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Approvals) != 1 || s.Approvals[0].ID != "apr-1" || len(s.Runs) != 1 || len(s.Rules) != 1 || len(s.Open) != 1 {
		t.Fatalf("loaded %d approvals, %d runs, %d rules, %d open attempts; want 1 each", len(s.Approvals), len(s.Runs), len(s.Rules), len(s.Open))
	}
	<-j.Verified()
	if err := j.Err(); err != nil {
		t.Fatalf("Err = %v after the indexes were built", err)
	}
}

// Retention deletes what ended before the window in events of at most
// pruneRecordsChunk records each, keeps what is open or recent, and
// leaves the ended index with only what it kept.
func TestRetentionPrunesInSmallEvents(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{KeepRecords: time.Hour})
	old, recent := time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute)
	const n = 2*pruneRecordsChunk + 10
	for i := range n + 2 {
		id := fmt.Sprintf("run-%04d", i)
		r := &runtime.RunRecord{ID: id, Plan: runtime.CommandPlan, Status: runtime.RunEnded, StartedAt: old, EndedAt: old}
		switch i {
		case n:
			r.Status, r.EndedAt = runtime.RunRunning, time.Time{}
		case n + 1:
			r.EndedAt = recent
		}
		commit(t, j, runtime.Async, ev(runtime.KindEnded, `{}`), func(e *runtime.Entry) { e.Run = r })
	}
	commit(t, j, runtime.Sync, ev(runtime.KindStarted, `{}`), nil)
	j.pruneRecords(time.Now())
	evs, err := j.Events(t.Context(), 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []int
	for _, e := range evs {
		var b struct {
			Pruned int `json:"pruned"`
		}
		if e.Kind == KindRecords && json.Unmarshal(e.Body, &b) == nil && b.Pruned > 0 {
			chunks = append(chunks, b.Pruned)
		}
	}
	total := 0
	for _, c := range chunks {
		if c > pruneRecordsChunk {
			t.Errorf("one retention event deleted %d records, more than %d", c, pruneRecordsChunk)
		}
		total += c
	}
	// The pass retention makes at open may have chosen some of them too,
	// and a record chosen twice is counted twice.
	if total < n || len(chunks) < 3 {
		t.Fatalf("retention deleted %d records in %d events (%v); want %d in at least 3", total, len(chunks), chunks, n)
	}
	var runs, ended []string
	_ = j.db.View(func(tx *bolt.Tx) error {
		_ = tx.Bucket(bRuns).ForEach(func(k, _ []byte) error { runs = append(runs, string(k)); return nil })
		_ = tx.Bucket(bEnded).ForEach(func(k, _ []byte) error { ended = append(ended, string(k[8:])); return nil })
		return nil
	})
	want := fmt.Sprintf("run-%04d,run-%04d", n, n+1)
	if strings.Join(runs, ",") != want || len(ended) != 1 || !strings.HasSuffix(ended[0], fmt.Sprintf("run-%04d", n+1)) {
		t.Fatalf("kept runs %v, ended index %q; want %s, and the recent one indexed", runs, ended, want)
	}
	rep, err := j.Verify(t.Context())
	if err != nil || !rep.OK {
		t.Fatalf("verify after retention = %+v, %v", rep, err)
	}
}

// The events kept in memory for subscribers are bounded in bytes as well
// as in number, and what is no longer in memory is read from the file.
func TestRingIsBoundedInBytes(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	body := `{"pad":"` + strings.Repeat("x", 2000) + `"}`
	for i := range 3000 {
		d := runtime.Async
		if i == 2999 {
			d = runtime.Sync
		}
		commit(t, j, d, ev(runtime.KindObserved, body), nil)
	}
	settle(t, j)
	j.mu.Lock()
	n, size := len(j.ring), j.ringSize
	j.mu.Unlock()
	if bound := ringBytes * 5 / 4; size > bound || n >= 3000 {
		t.Fatalf("the ring holds %d events, %d bytes; want at most %d bytes", n, size, bound)
	}
	evs, err := j.Events(t.Context(), 0, 5000)
	if err != nil || len(evs) != 3000 || evs[0].Seq != 1 || evs[2999].Seq != 3000 {
		t.Fatalf("Events from the start = %d events, %v; want all 3000, from the file and memory", len(evs), err)
	}
}

// A record whose end moves (a rule that expires, then is revoked) has one
// entry in the ended index, at its latest end, and none once deleted.
func TestEndedIndexFollowsARecord(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	made := time.Now().Add(-time.Hour).UTC().Round(0)
	r := &runtime.RuleRecord{MadeAt: made}
	r.Rule.ID, r.Rule.Device, r.Rule.ExpiresAt = "rule-1", "valve-1", made.Add(2*time.Hour)
	commit(t, j, runtime.Sync, ev(runtime.KindRuleAdded, `{}`), func(e *runtime.Entry) { e.Rule = r })
	entries := func() []string {
		var out []string
		if err := j.syncStore(t.Context()); err != nil {
			t.Fatal(err)
		}
		_ = j.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bEnded).ForEach(func(k, _ []byte) error {
				out = append(out, fmt.Sprintf("%d %s", binary.BigEndian.Uint64(k[:8]), k[8:]))
				return nil
			})
		})
		return out
	}
	want := func(at time.Time) string { return fmt.Sprintf("%d rules\x00rule-1", at.UnixNano()) }
	if got := entries(); len(got) != 1 || got[0] != want(r.Rule.ExpiresAt) {
		t.Fatalf("ended index after the rule was made = %q; want it at its expiry", got)
	}
	revoked := *r
	revoked.Revoked = true
	commit(t, j, runtime.Sync, ev(runtime.KindRuleRevoked, `{}`), func(e *runtime.Entry) { e.Rule = &revoked })
	if got := entries(); len(got) != 1 || got[0] != want(made) {
		t.Fatalf("ended index after the rule was revoked = %q; want one entry, at when it was made", got)
	}
	j.pruneRecords(made.Add(30*24*time.Hour + time.Minute))
	if got := entries(); len(got) != 0 {
		t.Fatalf("ended index after retention deleted the rule = %q; want none", got)
	}
}

// An attempt made and ended in one batch leaves nothing in the start
// index (an index entry put and read again in one transaction).
func TestStartIndexWithinOneBatch(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	a := attempt("k1", runtime.AttemptStaged)
	commit(t, j, runtime.Async, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = a })
	done := *a
	done.State = runtime.AttemptRefused
	commit(t, j, runtime.Sync, ev(runtime.KindRefused, `{}`), func(e *runtime.Entry) { e.Attempt = &done })
	rep, err := j.Verify(t.Context())
	if err != nil || !rep.OK {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
	_ = j.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bStarting).Get(startingKey(bEffects, []byte("k1"))) != nil {
			t.Error("the ended attempt is still in the start index")
		}
		return nil
	})
}

// Past MaxRecords, the oldest ended records are pruned though younger
// than KeepRecords; what is open is not counted or touched.
func TestRetentionBoundsTheEndedRecords(t *testing.T) {
	j := open(t, tempPath(t), Options{MaxRecords: 50})
	base := time.Now().Add(-time.Hour)
	for i := range 120 {
		r := &runtime.RunRecord{ID: fmt.Sprintf("run-%04d", i), Plan: runtime.CommandPlan, Status: runtime.RunEnded,
			StartedAt: base, EndedAt: base.Add(time.Duration(i) * time.Second)}
		commit(t, j, runtime.Async, ev(runtime.KindEnded, `{}`), func(e *runtime.Entry) { e.Run = r })
	}
	open := &runtime.RunRecord{ID: "run-open", Plan: "fill", Status: runtime.RunRunning, StartedAt: base}
	commit(t, j, runtime.Sync, ev(runtime.KindStarted, `{}`), func(e *runtime.Entry) { e.Run = open })
	j.pruneRecords(time.Now())
	var runs []string
	_ = j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bRuns).ForEach(func(k, _ []byte) error { runs = append(runs, string(k)); return nil })
	})
	if len(runs) != 51 || runs[0] != "run-0070" || runs[49] != "run-0119" || runs[50] != "run-open" {
		t.Fatalf("kept %d runs, from %s to %s; want the newest 50 ended (run-0070 on) and the open one", len(runs), runs[0], runs[len(runs)-1])
	}
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
}
