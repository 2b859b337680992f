package devices

import (
	"context"
	"errors"
	"strconv"
)

// A driver says what became of a call with one of four typed errors, so
// that the runtime can tell "nothing happened" from "something may have
// happened". Each is matched with errors.Is (or errors.As for a refusal)
// and may be wrapped, in an *OpError or otherwise.
var (
	// ErrOutcomeUnknown says the command may have reached the device: a
	// timeout after sending, an acknowledgement that never came, a session
	// that dropped mid-write. The runtime locks the actuator and reads it
	// back, exactly as after a crash in the middle of a write.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrRefused says the device answered and refused: a Modbus exception,
	// an OPC-UA bad status. Nothing was done. A *RefusedError carries the
	// device's code.
	ErrRefused = errors.New("the device refused")
	// ErrBadRequest says the address or the value is one the driver or the
	// device cannot take. Nothing was sent.
	ErrBadRequest = errors.New("bad address or value")
)

// UnknownOutcome wraps cause as an unknown outcome: errors.Is matches both
// ErrOutcomeUnknown and cause.
func UnknownOutcome(cause error) error {
	if cause == nil {
		cause = errors.New("no answer")
	}
	return &outcomeError{kind: ErrOutcomeUnknown, cause: cause}
}

// Offline wraps cause as an offline device: nothing reached it. errors.Is
// matches both ErrOffline and cause.
func Offline(cause error) error {
	if cause == nil {
		return ErrOffline
	}
	return &outcomeError{kind: ErrOffline, cause: cause}
}

// BadRequest says why an address or value cannot be taken; errors.Is
// matches ErrBadRequest.
func BadRequest(why string) error {
	return &outcomeError{kind: ErrBadRequest, cause: errors.New(why)}
}

// outcomeError is a cause with the outcome it means.
type outcomeError struct {
	kind  error
	cause error
}

func (e *outcomeError) Error() string { return e.kind.Error() + ": " + e.cause.Error() }

func (e *outcomeError) Unwrap() []error { return []error{e.kind, e.cause} }

// RefusedError is a device's refusal with its own code: "0x02" (a Modbus
// exception), "BadNodeIdUnknown" (an OPC-UA status), "E3" (a line
// protocol's error). It matches ErrRefused with errors.Is.
type RefusedError struct {
	// Code is the device's code for the refusal, as the device gave it.
	Code string
	// Detail says what the code means, if the driver knows.
	Detail string
}

func (e *RefusedError) Error() string {
	s := "the device refused with code " + strconv.Quote(e.Code)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Refused returns a refusal with the device's code and what it means.
func Refused(code, detail string) error { return &RefusedError{Code: code, Detail: detail} }

// Outcome is what a driver error says became of the call.
type Outcome uint8

// The outcomes of a driver call.
const (
	// OutcomeDone is no error.
	OutcomeDone Outcome = iota
	// OutcomeFailed is an error the driver did not place: none of the
	// others. Nothing is known of what happened, so the runtime treats a
	// write that failed so as an unknown outcome (it locks and reads back);
	// a read that failed so changed nothing.
	OutcomeFailed
	// OutcomeUnknown is ErrOutcomeUnknown.
	OutcomeUnknown
	// OutcomeOffline is ErrOffline.
	OutcomeOffline
	// OutcomeRefused is ErrRefused.
	OutcomeRefused
	// OutcomeBadRequest is ErrBadRequest, ErrUnknownDevice,
	// ErrUnknownCapability, ErrNotWritable or ErrNotReadable.
	OutcomeBadRequest
)

// String names the outcome as the journal does.
func (o Outcome) String() string {
	switch o {
	case OutcomeDone:
		return "done"
	case OutcomeUnknown:
		return "unknown"
	case OutcomeOffline:
		return "offline"
	case OutcomeRefused:
		return "refused"
	case OutcomeBadRequest:
		return "bad_request"
	}
	return "failed"
}

// Classify says what err means for the call it came from. The unknown
// outcome is checked first: a timeout that wraps an offline link still
// may have sent the command. A context error is not classified here: a
// read that timed out changed nothing, a write that timed out may have, so
// the caller decides.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeDone
	case errors.Is(err, ErrOutcomeUnknown):
		return OutcomeUnknown
	case errors.Is(err, ErrRefused):
		return OutcomeRefused
	case errors.Is(err, ErrOffline):
		return OutcomeOffline
	case errors.Is(err, ErrBadRequest), errors.Is(err, ErrUnknownDevice), errors.Is(err, ErrUnknownCapability),
		errors.Is(err, ErrNotWritable), errors.Is(err, ErrNotReadable):
		return OutcomeBadRequest
	}
	return OutcomeFailed
}

// RefusalCode returns the device's code of a refusal in err's chain.
func RefusalCode(err error) (string, bool) {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Code, true
	}
	return "", false
}

// HealthReporter is a driver that can say whether its link works: a
// serial port that is open and answering, an OPC-UA session that is up.
// Health returns nil when the link works, or why it does not. It must
// honour ctx and not touch the hardware in a way that changes anything.
type HealthReporter interface {
	Health(ctx context.Context) error
}
