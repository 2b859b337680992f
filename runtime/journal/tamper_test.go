package journal

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
	"github.com/shadowgate/shadowgate/value"
)

// realJournal writes a journal with one record of every kind the gateway
// trusts, and a few hundred events around them, and returns its path.
func realJournal(t *testing.T) string {
	t.Helper()
	path := tempPath(t)
	j := open(t, path, Options{})
	now := time.Now().UTC().Round(0)
	fill(t, j, 50)
	pending := runtime.Approval{ID: "apr-1", Kind: "actuation", Device: "heater-1", Capability: "on", Value: value.Bool(true),
		Status: runtime.ApprovalPending, RequestedAt: now, Expires: now.Add(5 * time.Minute), Required: 1}
	commit(t, j, runtime.Sync, ev(runtime.KindApprovalRequested, `{}`), func(e *runtime.Entry) { e.Approval = &pending })
	commit(t, j, runtime.Sync, ev(runtime.KindRuleAdded, `{}`), func(e *runtime.Entry) {
		e.Rule = &runtime.RuleRecord{MadeAt: now}
		e.Rule.Rule.ID, e.Rule.Rule.Device, e.Rule.Rule.ExpiresAt = "rule-1", "valve-1", now.Add(time.Hour)
	})
	commit(t, j, runtime.Sync, ev(runtime.KindModeChanged, `{}`), func(e *runtime.Entry) {
		e.Mode = &runtime.ModeRecord{Name: "supervised", Since: now, By: "console:root"}
	})
	commit(t, j, runtime.Sync, ev(runtime.KindStarted, `{}`), func(e *runtime.Entry) {
		e.Run = &runtime.RunRecord{ID: "run-1", Plan: "irrigate", Status: runtime.RunParked, Approval: "apr-1", StartedAt: now}
	})
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("cmd-1", runtime.AttemptStaged) })
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("cmd-2", runtime.AttemptStaged) })
	commit(t, j, runtime.Sync, ev(runtime.KindRefused, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("cmd-2", runtime.AttemptRefused) })
	rd := devices.Reading{Value: value.Number(42.5), At: now, Quality: devices.QualityGood}
	commit(t, j, runtime.Async, ev(runtime.KindObserved, `{}`), func(e *runtime.Entry) {
		e.State = &runtime.StateRecord{Device: "tank-1", Capability: "level", Reading: &rd}
	})
	if err := j.Sessions().Put("cookie-1", store.Session{User: "ann", Role: "admin", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	fill(t, j, 50)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// tamperCopy copies the journal at src and changes the copy with raw bbolt.
func tamperCopy(t *testing.T, src string, mutate func(tx *bolt.Tx) error) string {
	t.Helper()
	return rawCopy(t, src, func(tx *bolt.Tx) error {
		if err := unblock(tx); err != nil {
			return err
		}
		return mutate(tx)
	})
}

// unblock stores the events of every block one a key, as a file written
// before blocks keeps them, for the tests that alter one event.
func unblock(tx *bolt.Tx) error {
	jb := tx.Bucket(bJournal)
	var evs []storedEvent
	var keys [][]byte
	c := jb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if !isBlock(v) {
			continue
		}
		got, err := decodeBlock(keySeq(k), v)
		if err != nil {
			return err
		}
		keys = append(keys, append([]byte(nil), k...))
		evs = append(evs, got...)
	}
	for _, k := range keys {
		if err := jb.Delete(k); err != nil {
			return err
		}
	}
	for _, e := range evs {
		if err := jb.Put(seqKey(e.seq), e.value); err != nil {
			return err
		}
	}
	return nil
}

// rawCopy copies the journal at src and lets mutate change the copy with
// raw bbolt, as it is.
func rawCopy(t *testing.T, src string, mutate func(tx *bolt.Tx) error) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(mutate); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func verifyCopy(t *testing.T, path string) store.Report {
	t.Helper()
	j, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rep, err := j.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// editRecord changes the JSON of a stored record, keeping the event it names.
func editRecord(bucket, key string, edit func(string) string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		v := b.Get([]byte(key))
		seq, js, err := unwrapRecord(v)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", bucket, key, err)
		}
		return b.Put([]byte(key), wrapRecord(seq, []byte(edit(string(js)))))
	}
}

// insertRecord puts a record in, naming an event that exists but never
// made it (the first event of the journal).
func insertRecord(bucket, key, js string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put([]byte(key), wrapRecord(51, []byte(js))) }
}

func deleteRecord(bucket, key string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b.Get([]byte(key)) == nil {
			return fmt.Errorf("no record %s/%s to delete", bucket, key)
		}
		return b.Delete([]byte(key))
	}
}

func TestTamperEveryBucket(t *testing.T) {
	src := realJournal(t)
	if rep := verifyCopy(t, src); !rep.OK || rep.Records < 8 {
		t.Fatalf("the untouched journal: %s", rep)
	}
	sess, forged := string(sessionKey("cookie-1")), string(sessionKey("forged-cookie"))
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
		want   string // what the report must say
	}{
		{"journal insert", func(tx *bolt.Tx) error {
			return tx.Bucket(bJournal).Put(seqKey(100_000), []byte("forged"))
		}, "missing"},
		{"journal delete", func(tx *bolt.Tx) error { return tx.Bucket(bJournal).Delete(seqKey(30)) }, "event 30 is missing"},
		{"journal modify", func(tx *bolt.Tx) error {
			v := append([]byte(nil), tx.Bucket(bJournal).Get(seqKey(40))...)
			v[len(v)-2*hashSize-3] ^= 1
			return tx.Bucket(bJournal).Put(seqKey(40), v)
		}, "altered"},

		{"effects insert", insertRecord("effects", "cmd-9", `{"key":"cmd-9","state":"executing","device":"valve-1"}`), "effects/cmd-9: names event 51"},
		{"effects delete", deleteRecord("effects", "cmd-2"), "effects/cmd-2: made by event"},
		{"effects modify", editRecord("effects", "cmd-1", func(s string) string { return strings.Replace(s, "staged", "unknown", 1) }), "effects/cmd-1: differs"},

		{"approvals insert", insertRecord("approvals", "apr-9", `{"id":"apr-9","status":"pending"}`), "approvals/apr-9: names event 51"},
		{"approvals delete", deleteRecord("approvals", "apr-1"), "approvals/apr-1: made by event"},
		{"approvals modify", editRecord("approvals", "apr-1", func(s string) string { return strings.Replace(s, `"required":1`, `"required":0`, 1) }), "approvals/apr-1: differs"},

		{"rules insert", insertRecord("rules", "rule-9", `{"rule":{"id":"rule-9","device":"pump-1","decision":"allow"}}`), "rules/rule-9: names event 51"},
		{"rules delete", deleteRecord("rules", "rule-1"), "rules/rule-1: made by event"},
		{"rules modify", editRecord("rules", "rule-1", func(s string) string { return strings.Replace(s, "valve-1", "pump-1", 1) }), "rules/rule-1: differs"},

		{"runs insert", insertRecord("runs", "run-9", `{"id":"run-9","status":"parked"}`), "runs/run-9: names event 51"},
		{"runs delete", deleteRecord("runs", "run-1"), "runs/run-1: made by event"},
		{"runs modify", editRecord("runs", "run-1", func(s string) string { return strings.Replace(s, "irrigate", "flood", 1) }), "runs/run-1: differs"},

		{"state insert", insertRecord("state", "reading/pump-1.on", `{"value":true}`), "state/reading/pump-1.on: names event 51"},
		{"state delete", deleteRecord("state", "mode"), "state/mode: made by event"},
		{"state modify", editRecord("state", "mode", func(s string) string {
			return strings.Replace(s, `"supervised"`, `"maintenance"`, 1)
		}), "state/mode: differs"},
		{"state insert without an event", func(tx *bolt.Tx) error {
			return tx.Bucket(bState).Put([]byte("mode"), []byte(`{"name":"maintenance"}`))
		}, "state/mode: names no event"},

		{"sessions insert", insertRecord("sessions", forged, `{"user":"eve","role":"admin","expires":"`+future+`"}`), "sessions/" + forged + ": names event 51"},
		{"sessions delete", deleteRecord("sessions", sess), "sessions/" + sess + ": made by event"},
		{"sessions modify", editRecord("sessions", sess, func(s string) string { return strings.Replace(s, `"ann"`, `"eve"`, 1) }), "sessions/" + sess + ": differs"},

		{"meta insert", func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put([]byte("mode"), []byte("maintenance")) }, `meta/"mode"`},
		{"meta delete", func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Delete(kHead) }, "head record is missing"},
		{"meta modify", func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put(kBytes, binary.BigEndian.AppendUint64(nil, 12))
		}, "meta/bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tamperCopy(t, src, tc.mutate)
			rep := verifyCopy(t, path)
			if rep.OK || !strings.Contains(rep.String(), tc.want) {
				t.Fatalf("verify = %s\nwant it to name %q", rep, tc.want)
			}
			// serve: the journal opens, fails closed, and keeps reads.
			j, err := Open(path, Options{})
			if err != nil {
				var ce *CorruptError
				if errors.As(err, &ce) {
					return // refused at open: the gateway runs on Failed, fail-closed
				}
				t.Fatal(err)
			}
			defer j.Close()
			snap, lerr := j.Load(t.Context())
			<-j.Verified()
			if j.Err() == nil {
				t.Fatalf("serve trusts the tampered journal (%s)", rep)
			}
			if _, err := j.Commit(t.Context(), runtime.Entry{Event: ev(runtime.KindInvoked, `{}`), Durability: runtime.Sync,
				Attempt: attempt("cmd-new", runtime.AttemptStaged)}); err == nil {
				t.Fatal("a commit on a tampered journal succeeded")
			}
			if evs, err := j.Events(t.Context(), 0, 10); err != nil || len(evs) == 0 {
				t.Fatalf("reads stop on a tampered journal: %d events, %v", len(evs), err)
			}
			if lerr == nil {
				for _, r := range snap.Rules {
					if r.Rule.ID == "rule-9" || r.Rule.Device == "pump-1" {
						t.Errorf("a forged rule was loaded: %+v", r)
					}
				}
				if snap.Mode != nil && snap.Mode.Name == "maintenance" {
					t.Error("a forged mode was loaded")
				}
			}
			if _, ok, _ := j.Sessions().Get("forged-cookie", time.Now()); ok {
				t.Error("a forged session logs in")
			}
			if _, ok, _ := j.Sessions().Get("cookie-1", time.Now()); ok && tc.name == "sessions modify" {
				t.Error("a modified session still logs in")
			}
		})
	}
}

// A record of garbage is named, and does not stop the journal from being
// read or the rest from loading.
func TestGarbageRecordDoesNotStopTheRest(t *testing.T) {
	src := realJournal(t)
	path := tamperCopy(t, src, func(tx *bolt.Tx) error {
		return tx.Bucket(bRules).Put([]byte("rule-x"), wrapRecord(51, []byte("\x00garbage{")))
	})
	j := open(t, path, Options{})
	snap, err := j.Load(t.Context())
	if err != nil {
		t.Fatalf("Load = %v; want the good records", err)
	}
	if snap.Mode == nil || snap.Mode.Name != "supervised" || len(snap.Approvals) != 1 {
		t.Errorf("the good records were not loaded: %+v", snap)
	}
	// Load reads the records the start index names, which a record put
	// behind the journal's back is not among; the check of the whole
	// journal made at open, which every write waits for, names it.
	<-j.Verified()
	if err := j.Err(); err == nil || !strings.Contains(err.Error(), "rules/rule-x") {
		t.Errorf("Err = %v; want it to name rules/rule-x", err)
	}
}

// A body flipped in the middle of the chain is found at start, not only by
// journal verify: the journal fails closed naming the sequence.
func TestStartFindsABrokenChain(t *testing.T) {
	src := realJournal(t)
	path := tamperCopy(t, src, func(tx *bolt.Tx) error {
		v := append([]byte(nil), tx.Bucket(bJournal).Get(seqKey(20))...)
		v[40] ^= 0x01
		return tx.Bucket(bJournal).Put(seqKey(20), v)
	})
	j := open(t, path, Options{})
	<-j.Verified()
	if err := j.Err(); err == nil || !strings.Contains(err.Error(), "seq 20") {
		t.Fatalf("Err = %v; want the chain break at seq 20", err)
	}
	if _, err := j.Commit(t.Context(), runtime.Entry{Event: ev(runtime.KindObserved, `{}`), Durability: runtime.Sync}); err == nil {
		t.Fatal("a commit after a broken chain succeeded")
	}
	// A person can still log in to the console to see why: the session is
	// kept in memory, not in the untrusted file.
	sessions := j.Sessions()
	if err := sessions.Put("cookie-3", store.Session{User: "ann", Role: "admin", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("a login on a journal that failed closed: %v", err)
	}
	if s, ok, err := sessions.Get("cookie-3", time.Now()); err != nil || !ok || s.User != "ann" {
		t.Fatalf("Get = %+v, %v, %v", s, ok, err)
	}
}

// Records written by a build before they were backed are adopted once,
// by an event that says so, and verify is clean after.
func TestLegacyRecordsAreAdopted(t *testing.T) {
	src := realJournal(t)
	path := tamperCopy(t, src, func(tx *bolt.Tx) error {
		// A file of the older build, pruned by it (an anchor no event
		// names): its events name no records.
		jb := tx.Bucket(bJournal)
		var a link
		for seq := uint64(1); seq <= 5; seq++ {
			v := jb.Get(seqKey(seq))
			a.Seq = seq
			copy(a.Hash[:], v[len(v)-hashSize:])
			if err := jb.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bMeta).Put(kAnchor, a.encode()); err != nil {
			return err
		}
		if err := rechain(tx, 0, func(d *decoded) { d.refs = nil }); err != nil {
			return err
		}
		for _, bucket := range recordBuckets {
			b := tx.Bucket(bucket)
			var keys, vals [][]byte
			_ = b.ForEach(func(k, v []byte) error {
				_, js, _ := unwrapRecord(v)
				keys, vals = append(keys, append([]byte(nil), k...)), append(vals, append([]byte(nil), js...))
				return nil
			})
			for i := range keys {
				if err := b.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, 1))
	})
	j := open(t, path, Options{})
	<-j.Verified()
	if err := j.Err(); err != nil {
		t.Fatalf("Err after adopting = %v", err)
	}
	snap, err := j.Load(t.Context())
	if err != nil || snap.Mode == nil || len(snap.Rules) != 1 {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := verifyCopy(t, path); !rep.OK {
		t.Fatalf("verify after adopting: %s", rep)
	}
}

// Live records survive retention however small it is: their events are
// carried before they are pruned, and verify stays clean.
func TestRetentionCarriesLiveRecords(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{MaxEvents: 20})
	now := time.Now().UTC().Round(0)
	commit(t, j, runtime.Sync, ev(runtime.KindModeChanged, `{}`), func(e *runtime.Entry) {
		e.Mode = &runtime.ModeRecord{Name: "interlocked", Since: now, By: "console:root"}
	})
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("cmd-1", runtime.AttemptStaged) })
	commit(t, j, runtime.Sync, ev(runtime.KindInvoked, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("cmd-2", runtime.AttemptStaged) })
	commit(t, j, runtime.Sync, ev(runtime.KindRefused, `{}`), func(e *runtime.Entry) { e.Attempt = attempt("cmd-2", runtime.AttemptRefused) })
	for range 10 {
		fill(t, j, 17)
		settle(t, j)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	rep := verifyCopy(t, path)
	if !rep.OK || rep.Anchor < 100 {
		t.Fatalf("verify after pruning = %s; want ok, anchored past 100", rep)
	}
	j = open(t, path, Options{MaxEvents: 20})
	snap, err := j.Load(t.Context())
	<-j.Verified()
	if err != nil || j.Err() != nil || snap.Mode == nil || snap.Mode.Name != "interlocked" || len(snap.Open) != 1 {
		t.Fatalf("Load after pruning = %+v, %v, Err %v", snap, err, j.Err())
	}
	// An ended attempt whose events were pruned is history: still found
	// for a repeated command id, and trusted as such.
	if a, ok, err := j.Attempt(t.Context(), "cmd-2"); err != nil || !ok || a.State != runtime.AttemptRefused {
		t.Fatalf("Attempt(cmd-2) after pruning = %+v, %v, %v", a, ok, err)
	}
}

func TestCheckpointsProveACopyExtendsThem(t *testing.T) {
	dir := t.TempDir()
	signer, vkey, err := CheckpointKey(filepath.Join(dir, "journal.key"), "shadowgate-test")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "journal.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v", fi.Mode(), err)
	}
	path := filepath.Join(dir, FileName)
	j := open(t, path, Options{Checkpoint: CheckpointOptions{Signer: signer, Origin: "shadowgate/test", Every: 25}})
	fill(t, j, 60)
	var cps []runtime.Event
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for len(cps) < 2 {
		fill(t, j, 1)
		evs, err := j.Events(ctx, 0, 10_000)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("no checkpoints after 60 events: %v %v", err, ctx.Err())
		}
		cps = cps[:0]
		for _, e := range evs {
			if e.Kind == runtime.KindCheckpoint {
				cps = append(cps, e)
			}
		}
	}
	fill(t, j, 5)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	first := cps[0]
	cp, err := ParseCheckpoint(first.Body, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Origin != "shadowgate/test" || cp.Size == 0 || cp.Size >= first.Seq {
		t.Fatalf("checkpoint = %+v in event %d", cp, first.Seq)
	}
	// Another key's signature is not taken.
	_, otherV, _ := note.GenerateKey(nil, "shadowgate-test")
	if _, err := ParseCheckpoint(first.Body, otherV); err == nil {
		t.Fatal("a checkpoint verified with the wrong key")
	}
	extends := func(path string) (bool, string) {
		t.Helper()
		c, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ok, why, err := c.Extends(t.Context(), cp)
		if err != nil {
			t.Fatal(err)
		}
		return ok, why
	}
	if ok, why := extends(path); !ok {
		t.Fatalf("the journal does not extend its own checkpoint: %s", why)
	}
	// Re-chained after the checkpoint: an event before it is changed and
	// every hash after it re-computed, head included. The chain verifies,
	// the checkpoint does not.
	rechained := tamperCopy(t, path, func(tx *bolt.Tx) error {
		return rechain(tx, cp.Size-3, func(d *decoded) { d.ev.Body = []byte(`{"i":"rewritten"}`) })
	})
	if rep := verifyCopy(t, rechained); !rep.OK {
		t.Fatalf("the re-chained copy should verify on its own: %s", rep)
	}
	if ok, why := extends(rechained); ok || !strings.Contains(why, "re-chained") {
		t.Fatalf("Extends(re-chained) = %v, %q; want it found", ok, why)
	}
	// The checkpoints the journal holds itself find it too, with the key.
	for _, tc := range []struct {
		path string
		bad  bool
	}{{path, false}, {rechained, true}} {
		c, err := Open(tc.path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		n, bad, err := c.CheckCheckpoints(t.Context(), vkey)
		_ = c.Close()
		if err != nil || n < 2 || (len(bad) > 0) != tc.bad {
			t.Fatalf("CheckCheckpoints(%s) = %d, %q, %v; want bad %v", tc.path, n, bad, err, tc.bad)
		}
	}
	// A checkpoint of a size the copy does not reach: truncated.
	far := cp
	far.Size = math.MaxUint64
	c, _ := Open(path, Options{ReadOnly: true})
	defer c.Close()
	if ok, why, _ := c.Extends(t.Context(), far); ok || !strings.Contains(why, "truncated") {
		t.Fatalf("Extends(beyond the end) = %v, %q", ok, why)
	}
	// The note is the C2SP form: origin, size, base64 hash, blank, signature.
	var body runtime.CheckpointBody
	_ = jsonUnmarshal(first.Body, &body)
	lines := strings.Split(body.Note, "\n")
	if len(lines) < 6 || lines[0] != "shadowgate/test" || lines[3] != "" || !strings.HasPrefix(lines[4], "— shadowgate-test ") {
		t.Fatalf("note = %q", body.Note)
	}
	if h, err := base64.StdEncoding.DecodeString(lines[2]); err != nil || hash(h).String() != body.Hash {
		t.Fatalf("note hash %q vs body %s", lines[2], body.Hash)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// rechain rewrites the chain as someone who can write the file could: edit
// changes event at (every event if at is 0), and every hash after it,
// the head and the byte count, are computed again.
func rechain(tx *bolt.Tx, at uint64, edit func(*decoded)) error {
	jb := tx.Bucket(bJournal)
	var prev hash
	if a := tx.Bucket(bMeta).Get(kAnchor); a != nil {
		l, err := decodeLink(a)
		if err != nil {
			return err
		}
		prev = l.Hash
	}
	c := jb.Cursor()
	var last link
	var total int64
	for k, v := c.First(); k != nil; k, v = c.Next() {
		d, err := decodeEvent(v)
		if err != nil {
			return err
		}
		if at == 0 || d.ev.Seq == at {
			edit(&d)
		}
		nv, h := encodeEvent(&d.ev, d.refs, prev)
		if err := jb.Put(k, nv); err != nil {
			return err
		}
		prev, last, total = h, link{Seq: d.ev.Seq, Hash: h}, total+int64(len(nv))
	}
	if err := tx.Bucket(bMeta).Put(kBytes, binary.BigEndian.AppendUint64(nil, uint64(total))); err != nil {
		return err
	}
	return tx.Bucket(bMeta).Put(kHead, last.encode())
}

// Setting the schema back so that forged records are adopted as if an older
// build had written them is found: the chain says which build wrote it.
func TestSchemaDowngradeIsRefused(t *testing.T) {
	src := realJournal(t)
	path := tamperCopy(t, src, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bRules).Put([]byte("rule-evil"), []byte(`{"rule":{"id":"rule-evil","principal":"*","device":"pump-1","decision":"allow"}}`)); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, 1))
	})
	_, err := Open(path, Options{})
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the file was altered") {
		t.Fatalf("Open of a journal set back to schema 1 = %v; want it refused as altered", err)
	}
}

// Deleting the oldest events and forging an anchor is found: every prune
// is an event, and the anchor must be the one it names.
func TestDeletedOldestEventsAreFound(t *testing.T) {
	src := realJournal(t)
	path := tamperCopy(t, src, func(tx *bolt.Tx) error {
		jb := tx.Bucket(bJournal)
		var a link
		var freed uint64
		for seq := uint64(1); seq <= 10; seq++ {
			v := jb.Get(seqKey(seq))
			a.Seq = seq
			copy(a.Hash[:], v[len(v)-hashSize:])
			freed += uint64(len(v))
			if err := jb.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		b := binary.BigEndian.Uint64(tx.Bucket(bMeta).Get(kBytes))
		if err := tx.Bucket(bMeta).Put(kBytes, binary.BigEndian.AppendUint64(nil, b-freed)); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(kAnchor, a.encode())
	})
	if rep := verifyCopy(t, path); rep.OK || !strings.Contains(rep.Reason, "no event of the journal pruned them") {
		t.Fatalf("verify = %s; want the deleted start found", rep)
	}
}

// A record put back as it was before a later event changed or deleted it
// names an event that really wrote it; the start check finds it, and from
// then on it is not honoured (a logged-out admin session put back).
func TestRolledBackRecordIsNotHonoured(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	now := time.Now()
	if err := j.Sessions().Put("cookie-2", store.Session{User: "ann", Role: "admin", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var old []byte
	settle(t, j)
	if err := j.db.View(func(tx *bolt.Tx) error {
		old = append(old, tx.Bucket(bSessions).Get(sessionKey("cookie-2"))...)
		return nil
	}); err != nil || old == nil {
		t.Fatalf("the session row: %v", err)
	}
	if err := j.Sessions().Delete("cookie-2"); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	back := tamperCopy(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bSessions).Put(sessionKey("cookie-2"), old) })
	j2 := open(t, back, Options{})
	if _, ok, _ := j2.Sessions().Get("cookie-2", time.Now()); ok {
		t.Fatal("a session deleted at logout and put back logs in")
	}
	if err := j2.Err(); err == nil || !strings.Contains(err.Error(), "sessions/") {
		t.Fatalf("Err = %v; want the session named", err)
	}
}
