package journal

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
)

// SchemaVersion is the newest layout of the file this build reads and writes.
// Version 2 backs every record by the event that made it; a version 1 file
// is upgraded at its first writable open (see adopt).
const SchemaVersion = 2

// FileName is the name of the file in the state directory.
const FileName = "shadowgate.db"

// Bucket names.
var (
	bJournal   = []byte("journal")
	bEffects   = []byte("effects")
	bApprovals = []byte("approvals")
	bRules     = []byte("rules")
	bRuns      = []byte("runs")
	bState     = []byte("state")
	bOutbox    = []byte("outbox")
	bMeta      = []byte("meta")
	bSessions  = []byte("sessions")
	buckets    = [][]byte{bJournal, bEffects, bApprovals, bRules, bRuns, bState, bOutbox, bMeta, bSessions, bStarting, bEnded, bEndedBy}

	kSchema = []byte("schema")
	kHead   = []byte("head")
	kAnchor = []byte("anchor")
	kBytes  = []byte("bytes")
	kMode   = []byte("mode")
)

// Options configure a journal. The zero value of each field means its
// default, chosen for an SD card.
type Options struct {
	// LockTimeout bounds the wait for the file lock. Default 1s.
	LockTimeout time.Duration
	// MaxEvents bounds the events kept. Default 500,000.
	MaxEvents int
	// MaxBytes bounds the bytes of the events kept. Default 128 MiB.
	MaxBytes int64
	// KeepRecords is how long ended attempts, answered approvals, ended
	// runs and spent rules are kept. Default 30 days. Pending approvals,
	// open attempts and the state are never pruned.
	KeepRecords time.Duration
	// MaxRecords bounds the ended records kept (attempts, approvals, runs,
	// rules): past it the oldest are pruned, though younger than
	// KeepRecords. Default 100,000.
	MaxRecords int
	// FlushInterval bounds how long an async commit (a reading, telemetry)
	// waits for the log's next fdatasync when no sync commit comes first:
	// a power cut loses at most this much of them, never a sync commit.
	// Default 30s: on an SD card each few seconds in which the log is
	// written cost a page and the file system's own journal commit (see
	// docs/performance.md, "On an SD card").
	FlushInterval time.Duration
	// StoreInterval bounds how long an event durable in the log waits to
	// be written to the store (bbolt) in the background. Default 30m: a
	// store write costs the pages of every bucket it touches, and fewer
	// of them spare the card. The store is also written once StoreEvents
	// events or StoreBytes bytes wait, and at Close. Readers never wait
	// for it.
	StoreInterval time.Duration
	// StoreEvents and StoreBytes bound what waits for the store. Default
	// 8192 events and 4 MiB.
	StoreEvents int
	StoreBytes  int
	// SegmentSize is the size each log segment is preallocated to.
	// Default 4 MiB.
	SegmentSize int64
	// MaxFileSize, if set, caps the file: a write that would grow it further
	// fails, and the journal fails closed, as on a full disk.
	MaxFileSize int
	// ReadOnly opens the file for reading (verify, export). Commits fail.
	ReadOnly bool
	// Logger receives the journal's operational logs. Nil discards them.
	Logger *slog.Logger
	// OnCommit, if set, is told how long each write (fsync included) took
	// and how many events it carried, for metrics. It must not block.
	OnCommit func(took time.Duration, events int)
	// Checkpoint, if its Signer is set, makes the journal sign checkpoints.
	Checkpoint CheckpointOptions
}

func (o *Options) setDefaults() {
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = 500_000
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 128 << 20
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = 100_000
	}
	if o.KeepRecords <= 0 {
		o.KeepRecords = 30 * 24 * time.Hour
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 30 * time.Second
	}
	if o.StoreInterval <= 0 {
		o.StoreInterval = 30 * time.Minute
	}
	if o.StoreEvents <= 0 {
		o.StoreEvents = 8192
	}
	if o.StoreBytes <= 0 {
		o.StoreBytes = 4 << 20
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Checkpoint.Every == 0 {
		o.Checkpoint.Every = 1000
	}
	if o.Checkpoint.Interval <= 0 {
		o.Checkpoint.Interval = time.Minute
	}
}

// Errors of the journal.
var (
	// ErrReadOnly is returned by Commit on a journal opened ReadOnly.
	ErrReadOnly = errors.New("journal opened read-only")
	// ErrFailed wraps the first write error; once it is returned, every
	// commit fails until a restart.
	ErrFailed = errors.New("journal failed")
)

// LockedError says that another process holds the file.
type LockedError struct {
	Path string
	// PID is the holder's process id from the pid file, or 0 if unknown.
	PID int
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return "journal " + e.Path + " is in use by process " + strconv.Itoa(e.PID) + " (a running gateway); stop it first"
	}
	return "journal " + e.Path + " is in use by another process; stop it first"
}

// SchemaError says that the file was written by a newer build.
type SchemaError struct {
	Path        string
	Found, Know uint32
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("journal %s has schema %d, newer than this build knows (%d); run a newer shadowgate", e.Path, e.Found, e.Know)
}

// CorruptError says that the file cannot be trusted. The gateway keeps
// reading sensors but refuses every actuation.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string { return "journal " + e.Path + " is corrupt: " + e.Err.Error() }

func (e *CorruptError) Unwrap() error { return e.Err }

// WriteError is the first write the journal could not make. It matches
// ErrFailed with errors.Is: from then on every commit fails.
type WriteError struct {
	First, Last uint64 // the events that were not written
	Path        string
	Err         error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%v: writing events %d to %d to %s: %v", ErrFailed, e.First, e.Last, e.Path, e.Err)
}

// Unwrap gives ErrFailed and the cause.
func (e *WriteError) Unwrap() []error { return []error{ErrFailed, e.Err} }

// PublicReason says what failed in words a client may be shown, with the
// file's path left out.
func (e *WriteError) PublicReason() string {
	cause := redact(e.Err.Error(), e.Path)
	if errors.Is(e.Err, berrors.ErrMaxSizeReached) {
		cause = "the file reached its max_file_size"
	}
	return fmt.Sprintf("the journal could not write events %d to %d: %s", e.First, e.Last, cause)
}

// redact leaves path out of msg.
func redact(msg, path string) string {
	if path == "" {
		return msg
	}
	return strings.ReplaceAll(msg, path, "the journal's file")
}

// PublicReason says what is wrong in words a client may be shown: the
// integrity report, with the file's path left out.
func (e *CorruptError) PublicReason() string {
	return "the journal is corrupt: " + redact(e.Err.Error(), e.Path)
}

// DB is a journal in a bbolt file. It implements runtime.Journal and is
// safe for concurrent use.
type DB struct {
	blocks blockCache // the store's blocks read last
	path   string
	opts   Options
	db     *bolt.DB
	log    *slog.Logger
	bootID string
	start  time.Time // the boot's monotonic origin

	kick       chan struct{} // wakes the writer; capacity 1
	flushTimer *time.Timer   // kicks the writer when a queue's flush interval is up; under mu
	quit       chan struct{} // closed by Close
	writerDone chan struct{}

	// mu guards everything below.
	mu        sync.Mutex
	closed    bool
	failed    error // sticky: the first write error
	next      uint64
	prevHash  hash
	queue     []item
	queueFrom time.Time // when the oldest queued item arrived
	syncs     int       // sync commits queued
	prompts   int       // prompt commits queued
	// urgentFrom is when the first sync or prompt commit of the queue
	// came: the queue's write is due from then, or FlushInterval after
	// queueFrom, whichever is sooner.
	urgentFrom time.Time
	expect     int       // sync callers likely queued soon: released by the last write, plus those queued then
	flushedAt  time.Time // when the last write ended
	cur        *flush    // the batch being gathered
	committed  uint64    // newest seq written
	ring       []runtime.Event
	ringSize   int                        // the ringCost of ring
	open       map[string]runtime.Attempt // attempts not terminal, or not yet written
	stats      Stats
	notify     func(seq uint64)

	// Pruning, the writer's own: a prune found due while writing a batch
	// (pruneNext) is queued as an event after it, and the events it names
	// are deleted in the transaction that writes that event (pruneSeq).
	pruneNext *pruneIntent
	pruneSeq  uint64

	// The store lags the log: unapplied holds, in order, the events the
	// log holds durably that the store does not yet; applied is the
	// newest the store holds. The ring keeps every event after applied,
	// so that readers never wait for the store.
	unapplied      []item
	unappliedBytes int
	unappliedFrom  time.Time
	applied        uint64
	storeForce     bool
	flushForce     bool          // the writer writes what is queued without waiting
	storeTick      chan struct{} // closed and replaced after each store write
	// sessionsPending are console sessions the log holds and the store
	// does not yet: "" for a deleted one.
	sessionsPending map[string]pendingSession
	// lastRetention is the newest retention event queued: retention
	// chooses again only once the store holds it.
	lastRetention uint64

	// walMu guards wal: the writer appends, the store's writer removes.
	walMu sync.Mutex
	wal   *wal
	// logTail is what a read-only open found in the log past the store,
	// and logErr why the log cannot be read, for Verify.
	logErr error

	// crashForTest makes Close leave the store as it is, behind the log,
	// as a crash would: set by tests of this package only.
	crashForTest bool

	storeKick chan struct{}
	storeQuit chan struct{}
	storeDone chan struct{}

	committedHash      hash   // the hash of the newest written event
	lastCheckpoint     uint64 // the newest checkpoint event queued
	lastCheckpointSize uint64 // the event it signed
	ckKick             chan struct{}

	// verified is closed once the chain read at Open has been checked;
	// the writer writes nothing before. stop ends that check at Close.
	verified chan struct{}
	// bad names the records the start check found wrong ("bucket/key"):
	// backed refuses them even where their own event would vouch for them
	// (a record rolled back to what a later event changed).
	bad  atomic.Pointer[map[string]bool]
	stop context.CancelFunc
	bg   sync.WaitGroup // the start verification and the checkpointer
}

// KindRecords is an event of the journal itself about its records: those
// retention deleted, or live ones carried by a new event before the events
// that made them are pruned.
const KindRecords runtime.Kind = "records"

// Notify makes the writer call fn with the newest written sequence after
// every batch. fn must not block. The engine wakes its subscribers with it.
func (j *DB) Notify(fn func(seq uint64)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.notify = fn
}

// item is one queued commit, encoded: nothing of the caller's is kept, so
// nothing the caller changes later can change what is written.
type item struct {
	ev      runtime.Event
	value   []byte
	hash    hash
	records []record
	// terminal is the key of an attempt this commit ends, if any.
	terminal string
	state    runtime.AttemptState
	// prune, if set, deletes the events it names in the transaction that
	// writes this one (a "records" event that also carries live records).
	prune *pruneIntent
}

// flush is one batch: its waiters learn the outcome when done closes.
type flush struct {
	done chan struct{}
	err  error
}

// Stats count the journal's writes since it opened.
type Stats struct {
	Batches      uint64        // frames written to the log, one fdatasync each
	Events       uint64        // events written to the log
	CommitTime   time.Duration // total time writing the log, fdatasync included
	MaxCommit    time.Duration
	LastCommit   time.Duration
	PrunedEvents uint64
	// StoreBatches counts the store's transactions, two fdatasyncs each.
	StoreBatches uint64
	// LogSyncs and LogBytes count the log's fdatasyncs and fsyncs, and
	// the bytes written to it.
	LogSyncs, LogBytes int64
}

// ringMin is how many written events stay in memory for subscribers.
const ringMin = 4096

// ringBytes bounds the memory of those events too (their bodies and a
// share for their fields): an idle gateway's ring fills over an hour, and
// without it would hold several MiB.
const ringBytes = 1 << 20

// ringCost is what one event in the ring costs, roughly.
func ringCost(ev *runtime.Event) int { return len(ev.Body) + len(ev.Run) + len(ev.Device) + 160 }

// maxQueue bounds the queued events; an async commit beyond it waits for
// the writer, so a slow disk cannot exhaust memory.
const maxQueue = 65536

// LogDir returns the directory of the log of the journal whose store is
// at path: a restore keeps it with the store it replaces.
func LogDir(path string) string { return walDir(path) }

// Path returns the file of the journal in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Open opens or creates the journal file at path and starts its writer.
func Open(path string, opts Options) (*DB, error) {
	opts.setDefaults()
	// The freelist is not written by each commit (NoFreelistSync): it is
	// rebuilt from the pages at open, a scan that the store's few commits
	// make worth it on a card.
	bo := &bolt.Options{Timeout: opts.LockTimeout, ReadOnly: opts.ReadOnly, MaxSize: opts.MaxFileSize,
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("opening journal: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, &LockedError{Path: path, PID: readPID(path)}
		}
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
			return nil, &CorruptError{Path: path, Err: err}
		}
		return nil, fmt.Errorf("opening journal %s: %w", path, err)
	}
	j := &DB{
		path: path, opts: opts, db: db, log: opts.Logger, start: time.Now(),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), writerDone: make(chan struct{}),
		cur: &flush{done: make(chan struct{})}, open: map[string]runtime.Attempt{},
		ckKick: make(chan struct{}, 1), storeKick: make(chan struct{}, 1), storeQuit: make(chan struct{}),
		storeDone: make(chan struct{}), storeTick: make(chan struct{}), sessionsPending: map[string]pendingSession{},
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	j.bootID = hex.EncodeToString(b[:])
	if err := j.init(); err != nil {
		_ = j.wal.close()
		_ = db.Close()
		return nil, err
	}
	if opts.ReadOnly {
		close(j.writerDone)
		close(j.storeDone)
		return j, nil
	}
	if err := writePID(path); err != nil {
		j.log.Warn("pid file not written", "path", path+".pid", "error", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	j.stop = stop
	j.verified = make(chan struct{})
	j.bg.Go(func() { j.verifyAtStart(ctx) })
	if opts.Checkpoint.Signer != nil {
		j.bg.Go(func() { j.checkpointer(ctx) })
	}
	j.bg.Go(func() { j.retention(ctx) })
	go j.writer()
	go j.storeWriter()
	return j, nil
}

// init creates the buckets, checks the schema and finds the chain's head.
func (j *DB) init() error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if meta == nil {
			return nil
		}
		if v := meta.Get(kSchema); v != nil {
			if len(v) != 4 {
				return &CorruptError{Path: j.path, Err: errors.New("meta schema is not 4 bytes")}
			}
			if got := binary.BigEndian.Uint32(v); got > SchemaVersion {
				return &SchemaError{Path: j.path, Found: got, Know: SchemaVersion}
			}
		}
		return nil
	}
	if err := j.view(check); err != nil {
		return err
	}
	if !j.opts.ReadOnly {
		err := j.update(func(tx *bolt.Tx) error {
			for _, name := range buckets {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			if tx.Bucket(bMeta).Get(kSchema) == nil {
				return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("preparing journal %s: %w", j.path, err)
		}
	}
	err := j.view(func(tx *bolt.Tx) error {
		jb := tx.Bucket(bJournal)
		if jb == nil {
			return nil // a read-only open of an empty file
		}
		k, _ := jb.Cursor().Last()
		if k == nil {
			if a, err := j.link(tx, kAnchor); err != nil {
				return err
			} else if a != nil {
				j.next, j.prevHash = a.Seq, a.Hash
			}
			j.committed = j.next
			j.next++
			return nil
		}
		seq, v, err := newHistory(tx).last()
		var d decoded
		if err == nil {
			d, err = decodeEvent(v)
		}
		if j.opts.ReadOnly && err == nil {
			j.next, j.prevHash, j.committed, j.committedHash = d.ev.Seq+1, d.hash, d.ev.Seq, d.hash
			return nil
		}
		if j.opts.ReadOnly {
			// Reading is for verify and export: Verify says what is wrong.
			if seq == 0 {
				seq = keySeq(k)
			}
			j.next, j.committed = seq+1, seq
			return nil
		}
		if err != nil {
			return &CorruptError{Path: j.path, Err: fmt.Errorf("the newest event: %w", err)}
		}
		if seq != d.ev.Seq || chain(d.canonical, d.prev) != d.hash {
			return &CorruptError{Path: j.path, Err: fmt.Errorf("the newest event %d does not match its hash", d.ev.Seq)}
		}
		if head, err := j.link(tx, kHead); err != nil {
			return err
		} else if head != nil && (head.Seq != d.ev.Seq || head.Hash != d.hash) {
			return &CorruptError{Path: j.path, Err: fmt.Errorf("the head names event %d but the newest is %d", head.Seq, d.ev.Seq)}
		}
		j.next, j.prevHash, j.committed, j.committedHash = d.ev.Seq+1, d.hash, d.ev.Seq, d.hash
		return nil
	})
	if err != nil {
		return err
	}
	j.applied = j.committed
	if err := j.replay(); err != nil || j.opts.ReadOnly {
		return err
	}
	if err := j.adopt(); err != nil {
		return err
	}
	j.applied = j.committed // adopt writes to the store directly
	if err := j.index(); err != nil {
		return err
	}
	return j.startLog()
}

// index builds the indexes again if the file's head is not the one they
// were kept up to: they are new to the file, or a build that does not
// keep them wrote it since.
func (j *DB) index() error {
	return j.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		var head uint64
		if h, err := j.link(tx, kHead); err != nil {
			return err
		} else if h != nil {
			head = h.Seq
		}
		if indexedHead(meta) == head && head == j.committed {
			return nil
		}
		t0 := time.Now()
		n, err := rebuildIndexes(tx)
		if err != nil {
			return fmt.Errorf("indexing journal %s: %w", j.path, err)
		}
		j.log.Info("journal indexes built", "records", n, "took", time.Since(t0).Round(time.Millisecond))
		return meta.Put(kIndexed, binary.BigEndian.AppendUint64(nil, j.committed))
	})
}

// adopt upgrades a file whose records predate their backing (schema 1): it
// journals them, as they are, in "records" events at the end of the chain
// and stores each under the event that adopted it, then sets the schema.
// It is the one moment a record is trusted without an event before it, and
// the event says so.
func (j *DB) adopt() error {
	return j.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if v := meta.Get(kSchema); len(v) == 4 && binary.BigEndian.Uint32(v) >= SchemaVersion {
			return nil
		}
		// A file this build wrote says so in its chain: an event with
		// record changes, or a record naming its event. Such a file with
		// an older schema was set back to have forged records adopted.
		if err := tx.Bucket(bJournal).ForEach(func(k, v []byte) error {
			if len(v) > 0 && v[0] != formatV1 {
				return fmt.Errorf("meta schema is older than %d, but event %d was written by schema %d: the file was altered", SchemaVersion, keySeq(k), SchemaVersion)
			}
			return nil
		}); err != nil {
			return &CorruptError{Path: j.path, Err: err}
		}
		var legacy []record
		for _, bucket := range recordBuckets {
			err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				if len(v) > 0 && v[0] == recordVersion {
					return &CorruptError{Path: j.path, Err: fmt.Errorf("meta schema is older than %d, but record %s/%s was written by schema %d: the file was altered", SchemaVersion, bucket, k, SchemaVersion)}
				}
				if len(v) > 0 {
					js := append([]byte(nil), v...)
					legacy = append(legacy, record{ref: ref{bucket: string(bucket), key: string(k), op: opPut, digest: digestOf(js)}, js: js})
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		// A schema 1 file pruned without saying so: its anchor is taken as
		// it is, once, by the first event that adopts the records.
		var prune *pruneIntent
		if a, err := j.link(tx, kAnchor); err != nil {
			return err
		} else if a != nil {
			prune = &pruneIntent{Through: a.Seq, Hash: a.Hash.String()}
		}
		if len(legacy) == 0 && prune != nil {
			body, _ := json.Marshal(map[string]any{"prune_through": prune.Through, "hash": prune.Hash, "why": "the anchor of a journal written before prunes were events"})
			ev := runtime.Event{Seq: j.next, At: time.Now(), BootID: j.bootID, Kind: KindRecords, Body: body}
			value, h := encodeEvent(&ev, nil, j.prevHash)
			if err := tx.Bucket(bJournal).Put(seqKey(ev.Seq), value); err != nil {
				return err
			}
			if err := meta.Put(kHead, link{Seq: ev.Seq, Hash: h}.encode()); err != nil {
				return err
			}
			if v := meta.Get(kBytes); len(v) == 8 {
				if err := meta.Put(kBytes, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(v)+uint64(len(value)))); err != nil {
					return err
				}
			}
			j.next, j.prevHash, j.committed, j.committedHash = ev.Seq+1, h, ev.Seq, h
		}
		total := int64(0)
		if v := meta.Get(kBytes); len(v) == 8 {
			total = int64(binary.BigEndian.Uint64(v))
		}
		for len(legacy) > 0 {
			n := min(len(legacy), 1000)
			chunk := legacy[:n]
			legacy = legacy[n:]
			fields := map[string]any{"adopted": n, "why": "records written by a build that did not back them by events"}
			if prune != nil {
				fields["prune_through"], fields["hash"] = prune.Through, prune.Hash
			}
			body, _ := json.Marshal(fields)
			ev := runtime.Event{Seq: j.next, At: time.Now(), BootID: j.bootID, Kind: KindRecords, Body: body}
			value, h := encodeEvent(&ev, refsOf(chunk), j.prevHash)
			if err := tx.Bucket(bJournal).Put(seqKey(ev.Seq), value); err != nil {
				return err
			}
			for _, r := range chunk {
				if err := applyRecord(tx, ev.Seq, r); err != nil {
					return err
				}
			}
			total += int64(len(value))
			if err := meta.Put(kHead, link{Seq: ev.Seq, Hash: h}.encode()); err != nil {
				return err
			}
			j.log.Info("journal records adopted", "records", n, "journal_seq", ev.Seq)
			j.next, j.prevHash, j.committed, j.committedHash = ev.Seq+1, h, ev.Seq, h
		}
		if err := meta.Put(kBytes, binary.BigEndian.AppendUint64(nil, uint64(total))); err != nil {
			return err
		}
		return meta.Put(kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
	})
}

func (j *DB) link(tx *bolt.Tx, key []byte) (*link, error) {
	v := tx.Bucket(bMeta).Get(key)
	if v == nil {
		return nil, nil
	}
	l, err := decodeLink(v)
	if err != nil {
		return nil, &CorruptError{Path: j.path, Err: fmt.Errorf("meta %s: %w", key, err)}
	}
	return &l, nil
}

// verifyAtStart checks the whole chain and every record against it while
// the gateway starts, and fails the journal closed on the first break,
// naming its sequence. Nothing is written until it is done; reads go on.
func (j *DB) verifyAtStart(ctx context.Context) {
	defer close(j.verified)
	t0 := time.Now()
	r, badKeys, err := j.verify(ctx)
	switch {
	case ctx.Err() != nil:
		// Closed before the chain was checked: nothing queued is written.
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.failed == nil {
			j.failed = &CorruptError{Path: j.path, Err: errors.New("the journal closed before its chain was verified")}
		}
	case err != nil:
		j.distrust(fmt.Errorf("verifying the chain at start: %w", err))
	case r.Reason != "":
		j.distrust(fmt.Errorf("the chain breaks at seq %d: %s", r.BadSeq, r.Reason))
	case !r.OK:
		j.bad.Store(&badKeys)
		j.distrust(fmt.Errorf("%d record(s) disagree with the events, the first: %s", len(r.BadRecords), r.BadRecords[0]))
	default:
		j.log.Info("journal verified", "events", r.Count, "records", r.Records, "took", time.Since(t0).Round(time.Millisecond))
	}
	j.releasePages() // what the check read is not kept resident
}

// Verified is closed once the check of the chain made at Open is done.
// Err says whether it found the chain whole.
func (j *DB) Verified() <-chan struct{} {
	if j.verified == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return j.verified
}

// BootID names this opening of the journal in every event it writes.
func (j *DB) BootID() string { return j.bootID }

// Path returns the file's path.
func (j *DB) Path() string { return j.path }

// Commit appends the event and stores the entry's records. A Sync entry
// returns once its batch is fsync'd; it waits for that even if ctx ends,
// because the record is already on its way to disk and a caller told
// otherwise would act on a falsehood. An async entry returns at once unless
// the queue is full. Nothing is written before the chain verified at Open
// is found whole; if it is not, every commit fails with a *CorruptError.
func (j *DB) Commit(ctx context.Context, e runtime.Entry) (runtime.Event, error) {
	if j.opts.ReadOnly {
		return runtime.Event{}, ErrReadOnly
	}
	records, err := encodeRecords(&e)
	if err != nil {
		return runtime.Event{}, fmt.Errorf("encoding the records of a %s event: %w", e.Event.Kind, err)
	}
	return j.append(ctx, e.Event, records, e.Attempt, e.Durability)
}

// append queues one event with the record changes it witnesses and, if
// sync, waits for its batch to be written.
func (j *DB) append(ctx context.Context, ev runtime.Event, records []record, att *runtime.Attempt, d runtime.Durability) (runtime.Event, error) {
	if err := j.waitRoom(ctx); err != nil {
		return runtime.Event{}, err
	}
	sync := d == runtime.Sync
	ev, f, wake, err := j.enqueue(ev, records, att, d)
	if err != nil {
		return runtime.Event{}, err
	}
	if wake {
		j.kickWriter()
	}
	if !sync {
		return ev, nil
	}
	<-f.done
	if f.err != nil {
		return runtime.Event{}, f.err
	}
	return ev, nil
}

// waitRoom waits while the queue is full, so that a slow disk cannot
// exhaust memory. The bound is soft: callers released together may pass it
// by a few.
func (j *DB) waitRoom(ctx context.Context) error {
	for {
		f := j.fullBatch()
		if f == nil {
			return nil
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the journal to catch up: %w", ctx.Err())
		}
	}
}

// fullBatch returns the batch to wait for when the queue is full, or nil.
func (j *DB) fullBatch() *flush {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.queue) >= maxQueue && j.failed == nil && !j.closed {
		return j.cur
	}
	return nil
}

// enqueue assigns the event its sequence and chains it, and queues it with
// its records for the writer. It returns the batch to wait for. The lock is
// released however enqueue returns, a panic included.
//
// wake says whether the writer must be woken now: for a sync or prompt
// commit and a full batch. A queue of async commits waits for the flush
// interval, and waking the writer for each would cost every step a
// goroutine switch.
func (j *DB) enqueue(ev runtime.Event, records []record, att *runtime.Attempt, d runtime.Durability) (_ runtime.Event, _ *flush, wake bool, _ error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ev, f, err := j.enqueueLocked(ev, records, att, d == runtime.Sync)
	if err == nil && d == runtime.Prompt {
		if j.syncs == 0 && j.prompts == 0 {
			j.urgentFrom = time.Now()
		}
		j.prompts++
	}
	switch {
	case err != nil:
	case d != runtime.Async || len(j.queue) >= maxBatch:
		wake = true
	case len(j.queue) == 1:
		// The first of a queue of async commits: the writer is woken when
		// the flush interval is up, by a timer, not now.
		if j.flushTimer == nil {
			j.flushTimer = time.AfterFunc(j.opts.FlushInterval, j.kickWriter)
		} else {
			j.flushTimer.Reset(j.opts.FlushInterval)
		}
	}
	return ev, f, wake, err
}

// kickWriter wakes the writer.
func (j *DB) kickWriter() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// enqueueLocked is enqueue with j.mu held.
func (j *DB) enqueueLocked(ev runtime.Event, records []record, att *runtime.Attempt, sync bool) (runtime.Event, *flush, error) {
	if err := j.errLocked(); err != nil {
		return runtime.Event{}, nil, err
	}
	if att != nil {
		prev, err := j.attemptLocked(att.Key)
		if err != nil {
			return runtime.Event{}, nil, err
		}
		if !prev.State.CanMoveTo(att.State) {
			return runtime.Event{}, nil, &runtime.TransitionError{Key: att.Key, From: prev.State, To: att.State}
		}
		j.open[att.Key] = *att
	}
	ev.Seq = j.next
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	ev.Mono = int64(time.Since(j.start))
	ev.BootID = j.bootID
	value, h := encodeEvent(&ev, refsOf(records), j.prevHash)
	ev.Prev, ev.Hash = j.prevHash.String(), h.String()
	j.next++
	j.prevHash = h
	it := item{ev: ev, value: value, hash: h, records: records}
	if att != nil && att.State.Terminal() {
		it.terminal, it.state = att.Key, att.State
	}
	if len(j.queue) == 0 {
		j.queueFrom = time.Now()
	}
	j.queue = append(j.queue, it)
	j.ring = append(j.ring, ev)
	j.ringSize += ringCost(&ev)
	if sync {
		if j.syncs == 0 && j.prompts == 0 {
			j.urgentFrom = time.Now()
		}
		j.syncs++
	}
	return ev, j.cur, nil
}

func (j *DB) errLocked() error {
	switch {
	case j.failed != nil:
		return j.failed
	case j.closed:
		return runtime.ErrJournalClosed
	}
	return nil
}

// Err returns nil while the journal can witness, or why it cannot.
func (j *DB) Err() error {
	if j.opts.ReadOnly {
		return ErrReadOnly
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.errLocked(); err != nil {
		return err
	}
	// A writer that has written nothing of what waits for longer than any
	// disk should take past when it was due is wedged: the journal cannot
	// witness, and the gateway says so (its watchdog pings stop) rather
	// than look healthy while every step waits. Readings alone are due
	// FlushInterval after the first of them; a sync or prompt commit makes
	// the queue due at once.
	if len(j.queue) > 0 {
		due := j.queueFrom.Add(j.opts.FlushInterval)
		if (j.syncs > 0 || j.prompts > 0) && j.urgentFrom.Before(due) {
			due = j.urgentFrom
		}
		if waited := time.Since(due); waited > stallAfter {
			return fmt.Errorf("the journal's writer has written nothing for %s past when it was due: %w", waited.Round(time.Second), ErrStalled)
		}
	}
	return nil
}

// stallAfter is how long what waits for the writer may wait before the
// journal is taken for wedged.
const stallAfter = 30 * time.Second

// ErrStalled is wrapped by Err while the journal's writer is wedged.
var ErrStalled = errors.New("the journal's writer is stalled")

// Stats returns the write counters.
func (j *DB) Stats() Stats {
	j.walMu.Lock()
	var syncs, written int64
	if j.wal != nil {
		syncs, written = j.wal.syncs, j.wal.written
	}
	j.walMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.stats
	s.LogSyncs, s.LogBytes = syncs, written
	return s
}

// attemptLocked returns the newest record of an attempt: queued or open in
// memory, else written. j.mu must be held.
func (j *DB) attemptLocked(key string) (runtime.Attempt, error) {
	if a, ok := j.open[key]; ok {
		return a, nil
	}
	var a runtime.Attempt
	err := j.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bEffects).Get([]byte(key))
		if v == nil {
			return nil
		}
		js, err := j.backed(tx, bEffects, []byte(key), v)
		if err != nil {
			return err
		}
		return json.Unmarshal(js, &a)
	})
	if err != nil {
		return a, fmt.Errorf("reading attempt %s: %w", key, err)
	}
	return a, nil
}

// Attempt returns the attempt with the idempotency key.
func (j *DB) Attempt(_ context.Context, key string) (runtime.Attempt, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, err := j.attemptLocked(key)
	return a, a.State != "", err
}

// Events returns up to limit written events with Seq > since, in order:
// older ones from the file, the newest from memory. A queued event is not
// returned until its batch is written; Notify says when.
func (j *DB) Events(ctx context.Context, since uint64, limit int) ([]runtime.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	out, ringFrom, done := j.fromRing(since, limit)
	if done {
		return out, nil
	}
	err := j.view(func(tx *bolt.Tx) error {
		h := newHistory(tx)
		seq, v, err := h.seek(since + 1)
		for ; err == nil && v != nil && len(out) < limit; seq, v, err = h.next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, err := decodeEvent(v)
			if err != nil {
				return &CorruptError{Path: j.path, Err: fmt.Errorf("event %d: %w", seq, err)}
			}
			out = append(out, d.ev)
		}
		if err != nil {
			return &CorruptError{Path: j.path, Err: err}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) < limit && (len(out) == 0 || out[len(out)-1].Seq+1 >= ringFrom) {
		after := since
		if len(out) > 0 {
			after = out[len(out)-1].Seq
		}
		more, _, _ := j.fromRing(after, limit-len(out))
		if len(more) > 0 && more[0].Seq == after+1 {
			out = append(out, more...)
		}
	}
	return out, nil
}

// eventsHook, if set, runs inside Events with the journal's lock held: a
// failpoint, nil in production.
var eventsHook atomic.Pointer[func(since uint64, limit int)]

// SetEventsHookForTest makes fn run inside every Events call while the
// journal's lock is held (fn may panic, to show that a panic there leaves
// no lock held), until the test ends.
func SetEventsHookForTest(tb interface{ Cleanup(func()) }, fn func(since uint64, limit int)) {
	eventsHook.Store(&fn)
	tb.Cleanup(func() { eventsHook.Store(nil) })
}

// fromRing returns the written events after since that memory holds, and
// whether memory answers the request whole (since is at or beyond the
// oldest event held). Any since is safe: one at or beyond the newest
// written event returns nothing.
func (j *DB) fromRing(since uint64, limit int) ([]runtime.Event, uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if h := eventsHook.Load(); h != nil {
		(*h)(since, limit)
	}
	ringFrom := j.next
	if len(j.ring) > 0 {
		ringFrom = j.ring[0].Seq
	}
	if since >= j.committed {
		return nil, ringFrom, true
	}
	if since+1 < ringFrom {
		return nil, ringFrom, false
	}
	var out []runtime.Event
	// Only what is written: an event is served once it is witnessed.
	for i := since + 1 - ringFrom; i < uint64(len(j.ring)) && len(out) < limit && j.ring[i].Seq <= j.committed; i++ {
		out = append(out, j.ring[i])
	}
	return out, ringFrom, true
}

// Pending returns up to limit events after since that are queued and not
// yet written, in order: what the next write will make durable. Should
// that write fail they are never written, and Events never returns them.
func (j *DB) Pending(since uint64, limit int) []runtime.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	from := max(since, j.committed)
	if len(j.ring) == 0 || from+1 < j.ring[0].Seq {
		return nil
	}
	var out []runtime.Event
	for i := from + 1 - j.ring[0].Seq; i < uint64(len(j.ring)) && len(out) < limit; i++ {
		out = append(out, j.ring[i])
	}
	return out
}

// Load returns what a start needs: pending approvals, rules not revoked,
// runs not ended, attempts not terminal, the mode and the state of every
// capability. It also primes the in-memory index of open attempts.
//
// Every record is checked against the event it names (see records.go).
// One that is not backed, or cannot be read, is left out of the snapshot
// and makes the journal fail closed (every later commit fails and Err says
// which record), while events stay readable: a forged rule or mode is never
// used, and sensors go on being read.
func (j *DB) Load(ctx context.Context) (runtime.Snapshot, error) {
	var s runtime.Snapshot
	// What the log holds and the store not yet is written to it first, so
	// that the snapshot holds every durable event.
	if err := j.storeUpTo(ctx, false); err != nil && !errors.Is(err, ErrFailed) {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return s, fmt.Errorf("loading journal %s: %w", j.path, err)
		}
	}
	var bad []error
	err := j.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bMeta) == nil {
			return nil
		}
		if _, v, err := newHistory(tx).last(); err == nil && v != nil {
			if d, err := decodeEvent(v); err == nil {
				s.LastAt = d.ev.At
			}
		}
		// each calls fn with the backed JSON of every record in bucket
		// that keep says is wanted, collecting what is wrong. Of an
		// indexed bucket it reads only the records the start index
		// names: what is open, not the finished history.
		st := tx.Bucket(bStarting)
		if h, _ := j.link(tx, kHead); st != nil && (h == nil || indexedHead(tx.Bucket(bMeta)) != h.Seq) {
			st = nil // behind the records (a read-only open of a file an older build wrote): read them all
		}
		// The records are checked once all are gathered, in the order
		// of their events, so that each block of the store is read once;
		// then kept in the order gathered.
		type gathered struct {
			bucket, k, v []byte
			keep         func(k, js []byte) error
			seq          uint64
			js           []byte
			err          error
		}
		var all []*gathered
		each := func(bucket []byte, keep func(k, js []byte) error) {
			b := tx.Bucket(bucket)
			one := func(k, v []byte) error {
				g := &gathered{bucket: bucket, k: k, v: v, keep: keep}
				if len(v) >= 9 {
					g.seq = binary.BigEndian.Uint64(v[1:9])
				}
				all = append(all, g)
				return nil
			}
			if !indexed(bucket) || st == nil {
				_ = b.ForEach(one)
				return
			}
			eachStarting(st, b, bucket, func(k, v []byte) {
				if v == nil {
					bad = append(bad, &RecordError{Bucket: string(bucket), Key: string(k), Err: fmt.Errorf("%w: the start index names it, but it is gone", errUnbacked)})
					return
				}
				_ = one(k, v)
			})
		}
		each(bApprovals, func(k, js []byte) error {
			return decodeRecord(bApprovals, k, js, func(a *runtime.Approval) {
				if a.Status == runtime.ApprovalPending {
					s.Approvals = append(s.Approvals, *a)
				}
			})
		})
		each(bRules, func(k, js []byte) error {
			return decodeRecord(bRules, k, js, func(r *runtime.RuleRecord) {
				if !r.Revoked {
					s.Rules = append(s.Rules, *r)
				}
			})
		})
		each(bRuns, func(k, js []byte) error {
			return decodeRecord(bRuns, k, js, func(r *runtime.RunRecord) {
				switch {
				case r.Status != runtime.RunEnded:
					s.Runs = append(s.Runs, *r)
				case r.RequestID != "" && r.Plan != runtime.CommandPlan:
					s.Ended = append(s.Ended, *r)
				}
			})
		})
		each(bEffects, func(k, js []byte) error {
			return decodeRecord(bEffects, k, js, func(a *runtime.Attempt) {
				if !a.State.Terminal() {
					s.Open = append(s.Open, *a)
				}
			})
		})
		states := map[string]*runtime.StateRecord{}
		var order []string
		each(bState, func(k, js []byte) error {
			var rec runtime.StateRecord
			var err error
			switch {
			case bytes.Equal(k, kMode):
				err = decodeRecord(bState, k, js, func(m *runtime.ModeRecord) { s.Mode = m })
				return err
			case bytes.HasPrefix(k, []byte("reading/")):
				err = decodeRecord(bState, k, js, func(r *devices.Reading) { rec.Reading = r })
			case bytes.HasPrefix(k, []byte("receipt/")):
				err = decodeRecord(bState, k, js, func(r *runtime.Receipt) { rec.Receipt = r })
			case bytes.HasPrefix(k, []byte("alarm/")):
				return decodeRecord(bState, k, js, func(a *runtime.Alarm) { s.Alarms = append(s.Alarms, *a) })
			default:
				return &RecordError{Bucket: string(bState), Key: string(k), Err: errors.New("an unknown state key")}
			}
			if err != nil {
				return err
			}
			name := string(k[bytes.IndexByte(k, '/')+1:])
			cur, ok := states[name]
			if !ok {
				dev, capability := splitRef(name)
				cur = &runtime.StateRecord{Device: dev, Capability: capability}
				states[name] = cur
				order = append(order, name)
			}
			if rec.Reading != nil {
				cur.Reading = rec.Reading
			}
			if rec.Receipt != nil {
				cur.Receipt = rec.Receipt
			}
			return nil
		})
		byEvent := slices.Clone(all)
		slices.SortStableFunc(byEvent, func(a, b *gathered) int { return cmp.Compare(a.seq, b.seq) })
		h := j.events(tx)
		for _, g := range byEvent {
			g.js, g.err = j.backedIn(tx, h, g.bucket, g.k, g.v)
		}
		for _, g := range all {
			err := g.err
			if err == nil {
				err = g.keep(g.k, g.js)
			}
			if err != nil {
				bad = append(bad, err)
			}
		}
		for _, name := range order {
			s.States = append(s.States, *states[name])
		}
		return nil
	})
	if err != nil {
		return s, &CorruptError{Path: j.path, Err: err}
	}
	if len(bad) > 0 {
		j.distrust(fmt.Errorf("%d record(s) not backed by the journal, the first: %w", len(bad), bad[0]))
		for _, e := range bad {
			j.log.Error("journal record not trusted", "error", e)
		}
	}
	j.mu.Lock()
	s.LastSeq = j.next - 1
	for _, a := range s.Open {
		if _, ok := j.open[a.Key]; !ok {
			j.open[a.Key] = a
		}
	}
	j.mu.Unlock()
	sortSnapshot(&s)
	return s, nil
}

// decodeRecord decodes a record's JSON strictly enough that garbage is an
// error naming the record, and hands it to fn.
func decodeRecord[T any](bucket, key, js []byte, fn func(*T)) error {
	x := new(T)
	if err := json.Unmarshal(js, x); err != nil {
		return &RecordError{Bucket: string(bucket), Key: string(key), Err: fmt.Errorf("cannot be read: %w", err)}
	}
	fn(x)
	return nil
}

// distrust makes the journal fail closed because of err, keeping the first
// reason. Reads go on; every commit fails with it.
func (j *DB) distrust(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed == nil {
		j.failed = &CorruptError{Path: j.path, Err: err}
		j.log.Error("journal not trusted; actuations are refused until it is repaired", "path", j.path, "error", err)
		j.tickStoreLocked() // who waits for the store learns it will not be written
	}
}

// Close writes what is queued, stops the writer and releases the file.
func (j *DB) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	if j.flushTimer != nil {
		j.flushTimer.Stop()
	}
	j.mu.Unlock()
	if !j.opts.ReadOnly {
		j.stop()
		j.bg.Wait()
		close(j.quit)
		<-j.writerDone
		close(j.storeQuit)
		<-j.storeDone
		removePID(j.path)
	}
	werr := j.wal.close()
	if err := j.db.Close(); err != nil {
		return fmt.Errorf("closing journal %s: %w", j.path, err)
	}
	if werr != nil {
		return fmt.Errorf("closing journal %s: %w", j.path, werr)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if errors.Is(j.failed, ErrFailed) {
		return j.failed // a write failed: what was queued is lost
	}
	return nil // a journal not trusted wrote nothing, and said why when it stopped
}

func sortSnapshot(s *runtime.Snapshot) {
	slices.SortFunc(s.Approvals, func(a, b runtime.Approval) int { return a.RequestedAt.Compare(b.RequestedAt) })
	slices.SortFunc(s.Runs, func(a, b runtime.RunRecord) int { return a.StartedAt.Compare(b.StartedAt) })
	slices.SortFunc(s.Rules, func(a, b runtime.RuleRecord) int { return a.MadeAt.Compare(b.MadeAt) })
	slices.SortFunc(s.Open, func(a, b runtime.Attempt) int { return a.Updated.Compare(b.Updated) })
}

func splitRef(s string) (string, string) {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// writePID records this process as the holder of the file.
func writePID(path string) error {
	return os.WriteFile(path+".pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

func removePID(path string) {
	if pid := readPID(path); pid == os.Getpid() {
		_ = os.Remove(path + ".pid")
	}
}

// readPID returns the pid in the pid file beside path, or 0.
func readPID(path string) int {
	b, err := os.ReadFile(path + ".pid")
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// keySeq reads a journal key. A key of the wrong length reads as 0, which
// no event has, so verify reports it.
func keySeq(k []byte) uint64 {
	if len(k) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}

// view and update run a bbolt transaction. bbolt panics on some damaged
// pages, and a damaged page number can send it past the file's mapping,
// a fault that would end the process: with the goroutine set to panic on
// such faults, both become a *CorruptError here, never a crash of the
// gateway.
func (j *DB) view(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer j.recoverCorrupt(&err)
	return j.db.View(fn)
}

func (j *DB) update(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer j.recoverCorrupt(&err)
	return j.db.Update(fn)
}

func (j *DB) recoverCorrupt(err *error) {
	if p := recover(); p != nil {
		*err = &CorruptError{Path: j.path, Err: fmt.Errorf("bbolt stopped on a damaged page: %v", p)}
	}
}

// Backup writes a consistent copy of the journal file to w while it is in
// use. The copy is taken first to a file beside the journal, in one read
// transaction as short as the local disk allows, and w is written from
// that file after the transaction ended: a slow or stalled reader never
// holds a transaction open, which would hold up the writer when the file
// grows and keep freed pages from being reused. The copy is a journal
// file that Open and Verify take.
func (d *DB) Backup(w io.Writer) (int64, error) {
	// The store is brought up to the log first: the copy then holds every
	// event durable when the backup began, and needs no log beside it.
	if err := d.syncStore(context.Background()); err != nil {
		return 0, fmt.Errorf("backing up the journal: %w", err)
	}
	d.mu.Lock()
	tail := d.opts.ReadOnly && (d.committed > d.applied || d.logErr != nil)
	d.mu.Unlock()
	if tail {
		// Read-only, the store cannot be brought up to the log, and a copy
		// of the store alone would leave out what the log holds.
		return 0, errors.New("backing up the journal: its log holds events the store does not yet (the gateway stopped without closing it): start the gateway once, or back it up while it runs")
	}
	tmp, err := os.CreateTemp(filepath.Dir(d.path), ".backup-*")
	if err != nil {
		return 0, fmt.Errorf("backing up the journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	err = d.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(tmp)
		return err
	})
	if err == nil {
		err = forgetLog(tmp)
	}
	if err != nil {
		return 0, fmt.Errorf("backing up the journal: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("backing up the journal: %w", err)
	}
	n, err := io.Copy(w, tmp)
	if err != nil {
		return n, fmt.Errorf("backing up the journal: %w", err)
	}
	return n, nil
}

// forgetLog clears kLog in a copy of the store: the copy holds every
// event, and no log goes with it.
func forgetLog(f *os.File) error {
	db, err := bolt.Open(f.Name(), 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true})
	if err != nil {
		return fmt.Errorf("opening the copy: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bMeta); m != nil && m.Get(kLog) != nil {
			return m.Delete(kLog)
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the copy's log mark: %w", err)
	}
	return nil
}
