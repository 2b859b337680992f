package journal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
)

// maxBatch bounds one transaction; a fuller queue is written at once.
const maxBatch = 16384

// writer is the journal's only writing goroutine. It gathers commits into
// batches, one transaction and one fsync each, until Close.
func (j *DB) writer() {
	defer close(j.writerDone)
	j.pruneRecords(time.Now())
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	for {
		select {
		case <-j.kick:
		case now := <-prune.C:
			j.pruneRecords(now)
			continue
		case <-j.quit:
			j.flushOnce()
			return
		}
		j.linger()
		j.flushOnce()
	}
}

// syncGather bounds how long a batch with sync commits waits for the
// callers the last write released: they come straight back with their next
// commit, and a batch that waits for them shares one fsync among twice as
// many. A lone caller never waits.
const syncGather = 800 * time.Microsecond

// linger waits before a write so that commits share it. A queue of async
// commits waits up to FlushInterval after the oldest arrived. A queue with
// sync commits waits only while the callers released by the last write are
// still coming back, and at most syncGather. A full batch or Close ends
// any wait.
func (j *DB) linger() {
	for {
		j.mu.Lock()
		n, syncs, expect, from, flushed := len(j.queue), j.syncs, j.expect, j.queueFrom, j.flushedAt
		j.mu.Unlock()
		if n == 0 || n >= maxBatch {
			return
		}
		var wait time.Duration
		if syncs > 0 {
			if syncs >= expect {
				return
			}
			wait = syncGather - time.Since(flushed)
		} else {
			wait = j.opts.FlushInterval - time.Since(from)
		}
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			return
		case <-j.kick:
			t.Stop()
		case <-j.quit:
			t.Stop()
			return
		}
	}
}

// flushOnce writes the queue in one transaction and tells its waiters.
func (j *DB) flushOnce() {
	j.mu.Lock()
	batch, f, released := j.queue, j.cur, j.syncs
	j.queue, j.spare, j.syncs = j.spare[:0], nil, 0
	j.cur = &flush{done: make(chan struct{})}
	failed := j.failed
	j.mu.Unlock()
	defer close(f.done)
	if len(batch) == 0 {
		return
	}
	err := failed
	var took time.Duration
	var pruned, anchor uint64
	if err == nil {
		t0 := time.Now()
		err = j.update(func(tx *bolt.Tx) error {
			var err error
			pruned, anchor, err = j.writeBatch(tx, batch)
			return err
		})
		took = time.Since(t0)
	}
	first, last := batch[0].ev.Seq, batch[len(batch)-1].ev.Seq
	j.mu.Lock()
	defer j.mu.Unlock()
	defer func() {
		// Hand the array back for a later queue, holding no entries.
		clear(batch)
		if cap(batch) <= 2*maxBatch {
			j.spare = batch[:0]
		}
	}()
	j.expect, j.flushedAt = released+j.syncs, time.Now()
	if err != nil {
		if j.failed == nil {
			j.failed = fmt.Errorf("%w: writing events %d to %d to %s: %w", ErrFailed, first, last, j.path, err)
			j.log.Error("journal write failed; actuations are refused until a restart", "path", j.path, "error", err)
		}
		f.err = j.failed
		// What was never written must not be served as if it were.
		for len(j.ring) > 0 && j.ring[len(j.ring)-1].Seq > j.committed {
			j.ring = j.ring[:len(j.ring)-1]
		}
		return
	}
	j.committed = last
	if j.opts.OnCommit != nil {
		j.opts.OnCommit(took, len(batch))
	}
	if j.notify != nil {
		j.notify(last)
	}
	j.stats.Batches++
	j.stats.Events += uint64(len(batch))
	j.stats.CommitTime += took
	j.stats.LastCommit = took
	j.stats.MaxCommit = max(j.stats.MaxCommit, took)
	j.stats.PrunedEvents += pruned
	if pruned > 0 {
		// What retention deleted is gone from memory too.
		n := 0
		for n < len(j.ring) && j.ring[n].Seq <= anchor {
			n++
		}
		j.dropRingLocked(n)
	}
	for _, it := range batch {
		if it.terminal != "" {
			if cur, ok := j.open[it.terminal]; ok && cur.State == it.state {
				delete(j.open, it.terminal)
			}
		}
	}
	if extra := len(j.ring) - ringMin; extra > ringMin/4 {
		// Trim written events only, a quarter at a time, in place.
		n := 0
		for n < extra && j.ring[n].Seq <= j.committed {
			n++
		}
		j.dropRingLocked(n)
	}
}

// dropRingLocked drops the oldest n events from memory, keeping the array.
// j.mu must be held.
func (j *DB) dropRingLocked(n int) {
	k := copy(j.ring, j.ring[n:])
	clear(j.ring[k:])
	j.ring = j.ring[:k]
}

// writeBatch stores a batch of events and their records, then prunes the
// oldest events beyond the retention bounds, returning how many and the
// newest it deleted.
func (j *DB) writeBatch(tx *bolt.Tx, batch []item) (uint64, uint64, error) {
	jb := tx.Bucket(bJournal)
	jb.FillPercent = 1 // keys only ever grow: pack the pages full
	meta := tx.Bucket(bMeta)
	var added int64
	for i := range batch {
		it := &batch[i]
		if err := jb.Put(seqKey(it.ev.Seq), it.value); err != nil {
			return 0, 0, fmt.Errorf("event %d: %w", it.ev.Seq, err)
		}
		added += int64(len(it.value))
		for _, r := range it.records {
			if err := tx.Bucket(r.bucket).Put(r.key, r.value); err != nil {
				return 0, 0, fmt.Errorf("records of event %d: %w", it.ev.Seq, err)
			}
		}
	}
	last := batch[len(batch)-1]
	if err := meta.Put(kHead, link{Seq: last.ev.Seq, Hash: last.hash}.encode()); err != nil {
		return 0, 0, err
	}
	total := int64(0)
	if v := meta.Get(kBytes); len(v) == 8 {
		total = int64(binary.BigEndian.Uint64(v))
	}
	total, pruned, anchor, err := j.pruneEvents(tx, total+added)
	if err != nil {
		return 0, 0, err
	}
	return pruned, anchor, meta.Put(kBytes, binary.BigEndian.AppendUint64(nil, uint64(total)))
}

// record is one put of a record into its bucket.
type record struct {
	bucket, key, value []byte
}

// encodeRecords encodes the records an entry carries, as the caller holds
// them now.
func encodeRecords(e *runtime.Entry) ([]record, error) {
	var out []record
	put := func(bucket []byte, key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out = append(out, record{bucket: bucket, key: []byte(key), value: b})
		return nil
	}
	var errs []error
	if a := e.Attempt; a != nil {
		errs = append(errs, put(bEffects, a.Key, a))
	}
	if a := e.Approval; a != nil {
		errs = append(errs, put(bApprovals, a.ID, a))
	}
	if r := e.Rule; r != nil {
		errs = append(errs, put(bRules, r.Rule.ID, r))
	}
	if r := e.Run; r != nil {
		errs = append(errs, put(bRuns, r.ID, r))
	}
	if m := e.Mode; m != nil {
		errs = append(errs, put(bState, string(kMode), m))
	}
	if st := e.State; st != nil {
		name := st.Device + "." + st.Capability
		if st.Reading != nil {
			errs = append(errs, put(bState, "reading/"+name, st.Reading))
		}
		if st.Receipt != nil {
			errs = append(errs, put(bState, "receipt/"+name, st.Receipt))
		}
	}
	return out, errors.Join(errs...)
}

// pruneEvents deletes the oldest events while the journal holds more than
// MaxEvents or MaxBytes, down to nine tenths of each so that pruning is not
// paid on every commit. The newest event always stays. The last deleted
// becomes the anchor. It returns the bytes left, how many it deleted, and
// the anchor's sequence.
func (j *DB) pruneEvents(tx *bolt.Tx, total int64) (int64, uint64, uint64, error) {
	jb := tx.Bucket(bJournal)
	c := jb.Cursor()
	fk, _ := c.First()
	lk, _ := c.Last()
	if fk == nil {
		return total, 0, 0, nil
	}
	first, last := keySeq(fk), keySeq(lk)
	count := int64(last - first + 1)
	if count <= int64(j.opts.MaxEvents) && total <= j.opts.MaxBytes {
		return total, 0, 0, nil
	}
	wantCount, wantBytes := int64(j.opts.MaxEvents)*9/10, j.opts.MaxBytes*9/10
	var anchor link
	pruned := uint64(0)
	for count > 1 && (count > wantCount || total > wantBytes) {
		k, v := c.First()
		if len(v) < hashSize {
			return total, 0, 0, fmt.Errorf("event %d is too short to prune", keySeq(k))
		}
		anchor.Seq = keySeq(k)
		copy(anchor.Hash[:], v[len(v)-hashSize:])
		total -= int64(len(v))
		if err := c.Delete(); err != nil {
			return total, 0, 0, err
		}
		count--
		pruned++
	}
	if pruned == 0 {
		return total, 0, 0, nil
	}
	return max(total, 0), pruned, anchor.Seq, tx.Bucket(bMeta).Put(kAnchor, anchor.encode())
}

// pruneRecords deletes records that ended before the retention window:
// terminal attempts, answered approvals, ended runs and spent rules.
// Pending approvals, open attempts and the state are never pruned.
func (j *DB) pruneRecords(now time.Time) {
	cutoff := now.Add(-j.opts.KeepRecords)
	var n int
	err := j.update(func(tx *bolt.Tx) error {
		n = 0
		del := func(bucket []byte, old func(v []byte) (bool, error)) error {
			b := tx.Bucket(bucket)
			var keys [][]byte
			err := b.ForEach(func(k, v []byte) error {
				drop, err := old(v)
				if err != nil {
					return fmt.Errorf("%s %s: %w", bucket, k, err)
				}
				if drop {
					keys = append(keys, append([]byte(nil), k...))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			n += len(keys)
			return nil
		}
		return firstErr(
			del(bEffects, func(v []byte) (bool, error) {
				var a runtime.Attempt
				err := json.Unmarshal(v, &a)
				return a.State.Terminal() && a.Updated.Before(cutoff), err
			}),
			del(bApprovals, func(v []byte) (bool, error) {
				var a runtime.Approval
				err := json.Unmarshal(v, &a)
				return a.Status != runtime.ApprovalPending && a.RequestedAt.Before(cutoff), err
			}),
			del(bRuns, func(v []byte) (bool, error) {
				var r runtime.RunRecord
				err := json.Unmarshal(v, &r)
				return r.Status == runtime.RunEnded && r.EndedAt.Before(cutoff), err
			}),
			del(bRules, func(v []byte) (bool, error) {
				var r runtime.RuleRecord
				err := json.Unmarshal(v, &r)
				spent := r.Revoked || (!r.Rule.ExpiresAt.IsZero() && r.Rule.ExpiresAt.Before(cutoff))
				return spent && r.MadeAt.Before(cutoff), err
			}),
		)
	})
	if err != nil {
		// A record that cannot be read is kept, and the journal goes on:
		// retention is housekeeping, not witness.
		j.log.Warn("journal records not pruned", "path", j.path, "error", err)
		return
	}
	if n > 0 {
		j.log.Info("journal records pruned", "path", j.path, "records", n, "older_than", cutoff.Format(time.RFC3339))
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
