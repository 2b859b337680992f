package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// Records are caches of the journal (DESIGN §1.6, §7). Every record in a
// bucket is stored as
//
//	0x01 ‖ u64 seq ‖ JSON
//
// where seq is the event that made it. That event names the record's
// bucket, key and the SHA-256 of its JSON among its record changes (refs),
// inside the hashed canonical bytes, so a record nobody journaled, or one
// changed after it was, is found by comparing the two.

// recordVersion is the first byte of a record value.
const recordVersion = 0x01

// refOp is what an event does to a record.
type refOp byte

const (
	// opPut stores the record with the digest.
	opPut refOp = 1
	// opDelete removes the record whatever it holds (a logout).
	opDelete refOp = 2
	// opDeleteIf removes the record if it still has the digest
	// (retention: an ended record changed since it was chosen is kept).
	opDeleteIf refOp = 3
	// opCarry re-witnesses the record unchanged under this event, if it
	// still has the digest, so that pruning the event that made it does
	// not leave it unbacked.
	opCarry refOp = 4
)

func (o refOp) valid() bool { return o >= opPut && o <= opCarry }

func (o refOp) String() string {
	switch o {
	case opPut:
		return "put"
	case opDelete:
		return "delete"
	case opDeleteIf:
		return "delete-if"
	case opCarry:
		return "carry"
	}
	return fmt.Sprintf("op(%d)", byte(o))
}

// ref is one record change an event witnesses.
type ref struct {
	bucket string
	key    string
	op     refOp
	digest hash // of the record's JSON; zero for opDelete
}

func digestOf(js []byte) hash { return sha256.Sum256(js) }

// wrapRecord returns the stored value of a record made by event seq.
func wrapRecord(seq uint64, js []byte) []byte {
	b := make([]byte, 0, 9+len(js))
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, js...)
}

// errUnbacked is wrapped by every error that says a record is not backed by
// the event it names.
var errUnbacked = errors.New("not backed by the journal")

// RecordError says that a record in one of the file's buckets disagrees
// with the events: it was inserted, changed or deleted behind the journal's
// back, or cannot be read.
type RecordError struct {
	Bucket, Key string
	// Seq is the event the record names, or 0.
	Seq uint64
	Err error
}

func (e *RecordError) Error() string {
	if e.Seq > 0 {
		return fmt.Sprintf("record %s/%s (event %d): %v", e.Bucket, e.Key, e.Seq, e.Err)
	}
	return fmt.Sprintf("record %s/%s: %v", e.Bucket, e.Key, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// unwrapRecord splits a stored record into the event that made it and its
// JSON. A value in any other layout is an error.
func unwrapRecord(v []byte) (uint64, []byte, error) {
	if len(v) < 9 || v[0] != recordVersion {
		return 0, nil, fmt.Errorf("%w: the record names no event", errUnbacked)
	}
	return binary.BigEndian.Uint64(v[1:9]), v[9:], nil
}

// backed returns the JSON of the record stored under bucket/key as v, after
// checking that the event it names exists, is intact in itself, and
// witnesses exactly this content. The whole chain is checked by Verify; this
// is the check made each time a record is trusted.
func (j *DB) backed(tx *bolt.Tx, bucket []byte, key []byte, v []byte) ([]byte, error) {
	return j.backedIn(tx, j.events(tx), bucket, key, v)
}

// backedIn is backed reading the events with h: records checked in the
// order of their events read each block of the store once.
func (j *DB) backedIn(tx *bolt.Tx, h *history, bucket []byte, key []byte, v []byte) ([]byte, error) {
	seq, js, err := unwrapRecord(v)
	if err != nil {
		return nil, &RecordError{Bucket: string(bucket), Key: string(key), Err: err}
	}
	fail := func(format string, args ...any) error {
		return &RecordError{Bucket: string(bucket), Key: string(key), Seq: seq,
			Err: fmt.Errorf("%w: "+format, append([]any{errUnbacked}, args...)...)}
	}
	if bad := j.bad.Load(); bad != nil && (*bad)[string(bucket)+"/"+string(key)] {
		return nil, fail("the start check found it disagrees with the events")
	}
	ev, err := h.get(seq)
	if err != nil {
		return nil, fail("event %d cannot be read: %v", seq, err)
	}
	if ev == nil {
		if a, _ := j.link(tx, kAnchor); a != nil && seq <= a.Seq && !live(string(bucket), js, time.Now()) {
			return js, nil // history whose event was pruned: it can make nothing act
		}
		return nil, fail("event %d is not in the journal", seq)
	}
	d, err := decodeEvent(ev)
	if err != nil {
		return nil, fail("event %d cannot be read: %v", seq, err)
	}
	if d.ev.Seq != seq || chain(d.canonical, d.prev) != d.hash {
		return nil, fail("event %d does not match its hash", seq)
	}
	want := digestOf(js)
	for _, r := range d.refs {
		if r.bucket == string(bucket) && r.key == string(key) && (r.op == opPut || r.op == opCarry) && r.digest == want {
			return js, nil
		}
	}
	return nil, fail("event %d does not witness this content", seq)
}

// live reports whether a record is one the gateway acts on (a pending
// approval, a rule in force, an open attempt, a run not ended, the mode
// and state, a session not expired), as opposed to history kept for a
// while. A live record must always be backed by an event that is still in
// the journal; history whose event was pruned is kept as it is.
func live(bucket string, js []byte, now time.Time) bool {
	switch bucket {
	case string(bEffects):
		var a struct {
			State runtime.AttemptState `json:"state"`
		}
		return json.Unmarshal(js, &a) != nil || !a.State.Terminal()
	case string(bApprovals):
		var a struct {
			Status runtime.ApprovalStatus `json:"status"`
		}
		return json.Unmarshal(js, &a) != nil || a.Status == runtime.ApprovalPending
	case string(bRules):
		var r runtime.RuleRecord
		if json.Unmarshal(js, &r) != nil {
			return true
		}
		return !r.Revoked && (r.Rule.ExpiresAt.IsZero() || now.Before(r.Rule.ExpiresAt))
	case string(bRuns):
		var r struct {
			Status runtime.RunStatus `json:"status"`
		}
		return json.Unmarshal(js, &r) != nil || r.Status != runtime.RunEnded
	case string(bSessions):
		var s store.Session
		return json.Unmarshal(js, &s) != nil || now.Before(s.Expires)
	}
	return true // state, and anything unknown
}

// recordBuckets are the buckets whose records are caches of events.
var recordBuckets = [][]byte{bEffects, bApprovals, bRules, bRuns, bState, bSessions}

// folded is what the events say a record should be.
type folded struct {
	digest  hash
	seq     uint64 // the event it must name
	deleted bool
	// unknown is a record no retained event made, which a conditional
	// delete may or may not have removed: it is judged as history.
	unknown bool
}

// fold applies the record changes of one event to want, exactly as the
// writer applies them to the buckets.
func fold(want map[string]map[string]*folded, seq uint64, refs []ref) {
	for _, r := range refs {
		m := want[r.bucket]
		if m == nil {
			m = map[string]*folded{}
			want[r.bucket] = m
		}
		cur := m[r.key]
		switch r.op {
		case opPut:
			m[r.key] = &folded{digest: r.digest, seq: seq}
		case opDelete:
			m[r.key] = &folded{deleted: true, seq: seq}
		case opDeleteIf:
			switch {
			case cur == nil || cur.unknown:
				// Made before the anchor: whether it still had the digest
				// when this ran is not known here.
				m[r.key] = &folded{unknown: true}
			case !cur.deleted && cur.digest == r.digest:
				m[r.key] = &folded{deleted: true, seq: seq}
			}
		case opCarry:
			// A carry is chosen in the write just before its own, and
			// any change since has a retained event: a record none
			// changed still had the digest.
			if cur == nil || cur.unknown || (!cur.deleted && cur.digest == r.digest) {
				m[r.key] = &folded{digest: r.digest, seq: seq}
			}
		}
	}
}
