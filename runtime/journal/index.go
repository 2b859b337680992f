package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
)

// Two indexes keep a start and retention from growing with history. Both
// are derived from the records, changed in the same transaction as the
// record they name, and not witnessed by events: a start's verify compares
// the start index with the records and distrusts the journal if they
// disagree, as it would a changed record; the ended index is a hint, each
// entry checked against its record before anything is deleted.
//
//   - bStarting names the records a start loads (Load): attempts not
//     terminal, approvals pending, rules not revoked, runs not ended, and
//     ended plan runs that a request id started. Key: bucket ‖ 0 ‖ key.
//
//   - bEnded names the records retention may delete, by when they ended,
//     oldest first. Key: u64 Unix nanoseconds ‖ bucket ‖ 0 ‖ key.
//
//   - bEndedBy holds each bEnded entry's time by record, so that a change
//     finds the entry to replace without reading the record it replaces.
//     Key: bucket ‖ 0 ‖ key; value: u64 Unix nanoseconds.
//
// The meta key kIndexed holds the head (u64 seq) the indexes were kept up
// to. A file whose head differs was written by a build that did not keep
// them, and its indexes are built again at open.
var (
	bStarting = []byte("index-starting")
	bEnded    = []byte("index-ended")
	bEndedBy  = []byte("index-ended-by")
	kIndexed  = []byte("indexed")
)

// indexedBuckets are the record buckets the indexes cover.
var indexedBuckets = [][]byte{bEffects, bApprovals, bRules, bRuns}

// indexed1 is the value of an index entry. It is not empty: bbolt's Get
// returns nil for an empty value put in the same transaction, as it does
// for a key that is not there.
var indexed1 = []byte{1}

// indexed reports whether the indexes cover bucket.
func indexed(bucket []byte) bool {
	return slices.ContainsFunc(indexedBuckets, func(x []byte) bool { return bytes.Equal(x, bucket) })
}

// eachStarting calls fn with the key and stored value (nil if it is gone)
// of every record of bucket b that the start index st names.
func eachStarting(st, b *bolt.Bucket, bucket []byte, fn func(k, v []byte)) {
	prefix := startingKey(bucket, nil)
	c := st.Cursor()
	for ik, _ := c.Seek(prefix); ik != nil && bytes.HasPrefix(ik, prefix); ik, _ = c.Next() {
		k := ik[len(prefix):]
		fn(k, b.Get(k))
	}
}

// indexFacts is what the indexes hold of one record.
type indexFacts struct {
	// starting: a start loads it.
	starting bool
	// ended is when retention's clock started for it; zero if never.
	ended time.Time
}

// The facts of each kind of record, from the fields that decide them, as
// Load and retention judge them. encodeRecords takes them from the typed
// record; factsOf from the JSON of one already stored.

func attemptFacts(state runtime.AttemptState, updated time.Time) indexFacts {
	if !state.Terminal() {
		return indexFacts{starting: true}
	}
	return indexFacts{ended: updated}
}

func approvalFacts(status runtime.ApprovalStatus, requested time.Time) indexFacts {
	if status == runtime.ApprovalPending {
		return indexFacts{starting: true}
	}
	return indexFacts{ended: requested}
}

func runFacts(status runtime.RunStatus, plan, requestID string, ended time.Time) indexFacts {
	if status != runtime.RunEnded {
		return indexFacts{starting: true}
	}
	return indexFacts{starting: requestID != "" && plan != runtime.CommandPlan, ended: ended}
}

func ruleFacts(r *runtime.RuleRecord) indexFacts {
	switch {
	case r.Revoked:
		return indexFacts{ended: r.MadeAt}
	case !r.Rule.ExpiresAt.IsZero():
		// Spent once it expired; retention counts from the later of when
		// it was made and when it expired.
		return indexFacts{starting: true, ended: later(r.MadeAt, r.Rule.ExpiresAt)}
	}
	return indexFacts{starting: true}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// factsOf reads the facts of a record of an indexed bucket from its JSON.
// A record that cannot be read is taken as starting, so that Load names
// it; ok is false for a bucket not indexed.
func factsOf(bucket, js []byte) (f indexFacts, ok bool) {
	unreadable := indexFacts{starting: true}
	switch string(bucket) {
	case string(bEffects):
		var a struct {
			State   runtime.AttemptState `json:"state"`
			Updated time.Time            `json:"updated"`
		}
		if json.Unmarshal(js, &a) != nil {
			return unreadable, true
		}
		return attemptFacts(a.State, a.Updated), true
	case string(bApprovals):
		var a struct {
			Status      runtime.ApprovalStatus `json:"status"`
			RequestedAt time.Time              `json:"requested_at"`
		}
		if json.Unmarshal(js, &a) != nil {
			return unreadable, true
		}
		return approvalFacts(a.Status, a.RequestedAt), true
	case string(bRuns):
		var r struct {
			Status    runtime.RunStatus `json:"status"`
			Plan      string            `json:"plan"`
			RequestID string            `json:"request_id"`
			EndedAt   time.Time         `json:"ended_at"`
		}
		if json.Unmarshal(js, &r) != nil {
			return unreadable, true
		}
		return runFacts(r.Status, r.Plan, r.RequestID, r.EndedAt), true
	case string(bRules):
		var r runtime.RuleRecord
		if json.Unmarshal(js, &r) != nil {
			return unreadable, true
		}
		return ruleFacts(&r), true
	}
	return indexFacts{}, false
}

// startingKey is a record's key in bStarting.
func startingKey(bucket, key []byte) []byte {
	k := make([]byte, 0, len(bucket)+1+len(key))
	k = append(k, bucket...)
	k = append(k, 0)
	return append(k, key...)
}

// endedKey is a record's key in bEnded.
func endedKey(at time.Time, bucket, key []byte) []byte {
	k := make([]byte, 0, 8+len(bucket)+1+len(key))
	k = binary.BigEndian.AppendUint64(k, uint64(max(at.UnixNano(), 0)))
	k = append(k, bucket...)
	k = append(k, 0)
	return append(k, key...)
}

// splitIndexKey splits bucket ‖ 0 ‖ key.
func splitIndexKey(k []byte) (bucket, key []byte, ok bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return nil, nil, false
	}
	return k[:i], k[i+1:], true
}

// indexChange keeps the indexes of the record bucket/key in step with a
// change to is (nil: the record is deleted). What the record was is read
// from the indexes themselves, not decoded from the record. It runs in the
// transaction that changes the record.
func indexChange(tx *bolt.Tx, bucket, key []byte, is *indexFacts) error {
	if !indexed(bucket) {
		return nil
	}
	if is == nil {
		is = &indexFacts{}
	}
	st, en, by := tx.Bucket(bStarting), tx.Bucket(bEnded), tx.Bucket(bEndedBy)
	sk := startingKey(bucket, key)
	if was := st.Get(sk) != nil; was != is.starting {
		var err error
		if is.starting {
			err = st.Put(sk, indexed1)
		} else {
			err = st.Delete(sk)
		}
		if err != nil {
			return err
		}
	}
	var wasEnded time.Time
	if v := by.Get(sk); len(v) == 8 {
		wasEnded = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	}
	if wasEnded.Equal(is.ended) {
		return nil
	}
	if !wasEnded.IsZero() {
		if err := en.Delete(endedKey(wasEnded, bucket, key)); err != nil {
			return err
		}
	}
	if is.ended.IsZero() {
		return by.Delete(sk)
	}
	if err := en.Put(endedKey(is.ended, bucket, key), indexed1); err != nil {
		return err
	}
	return by.Put(sk, binary.BigEndian.AppendUint64(nil, uint64(max(is.ended.UnixNano(), 0))))
}

// rebuildIndexes builds the indexes again from the records, for a file
// that had none or was last written by a build that did not keep them.
func rebuildIndexes(tx *bolt.Tx) (int, error) {
	for _, name := range [][]byte{bStarting, bEnded, bEndedBy} {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return 0, err
			}
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, bucket := range indexedBuckets {
		err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			n++
			f, _ := factsOf(bucket, recordJSON(v))
			return indexChange(tx, bucket, k, &f)
		})
		if err != nil {
			return n, fmt.Errorf("indexing %s: %w", bucket, err)
		}
	}
	return n, nil
}

// recordJSON is a stored record's JSON, or the value itself when it is not
// in the record layout (factsOf then takes it as unreadable).
func recordJSON(v []byte) []byte {
	if _, js, err := unwrapRecord(v); err == nil {
		return js
	}
	return v
}

// indexedHead returns the head seq the indexes were kept up to, or 0.
func indexedHead(meta *bolt.Bucket) uint64 {
	if v := meta.Get(kIndexed); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// checkStarting compares the start index with the records: every record a
// start must load is in it, and it names nothing else. It returns what
// disagrees, by record name.
func checkStarting(ctx context.Context, tx *bolt.Tx) []string {
	var bad []string
	st := tx.Bucket(bStarting)
	if st == nil {
		return []string{"the start index is missing"}
	}
	for _, bucket := range indexedBuckets {
		n := 0
		_ = tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			if n++; n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			f, _ := factsOf(bucket, recordJSON(v))
			if in := st.Get(startingKey(bucket, k)) != nil; in != f.starting {
				if f.starting {
					bad = append(bad, fmt.Sprintf("%s/%s: in force but missing from the start index (removed behind the journal's back)", bucket, k))
				} else {
					bad = append(bad, fmt.Sprintf("%s/%s: in the start index but not in force (inserted)", bucket, k))
				}
			}
			return nil
		})
	}
	_ = st.ForEach(func(k, _ []byte) error {
		bucket, key, ok := splitIndexKey(k)
		if !ok || tx.Bucket(bucket) == nil || tx.Bucket(bucket).Get(key) == nil {
			bad = append(bad, fmt.Sprintf("index-starting/%q: names no record (inserted)", k))
		}
		return nil
	})
	return bad
}
