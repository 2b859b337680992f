package journal

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// Verify walks the whole chain and reports the first event that is
// missing, moved, altered or not linked to the one before. It then
// re-derives every record from the events that changed it and names each
// record that was inserted, changed or deleted behind the journal's back,
// and each meta key it does not know. It returns an error only when it
// cannot read the file at all.
func (j *DB) Verify(ctx context.Context) (store.Report, error) {
	// The store is brought up to the log first, so that what is verified
	// is every event durable now.
	if err := j.syncStore(ctx); err != nil && !errors.Is(err, ErrFailed) {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return store.Report{}, fmt.Errorf("verifying journal %s: %w", j.path, err)
		}
	}
	r, _, err := j.verify(ctx)
	if err == nil && r.Reason == "" {
		j.verifyLogTail(&r)
	}
	return r, err
}

// verifyLogTail adds to r what a read-only open found in the log past the
// store: its events, checked as the open read them, or why the log cannot
// be trusted.
func (j *DB) verifyLogTail(r *store.Report) {
	if !j.opts.ReadOnly {
		return
	}
	if j.logErr != nil {
		r.OK, r.BadSeq, r.Reason = false, r.Last+1, j.logErr.Error()
		return
	}
	for _, ev := range j.ring {
		if ev.Seq <= r.Last {
			continue
		}
		if r.Count == 0 {
			r.First = ev.Seq
		}
		r.Count++
		r.Last = ev.Seq
	}
}

// verify is Verify that also names each bad record as "bucket/key", for
// the journal to refuse them from then on.
func (j *DB) verify(ctx context.Context) (store.Report, map[string]bool, error) {
	var r store.Report
	badKeys := map[string]bool{}
	want := map[string]map[string]*folded{}
	var anchorSeq uint64
	err := j.view(func(tx *bolt.Tx) error {
		jb, meta := tx.Bucket(bJournal), tx.Bucket(bMeta)
		var strange []string // buckets the journal never makes
		n := 0
		_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			n++
			if !slices.ContainsFunc(buckets, func(b []byte) bool { return string(b) == string(name) }) {
				strange = append(strange, fmt.Sprintf("%q", name))
			}
			return nil
		})
		if jb == nil || meta == nil {
			if n == 0 {
				r.OK = true // a file whose first open stopped before it was made
				return nil
			}
			missing := string(bJournal)
			if meta == nil {
				missing = string(bMeta)
			}
			r.Reason = fmt.Sprintf("the file has %d buckets but not %q (damaged, or not a journal)", n, missing)
			return nil
		}
		for _, name := range strange {
			r.BadRecords = append(r.BadRecords, fmt.Sprintf("bucket %s: a bucket the journal never makes (damaged, or added)", name))
		}
		var prev hash
		expect := uint64(1)
		anchor, err := j.link(tx, kAnchor)
		if err != nil {
			r.BadSeq, r.Reason = 0, err.Error()
			return nil
		}
		if anchor != nil {
			r.Anchor, prev, expect = anchor.Seq, anchor.Hash, anchor.Seq+1
			anchorSeq = anchor.Seq
		}
		var stored int64
		var lastPrune *pruneIntent // the newest event that says what was pruned
		bad := func(seq uint64, format string, args ...any) {
			r.BadSeq, r.Reason = seq, fmt.Sprintf(format, args...)
		}
		h := newHistory(tx)
		key, v, err := h.first()
		for ; err != nil || v != nil; key, v, err = h.next() {
			if r.Count%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var d decoded
			if err == nil {
				d, err = decodeEvent(v)
			}
			switch {
			case key == 0 && err != nil:
				bad(expect, "%v", err)
			case key != expect:
				bad(expect, "event %d is missing (the next is %d)", expect, key)
			case err != nil && v == nil:
				bad(key, "%v", err)
			case err != nil:
				bad(key, "the stored event cannot be read: %v", err)
			case d.ev.Seq != key:
				bad(key, "the event stored under %d says it is %d (moved)", key, d.ev.Seq)
			case d.prev != prev:
				bad(key, "its prev does not match the hash of the event before (reordered, or one was replaced)")
			case chain(d.canonical, d.prev) != d.hash:
				bad(key, "its content does not match its hash (altered)")
			}
			if r.Reason != "" {
				return nil
			}
			if r.Count == 0 {
				r.First = key
			}
			r.Count++
			r.Last = key
			prev = d.hash
			expect = key + 1
			stored += int64(len(v))
			fold(want, key, d.refs)
			if d.ev.Kind == KindRecords {
				var p pruneIntent
				if json.Unmarshal(d.ev.Body, &p) == nil && p.Through > 0 {
					lastPrune = &p
				}
			}
		}
		head, err := j.link(tx, kHead)
		if err != nil {
			bad(expect, "%v", err)
			return nil
		}
		switch {
		case head == nil && r.Count > 0:
			bad(r.Last, "the head record is missing")
		case head != nil && head.Seq != expect-1:
			bad(expect, "the head names event %d but the journal ends at %d (events removed from the end)", head.Seq, expect-1)
		case head != nil && head.Hash != prev:
			bad(head.Seq, "the head's hash does not match event %d", head.Seq)
		}
		if r.Reason == "" && anchor != nil && (lastPrune == nil || lastPrune.Through != anchor.Seq || lastPrune.Hash != anchor.Hash.String()) {
			// Retention journals every prune: an anchor no event names
			// is events deleted from the start and the anchor forged.
			bad(anchor.Seq+1, "the events up to %d are gone, but no event of the journal pruned them (deleted from the start)", anchor.Seq)
		}
		if r.Reason != "" {
			return nil // records are checked against a whole chain only
		}
		r.BadRecords = append(r.BadRecords, checkMeta(meta, stored)...)
		r.Records, r.BadRecords = checkRecords(ctx, tx, want, anchorSeq, time.Now(), r.BadRecords, badKeys)
		if head != nil && indexedHead(meta) == head.Seq {
			// Indexes kept up to the head must agree with the records; a
			// file whose indexes are behind has them built at its next
			// open.
			r.BadRecords = append(r.BadRecords, checkStarting(ctx, tx)...)
		}
		return ctx.Err()
	})
	if err != nil {
		return r, nil, fmt.Errorf("verifying journal %s: %w", j.path, err)
	}
	r.OK = r.Reason == "" && len(r.BadRecords) == 0
	return r, badKeys, nil
}

// metaKeys are the keys the meta bucket may hold.
var metaKeys = map[string]bool{string(kSchema): true, string(kHead): true, string(kAnchor): true, string(kBytes): true, string(kIndexed): true, string(kLog): true}

// checkMeta names meta keys nobody writes, and a byte count that does not
// match the events stored.
func checkMeta(meta *bolt.Bucket, stored int64) []string {
	var out []string
	_ = meta.ForEach(func(k, v []byte) error {
		if !metaKeys[string(k)] {
			out = append(out, fmt.Sprintf("meta/%q: a key the journal never writes", k))
		}
		return nil
	})
	if v := meta.Get(kBytes); v != nil && (len(v) != 8 || int64(binary.BigEndian.Uint64(v)) != stored) {
		out = append(out, fmt.Sprintf("meta/bytes: says %x, the events stored take %d bytes", v, stored))
	}
	return out
}

// checkRecords compares every record of the record buckets with what the
// events say it must be, and names each that disagrees. It returns how
// many records it checked.
func checkRecords(ctx context.Context, tx *bolt.Tx, want map[string]map[string]*folded, anchor uint64, now time.Time, bad []string, keys map[string]bool) (int, []string) {
	n := 0
	for _, bucket := range recordBuckets {
		b := tx.Bucket(bucket)
		if b == nil {
			continue
		}
		w := want[string(bucket)]
		_ = b.ForEach(func(k, v []byte) error {
			if n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err() // the caller says the check was cut short
			}
			n++
			name := string(bucket) + "/" + string(k)
			before := len(bad)
			defer func() {
				if len(bad) > before {
					keys[name] = true
				}
			}()
			seq, js, err := unwrapRecord(v)
			if err != nil {
				bad = append(bad, name+": names no event (inserted, or written by something other than the journal)")
				return nil
			}
			f := w[string(k)]
			if f != nil && f.unknown {
				f = nil
			}
			switch {
			case f == nil && seq > anchor:
				bad = append(bad, fmt.Sprintf("%s: names event %d, which did not make it (inserted)", name, seq))
			case f == nil && live(string(bucket), js, now):
				bad = append(bad, fmt.Sprintf("%s: in force but backed only by pruned event %d (inserted, or its carry was lost)", name, seq))
			case f == nil:
				// history whose event was pruned
			case f.deleted:
				bad = append(bad, fmt.Sprintf("%s: event %d deleted it, but it is there (inserted)", name, f.seq))
			case f.digest != digestOf(js):
				bad = append(bad, fmt.Sprintf("%s: differs from what event %d wrote (modified)", name, f.seq))
			case f.seq != seq:
				bad = append(bad, fmt.Sprintf("%s: names event %d, but event %d made it (modified)", name, seq, f.seq))
			}
			return nil
		})
		for k, f := range w {
			if !f.deleted && !f.unknown && b.Get([]byte(k)) == nil {
				bad = append(bad, fmt.Sprintf("%s/%s: made by event %d and never deleted by one, but it is gone (deleted)", bucket, k, f.seq))
			}
		}
	}
	for name := range want {
		if !slices.ContainsFunc(recordBuckets, func(b []byte) bool { return string(b) == name }) {
			bad = append(bad, fmt.Sprintf("events change records of an unknown bucket %q", name))
		}
	}
	slices.Sort(bad)
	return n, bad
}

// Filter selects events for Export.
type Filter struct {
	// Since exports events after this sequence.
	Since uint64
	// Kinds, if any, keeps only these kinds.
	Kinds []string
	// Device, if set, keeps only events about this device.
	Device string
}

// Match reports whether ev passes the filter.
func (f *Filter) Match(ev *runtime.Event) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, string(ev.Kind)) {
		return false
	}
	return f.Device == "" || ev.Device == f.Device
}

// Export writes the events that pass f as JSON Lines, oldest first, and
// returns how many it wrote and the last sequence it read.
func Export(ctx context.Context, j runtime.Journal, w io.Writer, f Filter) (int, uint64, error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	since, n := f.Since, 0
	for {
		evs, err := j.Events(ctx, since, 1024)
		if err != nil {
			return n, since, err
		}
		if len(evs) == 0 {
			return n, since, nil
		}
		for i := range evs {
			since = evs[i].Seq
			if !f.Match(&evs[i]) {
				continue
			}
			if err := enc.Encode(&evs[i]); err != nil {
				return n, since, fmt.Errorf("writing event %d: %w", evs[i].Seq, err)
			}
			n++
		}
	}
}
