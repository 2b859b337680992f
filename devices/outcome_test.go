package devices

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	cause := errors.New("no ack within 200ms")
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{nil, OutcomeDone},
		{errors.New("boom"), OutcomeFailed},
		{UnknownOutcome(cause), OutcomeUnknown},
		{&OpError{Op: "write", Device: "pump-1", Err: UnknownOutcome(cause)}, OutcomeUnknown},
		// A lost link mid-write may have sent the command: unknown wins.
		{UnknownOutcome(Offline(cause)), OutcomeUnknown},
		{Offline(cause), OutcomeOffline},
		{fmt.Errorf("port: %w", ErrOffline), OutcomeOffline},
		{Refused("0x02", "illegal data address"), OutcomeRefused},
		{&OpError{Op: "write", Err: Refused("BadNodeIdUnknown", "")}, OutcomeRefused},
		{BadRequest("pin 99 does not exist"), OutcomeBadRequest},
		{ErrNotWritable, OutcomeBadRequest},
		// A context error is for the caller to judge.
		{context.DeadlineExceeded, OutcomeFailed},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	err := &OpError{Op: "write", Device: "pump-1", Capability: "on", Err: UnknownOutcome(cause)}
	if !errors.Is(err, cause) {
		t.Errorf("%v does not wrap its cause", err)
	}
	if got, want := err.Error(), "write pump-1.on: outcome unknown: no ack within 200ms"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	code, ok := RefusalCode(fmt.Errorf("x: %w", Refused("0x02", "illegal data address")))
	if !ok || code != "0x02" {
		t.Errorf("RefusalCode = %q, %v", code, ok)
	}
	if _, ok := RefusalCode(Offline(nil)); ok {
		t.Error("an offline device has no refusal code")
	}
}
