// Package journal is the durable witness of the runtime: a runtime.Journal
// kept in one bbolt file in the state directory, hash-chained, group
// committed, and recovered on start.
//
// # The file
//
// The file is opened once, with an exclusive lock; a second opener waits a
// moment and then fails with a *LockedError naming the file and, from the
// pid file written beside it, the process that holds it. Every subsystem
// shares the file through its own buckets:
//
//	journal    events, key = big-endian uint64 sequence
//	effects    actuation attempts (JSON), key = idempotency key
//	approvals  approvals (JSON), key = id
//	rules      rules (JSON), key = id
//	runs       runs (JSON), key = id
//	state      "mode", "reading/<device>.<capability>", "receipt/<device>.<capability>" (JSON)
//	outbox     messages waiting for the uplink
//	meta       "schema", "head", "anchor", "bytes"
//	sessions   console sessions (JSON), key = SHA-256 of the session cookie
//
// meta "schema" is a big-endian uint32. A file with a newer schema than this
// build knows is refused with a *SchemaError, never rewritten.
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
//	u8   format, always 1
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
// u64 and i64 are 8 bytes big-endian (i64 in two's complement); str is a
// u32 big-endian byte length followed by the bytes. An outside tool can
// re-verify the chain from this alone: walk the journal bucket in key order,
// check that each key equals the seq inside, that prev equals the hash of
// the event before (or the anchor), and that hash is as above.
//
// Retention deletes the oldest events. The last one deleted is kept as meta
// "anchor" (u64 seq ‖ 32-byte hash): the first event left must follow it.
// meta "head" (the same layout) names the newest event, so a truncated tail
// is found too.
//
// # Durability
//
// One writer goroutine commits every append. Sync commits (actuation
// attempts, approvals, rules, mode changes) return once their batch is
// fsync'd, and concurrent ones share a single fsync. Async commits
// (readings, telemetry) return at once and are committed within
// Options.FlushInterval. If a write fails the journal fails closed: every
// later commit returns the error, and Err says why, until a restart.
package journal
