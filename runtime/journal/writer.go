package journal

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// maxBatch bounds one transaction; a fuller queue is written at once.
const maxBatch = 16384

// writer is the journal's only writing goroutine. It gathers commits into
// batches, one transaction and one fsync each, until Close.
func (j *DB) writer() {
	defer close(j.writerDone)
	select {
	case <-j.verified:
	case <-j.quit:
		j.flushOnce()
		return
	}
	for {
		select {
		case <-j.kick:
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

// promptGather is how long a queue with prompt commits and no sync one
// waits before its write, for the commits that come with it (the events of
// one refused command, a burst of refused logins).
const promptGather = 20 * time.Millisecond

// linger waits before a write so that commits share it. A queue of async
// commits waits up to FlushInterval after the oldest arrived, one with a
// prompt commit up to promptGather. A queue with sync commits waits only
// while the callers released by the last write are still coming back, and
// at most syncGather. A full batch or Close ends any wait.
func (j *DB) linger() {
	for {
		j.mu.Lock()
		n, syncs, prompts, expect, from, flushed, force := len(j.queue), j.syncs, j.prompts, j.expect, j.queueFrom, j.flushedAt, j.flushForce
		j.flushForce = false
		j.mu.Unlock()
		if n == 0 || n >= maxBatch || force {
			return
		}
		var wait time.Duration
		switch {
		case syncs > 0:
			if syncs >= expect {
				return
			}
			wait = syncGather - time.Since(flushed)
		case prompts > 0:
			// Nobody waits on it: a moment for what comes with it.
			wait = promptGather - time.Since(from)
		default:
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

// flushOnce writes the queue to the log as one frame with one fdatasync,
// and tells its waiters. The store is written later, by storeWriter.
func (j *DB) flushOnce() {
	j.mu.Lock()
	batch, f, released := j.queue, j.cur, j.syncs
	waited := j.syncs > 0 || j.prompts > 0
	j.queue, j.syncs, j.prompts = nil, 0, 0
	j.cur = &flush{done: make(chan struct{})}
	failed := j.failed
	j.mu.Unlock()
	defer close(f.done)
	if len(batch) == 0 {
		return
	}
	err := failed
	var took time.Duration
	if err == nil {
		t0 := time.Now()
		err = failpoint.Inject(failpoint.JournalBeforeWrite)
		if err == nil {
			ents := logEntries(batch)
			j.walMu.Lock()
			err = j.wal.append(batch[0].ev.Seq, ents, waited)
			j.walMu.Unlock()
		}
		took = time.Since(t0)
		if err == nil {
			// The frame is durable; the store does not hold it yet.
			err = failpoint.Inject(failpoint.JournalAfterWrite)
		}
	}
	first, last := batch[0].ev.Seq, batch[len(batch)-1].ev.Seq
	j.mu.Lock()
	defer j.mu.Unlock()
	j.expect, j.flushedAt = released+j.syncs, time.Now()
	if err != nil {
		if j.failed == nil {
			j.failed = &WriteError{First: first, Last: last, Path: j.path, Err: err}
			j.log.Error("journal write failed; actuations are refused until a restart", "path", j.path, "error", err)
		}
		j.tickStoreLocked() // who waits for the store learns it will not be written
		f.err = j.failed
		// What was never written must not be served as if it were.
		for len(j.ring) > 0 && j.ring[len(j.ring)-1].Seq > j.committed {
			j.ringSize -= ringCost(&j.ring[len(j.ring)-1])
			j.ring[len(j.ring)-1] = runtime.Event{}
			j.ring = j.ring[:len(j.ring)-1]
		}
		return
	}
	j.committed = last
	j.committedHash = batch[len(batch)-1].hash
	j.noteDurableLocked(batch)
	if j.opts.Checkpoint.Signer != nil && last-j.lastCheckpointSize >= j.opts.Checkpoint.Every {
		select {
		case j.ckKick <- struct{}{}:
		default:
		}
	}
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
	j.trimRingLocked()
}

// dropRingLocked drops the oldest n events from memory, keeping the array.
// j.mu must be held.
func (j *DB) dropRingLocked(n int) {
	for i := range n {
		j.ringSize -= ringCost(&j.ring[i])
	}
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
	values := make([][]byte, len(batch))
	for i := range batch {
		values[i] = batch[i].value
		added += int64(len(batch[i].value))
	}
	if err := putBlocks(jb, batch[0].ev.Seq, values); err != nil {
		return 0, 0, err
	}
	for i := range batch {
		it := &batch[i]
		for _, r := range it.records {
			if err := applyRecord(tx, it.ev.Seq, r); err != nil {
				return 0, 0, fmt.Errorf("records of event %d: %w", it.ev.Seq, err)
			}
		}
	}
	last := batch[len(batch)-1]
	if err := meta.Put(kHead, link{Seq: last.ev.Seq, Hash: last.hash}.encode()); err != nil {
		return 0, 0, err
	}
	if err := meta.Put(kIndexed, binary.BigEndian.AppendUint64(nil, last.ev.Seq)); err != nil {
		return 0, 0, err
	}
	total := int64(0)
	if v := meta.Get(kBytes); len(v) == 8 {
		total = int64(binary.BigEndian.Uint64(v))
	}
	total += added
	var pruned, anchor uint64
	for i := range batch {
		if p := batch[i].prune; p != nil {
			n, freed, err := pruneThrough(tx, p)
			if err != nil {
				return 0, 0, err
			}
			pruned, anchor, total = pruned+n, p.Through, total-freed
		}
	}
	if j.pruneSeq == 0 && j.pruneNext == nil {
		p, err := j.pruneDue(tx, max(total, 0))
		if err != nil {
			return 0, 0, err
		}
		j.pruneNext = p
	}
	return pruned, anchor, meta.Put(kBytes, binary.BigEndian.AppendUint64(nil, uint64(max(total, 0))))
}

// record is one change of a record, as an event witnesses it (ref) and
// the writer applies it: js is the record's JSON for opPut.
type record struct {
	ref
	js []byte
	// facts are the indexes' facts of an opPut's record, from its typed
	// value; nil: read from js.
	facts *indexFacts
}

func (r record) bucketName() []byte { return []byte(r.bucket) }

// applyRecord makes the change r of the event seq in its bucket. The
// conditional operations act only if the stored record still has the
// digest they were chosen with; fold mirrors this exactly.
func applyRecord(tx *bolt.Tx, seq uint64, r record) error {
	b := tx.Bucket(r.bucketName())
	if b == nil {
		return fmt.Errorf("no bucket %q", r.bucket)
	}
	key := []byte(r.key)
	v := b.Get(key)
	switch r.op {
	case opPut:
		facts := r.facts
		if facts == nil {
			f, _ := factsOf(r.bucketName(), r.js)
			facts = &f
		}
		if err := indexChange(tx, r.bucketName(), key, facts); err != nil {
			return err
		}
		return b.Put(key, wrapRecord(seq, r.js))
	case opDelete:
		if v == nil {
			return nil
		}
		if err := indexChange(tx, r.bucketName(), key, nil); err != nil {
			return err
		}
		return b.Delete(key)
	}
	if v == nil {
		return nil
	}
	_, js, err := unwrapRecord(v)
	if err != nil || digestOf(js) != r.digest {
		return nil // changed since it was chosen: left as it is
	}
	if r.op == opDeleteIf {
		if err := indexChange(tx, r.bucketName(), key, nil); err != nil {
			return err
		}
		return b.Delete(key)
	}
	return b.Put(key, wrapRecord(seq, append([]byte(nil), js...)))
}

// refsOf returns what an event witnesses of its records.
func refsOf(rs []record) []ref {
	if len(rs) == 0 {
		return nil
	}
	out := make([]ref, len(rs))
	for i, r := range rs {
		out[i] = r.ref
	}
	return out
}

// encodeRecords encodes the records an entry carries, as the caller holds
// them now.
func encodeRecords(e *runtime.Entry) ([]record, error) {
	var out []record
	put := func(bucket []byte, key string, v any, facts *indexFacts) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out = append(out, record{ref: ref{bucket: string(bucket), key: key, op: opPut, digest: digestOf(b)}, js: b, facts: facts})
		return nil
	}
	var errs []error
	if a := e.Attempt; a != nil {
		f := attemptFacts(a.State, a.Updated)
		errs = append(errs, put(bEffects, a.Key, a, &f))
	}
	if a := e.Approval; a != nil {
		f := approvalFacts(a.Status, a.RequestedAt)
		errs = append(errs, put(bApprovals, a.ID, a, &f))
	}
	if r := e.Rule; r != nil {
		f := ruleFacts(r)
		errs = append(errs, put(bRules, r.Rule.ID, r, &f))
	}
	if r := e.Run; r != nil {
		f := runFacts(r.Status, r.Plan, r.RequestID, r.EndedAt)
		errs = append(errs, put(bRuns, r.ID, r, &f))
	}
	if m := e.Mode; m != nil {
		errs = append(errs, put(bState, string(kMode), m, nil))
	}
	if a := e.Alarm; a != nil {
		errs = append(errs, put(bState, "alarm/"+a.ID, a, nil))
	}
	if st := e.State; st != nil {
		name := st.Device + "." + st.Capability
		if st.Reading != nil {
			errs = append(errs, put(bState, "reading/"+name, st.Reading, nil))
		}
		if st.Receipt != nil {
			errs = append(errs, put(bState, "receipt/"+name, st.Receipt, nil))
		}
	}
	return out, errors.Join(errs...)
}

// pruneChunk bounds the events one prune deletes, so that no transaction
// that also carries actuation records grows with history.
const pruneChunk = 4096

// pruneIntent is a prune on its way: the events up to Through (whose hash
// is Hash) are deleted, and the live records they back are carried, by the
// event that carries it.
type pruneIntent struct {
	Through uint64 `json:"prune_through"`
	Hash    string `json:"hash"`
	Carried int    `json:"carried"`
	refs    []record
}

// pruneDue decides whether the journal holds more than MaxEvents or
// MaxBytes and, if so, returns the prune of the oldest events down towards
// nine tenths of each, at most pruneChunk at a time, with the live records
// those events back (see live), to be carried by the prune's own event.
// The newest event always stays. It runs on the writer only.
func (j *DB) pruneDue(tx *bolt.Tx, total int64) (*pruneIntent, error) {
	h := newHistory(tx)
	first, _, err := h.first()
	if err != nil || first == 0 {
		return nil, err
	}
	last, _, err := h.last()
	if err != nil {
		return nil, err
	}
	count := int64(last - first + 1)
	if count <= int64(j.opts.MaxEvents) && total <= j.opts.MaxBytes {
		return nil, nil
	}
	wantCount, wantBytes := int64(j.opts.MaxEvents)*9/10, j.opts.MaxBytes*9/10
	var p *pruneIntent
	left, n, taken := total, count, 0
	seq, v, err := h.first()
	for ; err == nil && v != nil && n > 1 && taken < pruneChunk && (n > wantCount || left > wantBytes); seq, v, err = h.next() {
		if len(v) < 1+2*hashSize {
			return nil, fmt.Errorf("event %d is too short to prune", seq)
		}
		if p == nil {
			p = &pruneIntent{}
		}
		p.Through, p.Hash = seq, hex.EncodeToString(v[len(v)-hashSize:])
		left, n, taken = left-int64(len(v)), n-1, taken+1
	}
	if err != nil {
		return nil, fmt.Errorf("choosing what to prune: %w", err)
	}
	if p == nil {
		return nil, nil
	}
	now := time.Now()
	carry := func(bucket, k, v []byte) error {
		seq, js, err := unwrapRecord(v)
		if err != nil || seq > p.Through || !live(string(bucket), js, now) {
			return nil // verify names what cannot be read; history stays as it is
		}
		p.refs = append(p.refs, record{ref: ref{bucket: string(bucket), key: string(k), op: opCarry, digest: digestOf(js)}})
		return nil
	}
	st := tx.Bucket(bStarting)
	for _, bucket := range recordBuckets {
		b := tx.Bucket(bucket)
		if !indexed(bucket) {
			if err := b.ForEach(func(k, v []byte) error { return carry(bucket, k, v) }); err != nil {
				return nil, err
			}
			continue
		}
		// What is live is among what a start loads: the index names it,
		// and the finished history is not walked.
		eachStarting(st, b, bucket, func(k, v []byte) {
			if v != nil {
				_ = carry(bucket, k, v)
			}
		})
	}
	p.Carried = len(p.refs)
	return p, nil
}

// queuePruneLocked queues the event of the prune pruneDue found. j.mu must
// be held; it runs on the writer only.
func (j *DB) queuePruneLocked() {
	p := j.pruneNext
	if p == nil || j.pruneSeq != 0 {
		return
	}
	j.pruneNext = nil
	body, err := json.Marshal(p)
	if err != nil {
		return
	}
	ev, _, err := j.enqueueLocked(runtime.Event{Kind: KindRecords, Body: body}, p.refs, nil, false)
	if err != nil {
		return // failed: nothing more is written anyway
	}
	j.queue[len(j.queue)-1].prune = p
	j.pruneSeq = ev.Seq
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// pruneThrough deletes the events up to p.Through, after the event that
// names p has carried the live records they backed, and makes the last one
// the anchor. It returns how many it deleted and their bytes.
func pruneThrough(tx *bolt.Tx, p *pruneIntent) (uint64, int64, error) {
	jb := tx.Bucket(bJournal)
	var keys [][]byte
	var freed int64
	var anchor link
	var count uint64
	var rest []storedEvent // what a block cut in two keeps
	c := jb.Cursor()
	for k, v := c.First(); k != nil && keySeq(k) <= p.Through; k, v = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
		evs := []storedEvent{{seq: keySeq(k), value: v}}
		if isBlock(v) {
			var err error
			if evs, err = decodeBlock(keySeq(k), v); err != nil {
				return 0, 0, fmt.Errorf("pruning through event %d: the block of events from %d: %w", p.Through, keySeq(k), err)
			}
		}
		for i, e := range evs {
			if e.seq > p.Through {
				rest = evs[i:]
				break
			}
			if len(e.value) < 1+2*hashSize {
				return 0, 0, fmt.Errorf("pruning through event %d: event %d is too short", p.Through, e.seq)
			}
			freed += int64(len(e.value))
			count++
			anchor.Seq = e.seq
			copy(anchor.Hash[:], e.value[len(e.value)-hashSize:])
		}
	}
	if len(keys) == 0 {
		return 0, 0, nil
	}
	if anchor.Seq != p.Through || anchor.Hash.String() != p.Hash {
		return 0, 0, fmt.Errorf("pruning through event %d: the journal's oldest events changed since the prune was chosen", p.Through)
	}
	for _, k := range keys {
		if err := jb.Delete(k); err != nil {
			return 0, 0, err
		}
	}
	if len(rest) > 0 {
		values := make([][]byte, len(rest))
		for i := range rest {
			values[i] = rest[i].value
		}
		if err := putBlocks(jb, rest[0].seq, values); err != nil {
			return 0, 0, fmt.Errorf("pruning through event %d: keeping the rest of its block: %w", p.Through, err)
		}
	}
	if err := failpoint.Inject(failpoint.JournalPruneEvents); err != nil {
		return 0, 0, err
	}
	return count, freed, tx.Bucket(bMeta).Put(kAnchor, anchor.encode())
}

// pruneRecordsChunk bounds the records one retention event deletes, so
// that an append waits for at most one small batch of deletions, and
// pruneRecordsRest is how many times a chunk's write the pruner waits
// before the next: retention takes at most a ninth of the writer's time,
// and an append issued while records are pruned mostly finds the writer
// free.
const (
	pruneRecordsChunk = 128
	pruneRecordsRest  = 8
)

// retention prunes records at start, once the chain is verified, and then
// every minute or so, until ctx ends. It runs in j.bg, beside the writer:
// its reads do not hold the writer up, and each chunk it deletes is one
// small event.
func (j *DB) retention(ctx context.Context) {
	select {
	case <-j.verified:
	case <-ctx.Done():
		return
	}
	// A pass reads only what it deletes (the ended index, oldest first),
	// so it runs often: every minute, or every tenth of KeepRecords if
	// that is shorter.
	t := time.NewTicker(min(max(j.opts.KeepRecords/10, time.Second), time.Minute))
	defer t.Stop()
	for {
		j.pruneRecordsCtx(ctx, time.Now())
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// pruneRecords is one pass of pruneRecordsCtx, with the store brought up
// to the log before and after, until the journal closes.
func (j *DB) pruneRecords(now time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() { _ = j.syncStore(ctx) }()
	_ = j.syncStore(ctx)
	go func() {
		select {
		case <-j.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	j.pruneRecordsCtx(ctx, now)
}

// pruneRecordsCtx deletes records that ended before the retention window:
// terminal attempts, answered approvals, ended runs and spent rules, and
// sessions that expired. Pending approvals, open attempts and the state are
// never pruned. It walks the ended index from the oldest, at most
// pruneRecordsChunk records an event, each chosen in a read that holds no
// writer up and deleted by an event like any other change (so that verify
// can tell them from a record removed behind the journal's back), waiting
// for that event to be written before it chooses the next.
func (j *DB) pruneRecordsCtx(ctx context.Context, now time.Time) {
	cutoff := now.Add(-j.opts.KeepRecords)
	j.mu.Lock()
	behind := j.applied < j.lastRetention
	j.mu.Unlock()
	if behind {
		// The store does not hold the last pass's deletions yet: choosing
		// from it now would choose them again.
		return
	}
	var resume []byte // the next key of the ended index to look at
	sessions, total, excess := true, 0, -1
	for ctx.Err() == nil {
		var refs []record
		done := false
		err := j.view(func(tx *bolt.Tx) error {
			if sessions {
				// Sessions are few (one per login within its lifetime):
				// they are looked at all, once.
				old := recordEnded(bSessions, cutoff, now)
				_ = tx.Bucket(bSessions).ForEach(func(k, v []byte) error {
					if _, js, err := unwrapRecord(v); err == nil && old(js) {
						refs = append(refs, record{ref: ref{bucket: string(bSessions), key: string(k), op: opDeleteIf, digest: digestOf(js)}})
					}
					return nil // a record that cannot be read is kept for verify to name
				})
			}
			en := tx.Bucket(bEnded)
			if en == nil {
				done = true
				return nil
			}
			if excess < 0 {
				// Beyond MaxRecords, the oldest ended records go
				// first, though younger than KeepRecords.
				excess = max(en.Stats().KeyN-j.opts.MaxRecords, 0)
			}
			c := en.Cursor()
			k, _ := c.First()
			if resume != nil {
				k, _ = c.Seek(resume)
			}
			for ; k != nil && len(refs) < pruneRecordsChunk; k, _ = c.Next() {
				if len(k) < 8 {
					continue
				}
				at := time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))
				limit := cutoff
				if excess > 0 {
					limit = now // ended, whenever that was
				}
				if !at.Before(limit) {
					done = true
					return nil
				}
				bucket, key, ok := splitIndexKey(k[8:])
				if !ok || tx.Bucket(bucket) == nil {
					continue
				}
				v := tx.Bucket(bucket).Get(key)
				if v == nil {
					continue
				}
				_, js, err := unwrapRecord(v)
				if old := recordEnded(bucket, limit, now); err != nil || old == nil || !old(js) {
					continue // the record says otherwise: it is kept
				}
				refs = append(refs, record{ref: ref{bucket: string(bucket), key: string(key), op: opDeleteIf, digest: digestOf(js)}})
				excess--
			}
			if k == nil {
				done = true
			} else {
				resume = append([]byte(nil), k...)
			}
			return nil
		})
		sessions = false
		if err == nil && len(refs) > 0 {
			err = failpoint.Inject(failpoint.JournalPruneRecords)
		}
		if err != nil {
			j.log.Warn("journal records not pruned", "path", j.path, "error", err)
			return
		}
		if len(refs) > 0 {
			t0 := time.Now()
			if err := j.deleteRecords(ctx, refs, cutoff); err != nil {
				j.log.Warn("journal records not pruned", "path", j.path, "error", err)
				return
			}
			total += len(refs)
			if !done {
				rest := time.NewTimer(pruneRecordsRest * time.Since(t0))
				select {
				case <-rest.C:
				case <-ctx.Done():
					rest.Stop()
				}
			}
		}
		if done {
			break
		}
	}
	if total > 0 {
		// A pass every minute: what it deleted is in its events.
		j.log.Debug("journal records pruned", "path", j.path, "records", total, "older_than", cutoff.Format(time.RFC3339))
	}
}

// deleteRecords writes one retention event deleting refs, and waits until
// it is written or ctx ends.
func (j *DB) deleteRecords(ctx context.Context, refs []record, cutoff time.Time) error {
	body, _ := json.Marshal(map[string]any{"pruned": len(refs), "older_than": cutoff})
	j.mu.Lock()
	ev, f, err := j.enqueueLocked(runtime.Event{Kind: KindRecords, Body: body}, refs, nil, true)
	if err == nil {
		j.lastRetention = ev.Seq
	}
	j.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case j.kick <- struct{}{}:
	default:
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recordEnded returns the test of a record of bucket that retention may
// delete, or nil if none of the bucket's records are ever deleted.
func recordEnded(bucket []byte, cutoff, now time.Time) func(js []byte) bool {
	switch string(bucket) {
	case string(bEffects):
		return func(js []byte) bool {
			var a runtime.Attempt
			return json.Unmarshal(js, &a) == nil && a.State.Terminal() && a.Updated.Before(cutoff)
		}
	case string(bApprovals):
		return func(js []byte) bool {
			var a runtime.Approval
			return json.Unmarshal(js, &a) == nil && a.Status != runtime.ApprovalPending && a.RequestedAt.Before(cutoff)
		}
	case string(bRuns):
		return func(js []byte) bool {
			var r runtime.RunRecord
			return json.Unmarshal(js, &r) == nil && r.Status == runtime.RunEnded && r.EndedAt.Before(cutoff)
		}
	case string(bRules):
		return func(js []byte) bool {
			var r runtime.RuleRecord
			if json.Unmarshal(js, &r) != nil {
				return false
			}
			spent := r.Revoked || (!r.Rule.ExpiresAt.IsZero() && r.Rule.ExpiresAt.Before(cutoff))
			return spent && r.MadeAt.Before(cutoff)
		}
	case string(bSessions):
		return func(js []byte) bool {
			var s store.Session
			return json.Unmarshal(js, &s) == nil && !now.Before(s.Expires)
		}
	}
	return nil
}
