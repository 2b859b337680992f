package runtime

import (
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// AttemptState is where an actuation attempt stands.
type AttemptState string

// The states of an actuation attempt. An attempt moves
// staged → authorized → executing → receipt | failed | unknown, an unknown
// one may become reconciled, and a staged or authorized one may be refused.
const (
	AttemptStaged     AttemptState = "staged"
	AttemptAuthorized AttemptState = "authorized"
	AttemptExecuting  AttemptState = "executing"
	AttemptReceipt    AttemptState = "receipt"
	AttemptFailed     AttemptState = "failed"
	AttemptUnknown    AttemptState = "unknown"
	AttemptReconciled AttemptState = "reconciled"
	AttemptRefused    AttemptState = "refused"
)

// CanMoveTo reports whether an attempt in state s may move to t. The empty
// state is "no attempt yet", which may only become staged.
func (s AttemptState) CanMoveTo(t AttemptState) bool {
	switch s {
	case "":
		return t == AttemptStaged
	case AttemptStaged:
		return t == AttemptAuthorized || t == AttemptRefused
	case AttemptAuthorized:
		return t == AttemptExecuting || t == AttemptRefused
	case AttemptExecuting:
		return t == AttemptReceipt || t == AttemptFailed || t == AttemptUnknown
	case AttemptUnknown:
		return t == AttemptReconciled
	}
	return false
}

// Terminal reports whether no move leaves s.
func (s AttemptState) Terminal() bool {
	switch s {
	case AttemptReceipt, AttemptFailed, AttemptReconciled, AttemptRefused:
		return true
	}
	return false
}

// Confirmation says what the world confirmed after an actuation.
type Confirmation string

// The confirmations of a receipt. An actuation whose world did not follow
// is one of three discrepancy classes: it never started, it ended at the
// wrong value, or it reached the value and went back.
const (
	Confirmed Confirmation = "confirmed"
	// NotStarted: the confirming reading did not move from where it was
	// within start_within.
	NotStarted Confirmation = "not_started"
	// WrongFinal: within travel_within the reading did not reach the
	// commanded value or condition (it may have started).
	WrongFinal Confirmation = "wrong_final"
	// Returned: it reached the value, then left it within the watch
	// window.
	Returned Confirmation = "returned"
	// Unconfirmed: no good reading could be had to tell.
	Unconfirmed Confirmation = "unconfirmed"
	// NotChecked: nothing was configured to confirm it.
	NotChecked Confirmation = "not_checked"
)

// Discrepant reports whether the world did not follow the act: the act
// must never be taken for a success. Receipts journaled before the
// classes were told apart say "contradicted", which is discrepant too.
func (c Confirmation) Discrepant() bool {
	switch c {
	case NotStarted, WrongFinal, Returned, "contradicted":
		return true
	}
	return false
}

// Receipt is what an actuation did: what the driver answered and what the
// world confirmed.
type Receipt struct {
	Key        string      `json:"key"`
	Attempt    string      `json:"attempt"`
	Device     string      `json:"device"`
	Capability string      `json:"capability"`
	Value      value.Value `json:"value"`
	// Driver is what the driver answered: "ok" or its error.
	Driver       string       `json:"driver"`
	Confirmation Confirmation `json:"confirmation"`
	// Observed is what the read-back or the confirming sensor last saw.
	Observed *value.Value `json:"observed,omitempty"`
	Detail   string       `json:"detail,omitempty"`
	At       time.Time    `json:"at"`
	// Until is when the actuation's dead-man TTL runs out: unless the same
	// value is commanded again before then, the gateway drives the
	// actuator to its safe value. Zero when it has no TTL.
	Until time.Time `json:"until,omitzero"`
}

// Attempt is the journal's record of one actuation, keyed by its
// idempotency key (principal and request id, or run id and step).
type Attempt struct {
	Key        string      `json:"key"`
	ID         string      `json:"id"`
	Run        string      `json:"run"`
	Step       int         `json:"step"`
	Device     string      `json:"device"`
	Capability string      `json:"capability"`
	Value      value.Value `json:"value"`
	Principal  string      `json:"principal"`
	// Reason is why it was asked for: the request's reason, or what made
	// the gateway drive it to safe.
	Reason string `json:"reason,omitempty"`
	// Digest binds the attempt to the exact act.
	Digest string       `json:"digest"`
	State  AttemptState `json:"state"`
	// Authorization names what authorized it: a verdict or an approval.
	Authorization string    `json:"authorization,omitempty"`
	Receipt       *Receipt  `json:"receipt,omitempty"`
	Why           string    `json:"why,omitempty"`
	Updated       time.Time `json:"updated"`
}

// StateRecord is the last known state of one capability: its latest
// reading and, for an actuator, the receipt of its latest actuation.
type StateRecord struct {
	Device     string           `json:"device"`
	Capability string           `json:"capability"`
	Reading    *devices.Reading `json:"reading,omitempty"`
	Receipt    *Receipt         `json:"receipt,omitempty"`
}

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
