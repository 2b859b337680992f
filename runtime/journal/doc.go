// Package journal is the durable witness of the runtime: a runtime.Journal
// kept as an append-only log of hash-chained events (the durability path)
// and one bbolt file written from it in the background (the store of
// records, indexes and history), in the shape etcd keeps its WAL and its
// backend. It is group committed, and recovered on start.
//
// # The file
//
// The file is opened once, with an exclusive lock; a second opener waits a
// moment and then fails with a *LockedError naming the file and, from the
// pid file written beside it, the process that holds it. Every subsystem
// shares the file through its own buckets:
//
//	journal    events, key = big-endian uint64 sequence (of a block, its first)
//	effects    actuation attempts, key = idempotency key
//	approvals  approvals, key = id
//	rules      rules, key = id
//	runs       runs, key = id
//	state      "mode", "reading/<device>.<capability>", "receipt/<device>.<capability>"
//	outbox     messages waiting for the uplink
//	meta       "schema", "head", "anchor", "bytes"
//	sessions   console sessions, key = SHA-256 of the session cookie
//	index-starting, index-ended, index-ended-by   indexes: what a start loads, what retention may delete
//
// meta "schema" is a big-endian uint32. A file with a newer schema than this
// build knows is refused with a *SchemaError, never rewritten. A schema 1
// file (records not yet backed, see below) is upgraded at its first
// writable open: its records are adopted by "records" events.
//
// # Records are caches of events
//
// Every record of effects, approvals, rules, runs, state and sessions is
// stored as
//
//	u8 1 ‖ u64 seq ‖ JSON
//
// where seq is the event that made it, and that event lists the record among
// its record changes (format 2, below) with the SHA-256 of the JSON. Verify
// folds the record changes of every event and names each record that was
// inserted, modified or deleted behind the journal's back; a start checks
// every record it loads against its event, and the whole chain and every
// record in the background, and fails closed (no more writes, reads go on)
// on the first disagreement; records it names are never honoured after.
// Retention's deletions are events too ("records" with delete-if changes).
// A file whose meta says schema 1 but whose chain or records were written
// by schema 2 is refused as altered, never adopted.
//
// Pruning events is an event as well: a "records" event whose body names
// {"prune_through": N, "hash": …} carries the live records (pending
// approvals, rules in force, open attempts, runs not ended, the state,
// sessions not expired) backed by events up to N, and the transaction that
// writes it deletes those events (at most 4096 at a time) and makes N the
// anchor. Verify requires the anchor to be the one the newest such event
// names, so events deleted from the start with a forged anchor are found.
// History whose event was pruned is kept as it is: it can make nothing act.
//
// # The chain
//
// Every event is stored under its sequence as
//
//	canonical(event) ‖ prev ‖ hash
//
// where prev and hash are 32 bytes each, and
//
//	hash = SHA-256("shadowgate.journal.v1\x00" ‖ canonical(event) ‖ prev)
//
// prev is the hash of the event before; the first event ever written
// (sequence 1) has 32 zero bytes. canonical(event) is, in this order:
//
//	u8   format: 1, or 2 when record changes follow the body
//	u64  seq
//	i64  at, Unix nanoseconds (UTC wall clock)
//	i64  mono, nanoseconds on the writing boot's monotonic clock
//	str  boot_id
//	str  kind
//	str  run
//	i64  step
//	str  device
//	str  body, the JSON bytes exactly as stored
//
// and, in format 2 only, the record changes the event makes:
//
//	u32  count (at least 1), then for each:
//	str  bucket
//	str  key
//	u8   op: 1 put, 2 delete, 3 delete if the digest still matches,
//	     4 carry (re-back unchanged) if the digest still matches
//	32   SHA-256 of the record's JSON (zero for delete)
//
// u64 and i64 are 8 bytes big-endian (i64 in two's complement); str is a
// u32 big-endian byte length followed by the bytes.
//
// The store writes its events in blocks (a file written before blocks
// keeps the events it holds one a key, as above, and both may follow each
// other in one file). A block is stored under the sequence of its first
// event as
//
//	u8   3
//	u32  count, at least 1
//	32   prev of its first event
//	32   hash of its last event
//	     a zstd frame (RFC 8878) of the count events, each as
//	u8   format
//	vi   at minus the at of the event before in the block (of the first: minus 0)
//	vi   mono, the same way
//	uv   the length of the rest, then the rest: canonical(event) after mono
//
// where vi is a signed varint (zigzag, as Go's encoding/binary) and uv an
// unsigned one; the differences are taken and added modulo 2^64, as
// two's-complement 64-bit integers wrap. A block holds count consecutive
// events (at most 256; no more are added once their stored values,
// hashes counted, reach 64 KiB, and an event of more than 1 MiB is kept
// alone, one a key); the i-th (from 0) has the seq of
// the block's key plus i, and its canonical bytes are the format, that
// seq, at, mono and the rest. The hashes inside a block are not stored:
// each is computed from the one before, and the last computed must equal
// the block's. A block is the first byte 3; an event alone, 1 or 2.
//
// An outside tool can re-verify the chain from this alone: walk the
// journal bucket in key order, taking a block apart into its events; check
// that each event's seq follows the one before (the first key's, the
// anchor's), that prev equals the hash of the event before (or the
// anchor), that hash is as above, and that a block's last hash is its
// last event's.
//
// Retention deletes the oldest events; of a block it keeps the events past
// the prune, as a block under the first of them. The last one deleted is
// kept as meta "anchor" (u64 seq ‖ 32-byte hash): the first event left must
// follow it. meta "head" (the same layout) names the newest event, so a
// truncated tail is found too. meta "bytes" counts the bytes the events
// stored take one a key (canonical ‖ prev ‖ hash), whether or not they are
// in blocks: retention's byte bound counts what the events are, not what
// they compress to.
//
// # Checkpoints
//
// With Options.Checkpoint set, the journal writes a "checkpoint" event every
// Every events or Interval: a C2SP signed note (golang.org/x/mod/sumdb/note)
// whose text is the origin, the sequence of the newest event written and
// its hash in base64. The ed25519 key lives outside the file
// (CheckpointKey). A copy of the journal extends a checkpoint when its chain
// is whole and its event at that sequence still has the signed hash
// (DB.Extends, shadowgate journal verify --checkpoint).
//
// # The log
//
// The events go first to the log: the directory shadowgate.wal beside the
// store file (the store's name with .wal for .db), holding segment files
// named by a 16-digit hexadecimal index, NNNNNNNNNNNNNNNN.seg, consecutive.
// A segment starts with a 40-byte header
//
//	"SGWAL\x00\x01\x00" ‖ u64 index ‖ u64 first seq ‖ u64 size ‖ u32 0 ‖ u32 CRC
//
// where size is the length the file was made (a shorter file was
// truncated) and CRC is CRC-32C (Castagnoli) of the 36 bytes before it.
// Frames follow, one per group commit, each
//
//	u32 0x53474631 ‖ u32 len ‖ u64 first seq ‖ u32 count ‖ u8 codec ‖ 3 zero ‖ u32 CRC ‖ payload
//
// with CRC the CRC-32C of the segment's index (u64), the 24 header bytes
// before it and the payload. codec 2 is the payload as it is, 3 is it
// compressed with zstd (RFC 8878), 4 in Snappy's block format
// (github.com/google/snappy, format_description.txt): a frame a caller
// waits for is written in 4, which takes microseconds, and readings
// written at the flush interval in 3. Uncompressed, the payload is
//
//	32 prev of the first entry's event ‖ 32 hash of the last one's ‖ count entries, each
//	the event packed as in a block of the store (above) ‖ u8 flags ‖
//	uvarint n ‖ n × (uvarint len ‖ JSON)
//
// with one JSON per record change of the event, in its order: the record
// an opPut stores, empty for any other operation. The i-th entry's event
// has the frame's first seq plus i; its hash is computed from the one
// before, and the last computed must equal the frame's. Flag 1 marks a
// prune (its events are deleted when the store applies it). Codecs 0 (as
// it is) and 1 (DEFLATE, RFC 1951), written by earlier builds and still
// read, hold count entries, each
//
//	uvarint len ‖ the event's stored value (canonical ‖ prev ‖ hash) ‖ u8 flags ‖
//	uvarint n ‖ n × (uvarint len ‖ JSON)
//
// A frame with count 0 seals its segment: the next one follows. The first frame of a segment
// holds its first seq, each next frame the seq after the last one before.
// Integers are big-endian. Segments the store holds are kept (at most two)
// to be reused under a new index; what they held before is no frame of
// theirs, as its CRC names the old index. Where the file system allows it
// (Linux 6.1 and later say so through statx), frames are written with
// O_DIRECT in the file system's units (512 bytes on an SD card), not
// through the page cache: the rest of a frame's last unit is written as
// zeros, which end the log as a spare's past does.
//
// At open the log is read: a frame that fails its check with no valid
// frame after it in its segment ends the log (a torn write of the last
// segment is cut and logged); one with valid frames after it, a missing
// segment, a truncated one, or a log that does not continue the store's
// chain (a gap, another hash for a sequence both hold) makes the journal
// corrupt, and nothing is acted on. The store is then brought up to date
// from the log and the segments it holds are set aside.
//
// The store's meta key "log" (u64) names the segment a running gateway
// started its log with; it is set before anything is written to that
// segment, and deleted once the store holds the whole log, before the
// log is removed (a clean stop; a start). While it is set, the log must
// hold that segment or a later one: a log deleted, whole or all its
// segments, after any stop that did not close the journal makes it
// corrupt, whether or not the store already held all it said.
// A backup's copy has no such key: it holds every event, and no log goes
// with it. Not found at open: the newest frames of the last segment
// removed or altered after such a stop, which look like a torn write; the
// store does not record how far the log went. A signed checkpoint
// published off the device covers what it signed.
//
// # Durability
//
// One writer goroutine commits every append to the log: a frame and one
// fdatasync per batch. Sync commits (actuation attempts, approvals,
// rules, mode changes) return once their frame is durable, and concurrent
// ones share a single fdatasync. Async commits (readings, telemetry)
// return at once and ride with the next sync commit, or are written
// within Options.FlushInterval. Prompt commits (a command refused or
// failed, a login refused, a link's change) return at once too, but are
// written within a few milliseconds, with whatever waits. An event is served to readers (Events,
// and so the console, MCP, MQTT) once it is durable, whether or not the
// store holds it. The store is written by a second goroutine, every
// Options.StoreInterval or sooner once enough waits, in one bbolt
// transaction (two fdatasyncs); Load, Verify and Backup bring it up to the
// log first. If a write fails the journal fails closed: every later
// commit returns the error, and Err says why, until a restart.
package journal
