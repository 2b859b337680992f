package command

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
)

// Outcomes of a reply.
const (
	OutcomeActed = "acted"
	// OutcomeContradicted is an act whose read-back contradicted it: the
	// driver took the command, but the world did not follow. It is not a
	// success, and a client must not read it as one.
	OutcomeContradicted    = "contradicted"
	OutcomeCompleted       = "completed"
	OutcomeRefused         = "refused"
	OutcomePendingApproval = "pending_approval"
	OutcomeFailed          = "failed"
	OutcomeStarted         = "started"
)

// Reply is what a command gets back.
type Reply struct {
	ID string `json:"id"`
	// IDGenerated is true when the sender gave no id and the gateway made
	// this one.
	IDGenerated bool   `json:"id_generated,omitempty"`
	Outcome     string `json:"outcome"`
	// Why says why, for every outcome but acted, completed and started.
	Why string `json:"why,omitempty"`
	// ErrorID is set when the failure was not the client's doing: Why is
	// then a public message, and the gateway's log has the detail under
	// this id.
	ErrorID    string           `json:"error_id,omitempty"`
	Device     string           `json:"device,omitempty"`
	Capability string           `json:"capability,omitempty"`
	Plan       string           `json:"plan,omitempty"`
	Run        string           `json:"run,omitempty"`
	Approval   *ApprovalRef     `json:"approval,omitempty"`
	Receipt    *runtime.Receipt `json:"receipt,omitempty"`
	Reading    *devices.Reading `json:"reading,omitempty"`
	// Replayed is true when a repeated id got its first outcome again.
	Replayed bool `json:"replayed,omitempty"`
}

// ApprovalRef names the approval a command waits for.
type ApprovalRef struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
	Why     string    `json:"why"`
}

// replyFor turns an observation into a reply.
func replyFor(obs runtime.Observation) Reply {
	r := Reply{Device: obs.Device, Capability: obs.Capability, Run: obs.Run, Why: obs.Why, Receipt: obs.Receipt,
		Reading: obs.Reading, Replayed: obs.Replayed, ErrorID: obs.ErrorID}
	switch obs.Kind {
	case runtime.Acted:
		r.Outcome = OutcomeActed
		r.Why = ""
		switch {
		case obs.Receipt != nil && obs.Receipt.Confirmation.Discrepant():
			r.Outcome, r.Why = OutcomeContradicted, "the world did not follow the act ("+string(obs.Receipt.Confirmation)+"): "+obs.Receipt.Detail
		case obs.Receipt != nil && obs.Receipt.Confirmation != runtime.Confirmed:
			r.Why = "acted, " + string(obs.Receipt.Confirmation) + ": " + obs.Receipt.Detail
		}
	case runtime.Completed:
		r.Outcome, r.Why = OutcomeCompleted, ""
	case runtime.Refused:
		r.Outcome = OutcomeRefused
	case runtime.ApprovalRequest:
		r.Outcome = OutcomePendingApproval
		if a := obs.Approval; a != nil {
			r.Approval = &ApprovalRef{ID: a.ID, Expires: a.Expires, Why: a.Why}
			r.Why = "waiting for approval " + a.ID + ": " + a.Why
		}
	default:
		r.Outcome = OutcomeFailed
	}
	return r
}

// Refusal is the reply to a command that was not taken; id is the
// command's id as far as it could be read (see PeekID), or "".
func Refusal(r Route, id, outcome, why string) Reply {
	return Reply{ID: id, Device: r.Device, Capability: r.Capability, Plan: r.Plan, Outcome: outcome, Why: why}
}

// Encode is the JSON encoding of every payload the protocol publishes:
// compact, without a final newline, and without HTML escaping (a payload
// is read by machines, never embedded in a page), so that every surface
// sends the same bytes for the same thing.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EncodeReply encodes a reply. If it cannot be encoded (a value JSON
// cannot hold), the client still learns the outcome: it gets the reply's
// id, outcome and subject, with a public message and an error id that log
// records with the detail.
func EncodeReply(log *slog.Logger, r Reply) []byte {
	payload, err := Encode(r)
	if err == nil {
		return payload
	}
	pe := Internal(log, "the reply could not be encoded in full; the outcome is in the journal", err,
		"id", r.ID, "outcome", r.Outcome)
	short := Reply{ID: r.ID, IDGenerated: r.IDGenerated, Outcome: r.Outcome, Why: pe.Message, ErrorID: pe.ID,
		Device: r.Device, Capability: r.Capability, Plan: r.Plan, Run: r.Run, Replayed: r.Replayed}
	if r.Approval != nil {
		short.Approval = &ApprovalRef{ID: r.Approval.ID, Why: r.Approval.Why}
	}
	if payload, err = Encode(short); err != nil {
		// Only strings and booleans are left, which always encode.
		return []byte(`{"id":"","outcome":"failed","why":"the reply could not be encoded"}`)
	}
	return payload
}
