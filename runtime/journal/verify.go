package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
)

// Report is the result of walking the chain.
type Report struct {
	// Count is the number of events checked; First and Last their range.
	Count uint64 `json:"count"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Anchor is the sequence of the last pruned event, or 0.
	Anchor uint64 `json:"anchor,omitempty"`
	OK     bool   `json:"ok"`
	// BadSeq is the first sequence that fails, and Reason says how.
	BadSeq uint64 `json:"bad_seq,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// String is the one-line summary the CLI prints.
func (r Report) String() string {
	s := fmt.Sprintf("%d events", r.Count)
	if r.Count > 0 {
		s += fmt.Sprintf(", seq %d to %d", r.First, r.Last)
	}
	if r.Anchor > 0 {
		s += fmt.Sprintf(", anchored after pruned event %d", r.Anchor)
	}
	if r.OK {
		return s + ": ok"
	}
	return s + fmt.Sprintf(": BAD at seq %d: %s", r.BadSeq, r.Reason)
}

// Verify walks the whole chain and reports the first event that is
// missing, moved, altered or not linked to the one before. It returns an
// error only when it cannot read the file at all.
func (j *DB) Verify(ctx context.Context) (Report, error) {
	var r Report
	err := j.view(func(tx *bolt.Tx) error {
		jb, meta := tx.Bucket(bJournal), tx.Bucket(bMeta)
		if jb == nil || meta == nil {
			r.OK = true
			return nil
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
		}
		bad := func(seq uint64, format string, args ...any) {
			r.BadSeq, r.Reason = seq, fmt.Sprintf(format, args...)
		}
		c := jb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if r.Count%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			key := keySeq(k)
			d, err := decodeEvent(v)
			switch {
			case len(k) != 8:
				bad(expect, "a key of %d bytes in the journal", len(k))
			case key != expect:
				bad(expect, "event %d is missing (the next is %d)", expect, key)
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
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("verifying journal %s: %w", j.path, err)
	}
	r.OK = r.Reason == ""
	return r, nil
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
