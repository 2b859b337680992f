package journal

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
)

// The store (bbolt) follows the log: what the log holds durably is
// written to it in the background, in batches bounded in time and size,
// never on a commit's path. At open it is brought up to date from the log.

// pendingSession is a console session the log holds and the store does
// not yet.
type pendingSession struct {
	seq     uint64
	js      []byte // nil: deleted
	deleted bool
}

// logEntries returns what the log holds of a batch.
func logEntries(batch []item) []logEntry {
	out := make([]logEntry, len(batch))
	for i := range batch {
		it := &batch[i]
		e := logEntry{value: it.value}
		if len(it.records) > 0 {
			e.js = make([][]byte, len(it.records))
			for k, r := range it.records {
				if r.op == opPut {
					e.js[k] = r.js
				}
			}
		}
		if it.prune != nil {
			e.flags |= flagPrune
		}
		out[i] = e
	}
	return out
}

// itemOf rebuilds a queued item from what the log holds of it.
func itemOf(e logEntry) (item, error) {
	d, err := decodeEvent(e.value)
	if err != nil {
		return item{}, err
	}
	if chain(d.canonical, d.prev) != d.hash {
		return item{}, fmt.Errorf("event %d does not match its hash (altered)", d.ev.Seq)
	}
	if len(e.js) != len(d.refs) {
		return item{}, fmt.Errorf("event %d names %d record changes, the log holds %d", d.ev.Seq, len(d.refs), len(e.js))
	}
	it := item{ev: d.ev, value: e.value, hash: d.hash}
	for k, r := range d.refs {
		rec := record{ref: r}
		if r.op == opPut {
			if digestOf(e.js[k]) != r.digest {
				return item{}, fmt.Errorf("event %d: the log's record %s/%s does not match its digest (altered)", d.ev.Seq, r.bucket, r.key)
			}
			rec.js = e.js[k]
		}
		it.records = append(it.records, rec)
	}
	if e.flags&flagPrune != 0 {
		var p pruneIntent
		if err := json.Unmarshal(d.ev.Body, &p); err != nil || p.Through == 0 {
			return item{}, fmt.Errorf("event %d is marked as a prune but names none", d.ev.Seq)
		}
		p.refs = it.records
		it.prune = &p
	}
	return it, nil
}

// replay reads the log and, unless the journal is read-only, writes to the
// store every event the log holds past the store's head, then removes the
// segments. The log must continue the store exactly: events it holds that
// the store holds too must be the same, and the first it holds past the
// store's head must follow it. A read-only open keeps what it found in
// memory, for Events and Verify.
func (j *DB) replay() error {
	ro := j.opts.ReadOnly
	w, sc, err := openWAL(walDir(j.path), j.opts.SegmentSize, !ro)
	if err != nil {
		if ro {
			j.logErr = err
			return nil
		}
		return &CorruptError{Path: j.path, Err: err}
	}
	j.wal = w
	mark, err := j.logMark()
	if err != nil {
		if ro {
			j.logErr = err
			return nil
		}
		return err
	}
	if mark != 0 && !w.holdsFrom(mark) {
		err := &LogError{Segment: segName(mark), Err: errors.New("the store expects the log to go on in this segment or a later one, and the log holds none of them: the gateway stopped without closing its journal and the log was deleted since, or this file is a copy taken without its log (shadowgate journal backup makes one that needs none); what the log held past the store is lost, and a verified backup is the way back")}
		if ro {
			j.logErr = err
			return nil
		}
		return &CorruptError{Path: j.path, Err: err}
	}
	if sc.unstarted != "" {
		j.log.Warn("journal log segment set aside: a crash cut its start short, before anything was written to it", "segment", sc.unstarted)
	}
	if sc.torn != nil {
		if ro {
			j.log.Warn("journal log ends in a torn write, which the next open cuts", "segment", sc.torn.Segment, "offset", sc.torn.Offset, "error", sc.torn.Err)
		} else {
			j.log.Warn("journal log's torn tail cut: a write a crash interrupted, never acknowledged", "segment", sc.torn.Segment, "offset", sc.torn.Offset, "error", sc.torn.Err)
		}
	}
	var items []item
	var held []link // what the log holds that the store holds too
	fail := func(err error) error {
		if ro {
			j.logErr = err
			return nil
		}
		return &CorruptError{Path: j.path, Err: err}
	}
	for _, e := range sc.entries {
		it, err := itemOf(e.logEntry)
		if err != nil {
			return fail(&LogError{Segment: segName(e.seg.index), Err: err})
		}
		seq := it.ev.Seq
		if seq <= j.committed {
			held = append(held, link{Seq: seq, Hash: it.hash})
			continue
		}
		// What both hold is checked before what follows the store.
		if err := j.sameInStore(held); err != nil {
			return fail(err)
		}
		held = nil
		if seq != j.next {
			return fail(fmt.Errorf("the store ends at event %d and the log goes on at %d: events %d to %d are missing (a log segment deleted)", j.committed, seq, j.next, seq-1))
		}
		if it.ev.Prev != j.prevHash.String() {
			return fail(fmt.Errorf("event %d of the log does not follow event %d (re-chained, or the store was replaced)", seq, seq-1))
		}
		items = append(items, it)
		j.next, j.prevHash, j.committed, j.committedHash = seq+1, it.hash, seq, it.hash
	}
	if err := j.sameInStore(held); err != nil {
		return fail(err)
	}
	if ro {
		for i := range items {
			j.ring = append(j.ring, items[i].ev)
		}
		return nil
	}
	for len(items) > 0 {
		n := min(len(items), maxBatch)
		err := j.update(func(tx *bolt.Tx) error {
			_, _, err := j.writeBatch(tx, items[:n])
			if err == nil {
				err = failpoint.Inject(failpoint.JournalStoreBatch)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("bringing the store up to date from the log: %w", err)
		}
		j.log.Info("journal store brought up to date from the log", "events", n, "through", items[n-1].ev.Seq)
		items = items[n:]
	}
	j.pruneNext = nil // chosen again at the next write
	j.applied = j.committed
	// The store holds the whole log: it no longer expects it, and then
	// it goes. startLog starts the next.
	if mark != 0 {
		if err := j.setLogMark(0); err != nil {
			return err
		}
	}
	if _, err := w.removeThrough(j.applied, true); err != nil {
		j.log.Warn("journal log segments not removed", "error", err)
	}
	return nil
}

// sameInStore checks that the events the log and the store both hold are
// the same in both; the store may have pruned some since.
func (j *DB) sameInStore(held []link) error {
	if len(held) == 0 {
		return nil
	}
	return j.view(func(tx *bolt.Tx) error {
		h := newHistory(tx)
		for _, l := range held {
			v, err := h.get(l.Seq)
			if err != nil {
				return fmt.Errorf("the log and the store disagree at event %d: the store's %w", l.Seq, err)
			}
			if v == nil {
				continue
			}
			if d, err := decodeEvent(v); err != nil || d.hash != l.Hash {
				return fmt.Errorf("the log and the store disagree at event %d", l.Seq)
			}
		}
		return nil
	})
}

// kLog, in the meta bucket, is the index of the log segment a running
// gateway started its log with. While it is set, the log holds that
// segment or a later one: a start that finds none of them fails closed,
// where it would otherwise lose, without a word, what a deleted log held
// past the store. It is set once the segment's header is durable, before
// anything is written to it, and cleared once the store holds the whole
// log, before the log is removed: at a clean stop, and at a start.
var kLog = []byte("log")

// logMark returns kLog, 0 if it is not set.
func (j *DB) logMark() (uint64, error) {
	var mark uint64
	err := j.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m == nil {
			return nil // a file whose first open stopped before it was made
		}
		v := m.Get(kLog)
		switch {
		case v == nil:
		case len(v) != 8:
			return &CorruptError{Path: j.path, Err: fmt.Errorf("meta/log is %d bytes, not 8", len(v))}
		default:
			mark = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return mark, err
}

// setLogMark sets kLog, or clears it with 0, durably.
func (j *DB) setLogMark(index uint64) error {
	err := j.update(func(tx *bolt.Tx) error {
		if index == 0 {
			return tx.Bucket(bMeta).Delete(kLog)
		}
		return tx.Bucket(bMeta).Put(kLog, binary.BigEndian.AppendUint64(nil, index))
	})
	if err != nil {
		return fmt.Errorf("noting the journal's log in its store: %w", err)
	}
	return nil
}

// startLog starts the log's first segment at open, and notes it in the
// store before anything is written to it.
func (j *DB) startLog() error {
	j.walMu.Lock()
	defer j.walMu.Unlock()
	if err := j.wal.roll(j.next); err != nil {
		return fmt.Errorf("opening the journal's log: %w", err)
	}
	return j.setLogMark(j.wal.top)
}

// storeWriter is the store's only writing goroutine: it writes what the
// log holds to the store when StoreInterval has passed since the oldest
// waiting event, when StoreEvents or StoreBytes wait, when asked (a
// backup, a verify), and at Close, after the log's writer has stopped.
func (j *DB) storeWriter() {
	defer close(j.storeDone)
	for {
		j.mu.Lock()
		n, size, from, force := len(j.unapplied), j.unappliedBytes, j.unappliedFrom, j.storeForce
		if j.failed != nil {
			n = 0 // nothing more is written: wait for Close
		}
		j.mu.Unlock()
		wait := time.Duration(-1)
		if n > 0 && !force && n < j.opts.StoreEvents && size < j.opts.StoreBytes {
			wait = j.opts.StoreInterval - time.Since(from)
		}
		if n > 0 && wait <= 0 {
			j.applyStore()
			continue
		}
		var tc <-chan time.Time
		var t *time.Timer
		if n > 0 {
			t = time.NewTimer(wait)
			tc = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-j.storeKick:
			stop()
		case <-tc:
		case <-j.storeQuit:
			stop()
			if j.crashForTest {
				return // as a power cut leaves it: the store behind the log
			}
			j.applyStore()
			j.walMu.Lock()
			defer j.walMu.Unlock()
			j.mu.Lock()
			clean := j.failed == nil && len(j.unapplied) == 0
			applied := j.applied
			j.mu.Unlock()
			if !clean {
				return
			}
			// The store holds the whole log: it no longer expects it,
			// and then it goes.
			if err := j.setLogMark(0); err != nil {
				j.log.Warn("journal log kept: the store could not be told it holds it all", "error", err)
				return
			}
			if _, err := j.wal.removeThrough(applied, true); err != nil {
				j.log.Warn("journal log segments not removed", "error", err)
			}
			return
		}
	}
}

// kickStore wakes the store's writer.
func (j *DB) kickStore() {
	select {
	case j.storeKick <- struct{}{}:
	default:
	}
}

// applyStore writes what waits to the store in one transaction, then
// removes the log segments the store now holds.
func (j *DB) applyStore() {
	j.mu.Lock()
	batch := j.unapplied
	failed := j.failed != nil && !errors.Is(j.failed, ErrFailed)
	j.storeForce = false
	j.mu.Unlock()
	if len(batch) == 0 || failed {
		j.tickStore()
		return
	}
	var pruned, anchor uint64
	err := j.update(func(tx *bolt.Tx) error {
		var err error
		pruned, anchor, err = j.writeBatch(tx, batch)
		if err == nil {
			err = failpoint.Inject(failpoint.JournalStoreBatch)
		}
		return err
	})
	last := batch[len(batch)-1].ev.Seq
	j.mu.Lock()
	if err != nil {
		if j.failed == nil {
			j.failed = &WriteError{First: batch[0].ev.Seq, Last: last, Path: j.path, Err: fmt.Errorf("writing the store: %w", err)}
			j.log.Error("journal store write failed; actuations are refused until a restart", "path", j.path, "error", err)
		}
		j.mu.Unlock()
		j.tickStore()
		return
	}
	rest := j.unapplied[len(batch):]
	j.unapplied = append(make([]item, 0, len(rest)), rest...)
	j.unappliedBytes = 0
	for i := range j.unapplied {
		j.unappliedBytes += len(j.unapplied[i].value)
	}
	j.unappliedFrom = time.Now()
	j.applied = last
	j.stats.StoreBatches++
	if j.pruneSeq != 0 && last >= j.pruneSeq {
		j.pruneSeq = 0 // done: the next write looks again
	}
	j.queuePruneLocked()
	j.stats.PrunedEvents += pruned
	if pruned > 0 {
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
	for k, p := range j.sessionsPending {
		if p.seq <= last {
			delete(j.sessionsPending, k)
		}
	}
	j.trimRingLocked()
	j.mu.Unlock()
	j.log.Debug("journal store written", "events", len(batch), "through", last)
	j.walMu.Lock()
	_, rerr := j.wal.removeThrough(last, false)
	j.walMu.Unlock()
	if rerr != nil {
		j.log.Warn("journal log segments not removed; they are removed at a later write", "error", rerr)
	}
	j.tickStore()
}

// tickStore tells those waiting for the store that it wrote, or that it
// will not: the journal failed.
func (j *DB) tickStore() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.tickStoreLocked()
}

func (j *DB) tickStoreLocked() {
	close(j.storeTick)
	j.storeTick = make(chan struct{})
}

// syncStore has the store written up to every event durable now and
// waits for it, or for ctx. A journal that failed returns its error.
func (j *DB) syncStore(ctx context.Context) error {
	return j.storeUpTo(ctx, true)
}

// storeUpTo has the store written up to every event durable now, and with
// queued also every event queued now (written at once), and waits for it.
func (j *DB) storeUpTo(ctx context.Context, queued bool) error {
	if j.opts.ReadOnly {
		return nil
	}
	j.mu.Lock()
	want := j.committed
	if queued {
		want = j.next - 1
	}
	j.mu.Unlock()
	for {
		j.mu.Lock()
		done, tick, failed := j.applied >= want, j.storeTick, j.failed
		closed := j.closed
		if !done {
			j.storeForce = true
			j.flushForce = len(j.queue) > 0
		}
		j.mu.Unlock()
		if done {
			return nil
		}
		if failed != nil {
			return failed
		}
		if closed {
			return runtime.ErrJournalClosed
		}
		select {
		case j.kick <- struct{}{}:
		default:
		}
		j.kickStore()
		select {
		case <-tick:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// noteDurableLocked takes a batch the log now holds: it waits for the
// store from here, and the sessions it changes are served from memory
// until the store has them. j.mu must be held.
func (j *DB) noteDurableLocked(batch []item) {
	if len(j.unapplied) == 0 {
		// The store's writer, idle with nothing to write, starts the
		// interval from here.
		j.unappliedFrom = time.Now()
		defer j.kickStore()
	}
	j.unapplied = append(j.unapplied, batch...)
	for i := range batch {
		j.unappliedBytes += len(batch[i].value)
		for _, r := range batch[i].records {
			if r.bucket != string(bSessions) {
				continue
			}
			switch r.op {
			case opPut:
				j.sessionsPending[r.key] = pendingSession{seq: batch[i].ev.Seq, js: r.js}
			case opDelete:
				j.sessionsPending[r.key] = pendingSession{seq: batch[i].ev.Seq, deleted: true}
			case opDeleteIf:
				if p, ok := j.sessionsPending[r.key]; !ok || (!p.deleted && digestOf(p.js) == r.digest) {
					j.sessionsPending[r.key] = pendingSession{seq: batch[i].ev.Seq, deleted: true}
				}
			}
		}
	}
	if j.storeForce || len(j.unapplied) >= j.opts.StoreEvents || j.unappliedBytes >= j.opts.StoreBytes {
		j.kickStore()
	}
}

// trimRingLocked drops the oldest events from memory once the ring is a
// quarter over either bound, down to both, keeping every event the store
// does not hold. j.mu must be held.
func (j *DB) trimRingLocked() {
	if len(j.ring)-ringMin > ringMin/4 || j.ringSize-ringBytes > ringBytes/4 {
		n, size := 0, j.ringSize
		for n < len(j.ring) && (len(j.ring)-n > ringMin || size > ringBytes) && j.ring[n].Seq <= j.applied {
			size -= ringCost(&j.ring[n])
			n++
		}
		j.dropRingLocked(n)
	}
}
