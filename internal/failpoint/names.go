package failpoint

// The failpoints, one per durable step of the write path and of what
// shares the journal's file. All lists them; a test keeps the list and the
// call sites in step.
const (
	// ActBeforeExecuting is before an actuation's executing record is
	// committed: its staged and authorized records are (at least) queued.
	// An error is taken as the commit's: the act is not made.
	ActBeforeExecuting = "act:before-executing"
	// ActAfterExecuting is after the executing record is durable and
	// before the driver is called. An error is taken as the driver's, of
	// unknown outcome: the driver is not called and the actuator locks.
	ActAfterExecuting = "act:after-executing"
	// ActAfterDriver is after the driver's write returned and before the
	// receipt is committed. An error replaces a driver's success, as a
	// lost acknowledgement would: the outcome is unknown.
	ActAfterDriver = "act:after-driver"
	// ActAfterReceipt is after the receipt is durable and before anyone
	// is answered. An error is ignored: the act is done.
	ActAfterReceipt = "act:after-receipt"

	// JournalBeforeWrite is in the group commit, once the batch is
	// encoded and before its frame is written to the log. An error fails
	// the write: the journal fails closed.
	JournalBeforeWrite = "journal:commit:before-write"
	// JournalLogTorn is in the middle of writing a frame to the log: half
	// of it is written, the rest not, and nothing is synced. Exit there
	// to leave a torn write. An error fails the write.
	JournalLogTorn = "journal:log:torn"
	// JournalAfterWrite is in the group commit after the log's fdatasync
	// returned and before a waiter is released, while the store does not
	// hold the batch yet. An error is taken as the write's, as an fsync
	// error would be: the journal fails closed.
	JournalAfterWrite = "journal:commit:after-write"
	// JournalStoreBatch is inside the bbolt transaction that applies a
	// batch of the log to the store, after its puts and before bbolt
	// commits. An error fails the store's write: the journal fails closed.
	JournalStoreBatch = "journal:store:batch"
	// JournalLogRemove is before each log segment the store holds is
	// removed. An error leaves it for the next time.
	JournalLogRemove = "journal:log:remove"
	// JournalPruneEvents is inside the transaction that deletes the
	// oldest events beyond the retention bounds, after the deletes. An
	// error fails that write.
	JournalPruneEvents = "journal:prune:events"
	// JournalPruneRecords is after the records that ended before the
	// retention window were chosen and before their deletion is queued.
	// An error skips this pruning.
	JournalPruneRecords = "journal:prune:records"
	// JournalCheckpoint is after a checkpoint is signed and before its
	// event is queued. An error skips this checkpoint.
	JournalCheckpoint = "journal:checkpoint"
	// SessionWrite is after a console session's event is durable and
	// before the session is handed out. An error fails the login.
	SessionWrite = "journal:session"
	// OutboxAppend is inside the transaction that queues uplink messages
	// (and moves the cursor), after the puts. An error fails the append.
	OutboxAppend = "outbox:append"
	// OutboxAck is inside the transaction that deletes delivered uplink
	// messages, after the deletes. An error fails the acknowledgement.
	OutboxAck = "outbox:ack"
	// OutboxTrim is inside the transaction that drops the oldest
	// telemetry beyond the outbox's bound. An error fails the trim.
	OutboxTrim = "outbox:trim"

	// GatewayReload is in a reload, once the new file was read and
	// checked and before its change is journaled and put in force. An
	// error refuses the reload, changing nothing.
	GatewayReload = "gateway:reload"
)

// The environment a process built with the tag arms its failpoints from:
// EnvSpec holds the name=action terms, EnvArm the file that holds them
// back until it exists (see the package doc).
const (
	EnvSpec = "SHADOWGATE_FAILPOINTS"
	EnvArm  = "SHADOWGATE_FAILPOINTS_ARM"
)

// All lists every failpoint, in the order of the write path.
var All = []string{
	ActBeforeExecuting, ActAfterExecuting, ActAfterDriver, ActAfterReceipt,
	JournalBeforeWrite, JournalLogTorn, JournalAfterWrite, JournalStoreBatch, JournalLogRemove, JournalPruneEvents, JournalPruneRecords, JournalCheckpoint,
	SessionWrite, OutboxAppend, OutboxAck, OutboxTrim, GatewayReload,
}
