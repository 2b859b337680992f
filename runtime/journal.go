package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
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
}

// Snapshot is the folded state a journal holds: what a start needs to
// carry on where the last one stopped.
type Snapshot struct {
	LastSeq uint64
	// Approvals holds the pending approvals.
	Approvals []Approval
	// Rules holds the rules not revoked.
	Rules []RuleRecord
	// Runs holds the runs that had not ended.
	Runs []RunRecord
	// Open holds attempts that are not terminal.
	Open []Attempt
	Mode *ModeRecord
	// States holds the last known state of every capability.
	States []StateRecord
}

// StateRecord is the last known state of one capability: its latest
// reading and, for an actuator, the receipt of its latest actuation.
type StateRecord struct {
	Device     string           `json:"device"`
	Capability string           `json:"capability"`
	Reading    *devices.Reading `json:"reading,omitempty"`
	Receipt    *Receipt         `json:"receipt,omitempty"`
}

// Errors of the journal.
var (
	// ErrIllegalTransition is returned when an attempt record skips or
	// reverses a state.
	ErrIllegalTransition = errors.New("illegal attempt transition")
	// ErrJournalClosed is returned after Close.
	ErrJournalClosed = errors.New("journal closed")
)

// ApprovalStatus is where an approval stands.
type ApprovalStatus string

// The statuses of an approval.
const (
	ApprovalPending    ApprovalStatus = "pending"
	ApprovalApproved   ApprovalStatus = "approved"
	ApprovalDenied     ApprovalStatus = "denied"
	ApprovalExpired    ApprovalStatus = "expired"
	ApprovalSuperseded ApprovalStatus = "superseded"
)

// Decision is a person's answer to an approval.
type Decision string

// The answers a person can give.
const (
	Approve        Decision = "approve"
	Deny           Decision = "deny"
	ApproveAndRule Decision = "approve_and_rule"
)

// AnswerRecord is one person's answer, as the journal keeps it.
type AnswerRecord struct {
	By       string    `json:"by"`
	Decision Decision  `json:"decision"`
	Reason   string    `json:"reason,omitempty"`
	Rule     string    `json:"rule,omitempty"`
	At       time.Time `json:"at"`
}

// Authorization is the single-use permission an approval issues: it is
// bound to the digest of the exact act and valid for a short window.
type Authorization struct {
	ID         string    `json:"id"`
	Digest     string    `json:"digest"`
	ValidUntil time.Time `json:"valid_until"`
	Used       bool      `json:"used"`
}

// Approval is a parked step waiting for people, or the record of how they
// answered. It is evidence of consent; the act itself runs on the
// Authorization it issues.
type Approval struct {
	ID   string `json:"id"`
	Run  string `json:"run"`
	Step int    `json:"step"`
	// Key is the idempotency key of the act.
	Key string `json:"key"`
	// Kind is "actuation" or "mode_change".
	Kind       string      `json:"kind"`
	Device     string      `json:"device,omitempty"`
	Capability string      `json:"capability,omitempty"`
	Value      value.Value `json:"value"`
	// Current is the capability's last known value when asked.
	Current *value.Value `json:"current,omitempty"`
	// Mode is the mode a mode change asks for.
	Mode      string `json:"mode,omitempty"`
	Principal string `json:"principal"`
	Origin    string `json:"origin"`
	Reason    string `json:"reason,omitempty"`
	// Why says why the step was asked; Stage and Field say what crossed.
	Why   string `json:"why"`
	Stage string `json:"stage"`
	Field string `json:"field,omitempty"`
	// Interlocks are the conditions the act depends on.
	Interlocks []string `json:"interlocks,omitempty"`
	// Required is how many different people must approve.
	Required      int            `json:"required"`
	AdminOnly     bool           `json:"admin_only,omitempty"`
	RequestedAt   time.Time      `json:"requested_at"`
	Expires       time.Time      `json:"expires"`
	Status        ApprovalStatus `json:"status"`
	Answers       []AnswerRecord `json:"answers,omitempty"`
	Authorization *Authorization `json:"authorization,omitempty"`
}

// RuleRecord is a rule as the journal keeps it, with whether it was revoked.
type RuleRecord struct {
	Rule      governance.Rule `json:"rule"`
	MadeAt    time.Time       `json:"made_at"`
	Revoked   bool            `json:"revoked,omitempty"`
	RevokedBy string          `json:"revoked_by,omitempty"`
}

// RunStatus is where a run stands.
type RunStatus string

// The statuses of a run. A run that ended says why.
const (
	RunRunning RunStatus = "running"
	RunParked  RunStatus = "parked"
	RunEnded   RunStatus = "ended"
)

// EndReason says why a run ended.
type EndReason string

// The reasons a run ends.
const (
	EndCompleted      EndReason = "completed"
	EndRefused        EndReason = "refused"
	EndFailed         EndReason = "failed"
	EndLeaseExhausted EndReason = "lease_exhausted"
	EndCancelled      EndReason = "cancelled"
)

// RunRecord is a run as the journal keeps it.
type RunRecord struct {
	ID         string        `json:"id"`
	Plan       string        `json:"plan"`
	Principal  string        `json:"principal"`
	Origin     string        `json:"origin"`
	RequestID  string        `json:"request_id,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	Status     RunStatus     `json:"status"`
	Step       int           `json:"step"`
	Steps      int           `json:"steps"`
	Actuations int           `json:"actuations"`
	Spent      time.Duration `json:"spent"`
	Approval   string        `json:"approval,omitempty"`
	StartedAt  time.Time     `json:"started_at"`
	EndedAt    time.Time     `json:"ended_at,omitzero"`
	End        EndReason     `json:"end,omitempty"`
	Why        string        `json:"why,omitempty"`
	// ReplyTo is where the surface that took the run sends its outcome.
	ReplyTo string `json:"reply_to,omitempty"`
}

// ModeRecord is the mode in force and since when.
type ModeRecord struct {
	Name    string    `json:"name"`
	Since   time.Time `json:"since"`
	Expires time.Time `json:"expires,omitzero"`
	By      string    `json:"by"`
}
