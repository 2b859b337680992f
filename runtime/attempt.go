package runtime

import (
	"time"

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

// The confirmations of a receipt.
const (
	Confirmed    Confirmation = "confirmed"
	Contradicted Confirmation = "contradicted"
	Unconfirmed  Confirmation = "unconfirmed"
	NotChecked   Confirmation = "not_checked"
)

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
	// Digest binds the attempt to the exact act.
	Digest string       `json:"digest"`
	State  AttemptState `json:"state"`
	// Authorization names what authorized it: a verdict or an approval.
	Authorization string    `json:"authorization,omitempty"`
	Receipt       *Receipt  `json:"receipt,omitempty"`
	Why           string    `json:"why,omitempty"`
	Updated       time.Time `json:"updated"`
}

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
