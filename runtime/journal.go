package runtime

import (
	"context"
	"errors"
	"time"
)

// Journal is the durable witness of everything the engine decides: the
// event stream and the records folded from it (actuation attempts,
// approvals, rules, runs, the mode).
//
// A Commit appends one event and, in the same atomic write, upserts the
// records the entry carries. A journal may batch many commits into one
// durable write (group commit); Sync commits return only once durable, Async
// commits return at once and become durable soon, in order. Implementations
// must be safe for concurrent use.
type Journal interface {
	// Commit appends e.Event, assigning its Seq, and stores the records of
	// e. An attempt record must follow AttemptState.CanMoveTo from the stored
	// one, or Commit returns ErrIllegalTransition and stores nothing.
	Commit(ctx context.Context, e Entry) (Event, error)
	// Events returns up to limit events with Seq > since, in order.
	Events(ctx context.Context, since uint64, limit int) ([]Event, error)
	// Attempt returns the attempt with the idempotency key.
	Attempt(ctx context.Context, key string) (Attempt, bool, error)
	// Load returns the records needed to resume after a start.
	Load(ctx context.Context) (Snapshot, error)
	// Err returns nil while the journal can witness, or why it cannot: a
	// write failed, the disk is full, the file is corrupt, or it is closed.
	// Once a durable journal has failed it stays failed until restarted.
	Err() error
	// Close flushes and releases the journal.
	Close() error
}

// Entry is one commit: an event and the records it changes.
type Entry struct {
	Event      Event
	Durability Durability
	Attempt    *Attempt
	Approval   *Approval
	Rule       *RuleRecord
	Run        *RunRecord
	Mode       *ModeRecord
	// State updates the last known state of a capability: its reading, its
	// receipt, or both, whichever is set.
	State *StateRecord
	// Alarm updates an alarm's record.
	Alarm *Alarm
}

// Snapshot is the folded state a journal holds: what a start needs to
// carry on where the last one stopped.
type Snapshot struct {
	LastSeq uint64
	// LastAt is the time of the newest event: until then, at least, the
	// gateway was running.
	LastAt time.Time
	// Approvals holds the pending approvals.
	Approvals []Approval
	// Rules holds the rules not revoked.
	Rules []RuleRecord
	// Runs holds the runs that had not ended.
	Runs []RunRecord
	// Ended holds the ended plan runs that a request id started, while
	// their records are kept: a start sent again with the same id after a
	// restart is that run, not a new one.
	Ended []RunRecord
	// Open holds attempts that are not terminal.
	Open []Attempt
	Mode *ModeRecord
	// States holds the last known state of every capability.
	States []StateRecord
	// Alarms holds every alarm's record, those back to normal included.
	Alarms []Alarm
}

// Errors of the journal.
var (
	// ErrIllegalTransition is returned when an attempt record skips or
	// reverses a state.
	ErrIllegalTransition = errors.New("illegal attempt transition")
	// ErrJournalClosed is returned after Close.
	ErrJournalClosed = errors.New("journal closed")
)

// TransitionError is an illegal attempt transition. It matches
// ErrIllegalTransition with errors.Is.
type TransitionError struct {
	Key      string
	From, To AttemptState
}

func (e *TransitionError) Error() string {
	from := string(e.From)
	if from == "" {
		from = "(none)"
	}
	return "attempt " + e.Key + ": illegal transition " + from + " -> " + string(e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }
