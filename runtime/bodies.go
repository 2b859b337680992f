package runtime

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

// The body of every event kind is one of the types below, so that the
// journal, the surfaces and the people who read the JSON agree on its
// fields. The fields of a body are in the order of their JSON names, so a
// body encodes exactly as the object it replaced did.
//
//	started            StartedBody
//	invoked            AttemptBody
//	observed           ObservedBody
//	refused            RefusedBody
//	failed             FailedBody
//	approval_requested Approval
//	approval_answered  AnsweredBody when a person answered; ClosedBody
//	                   (status "superseded") when the gateway closed it
//	approval_expired   ClosedBody
//	acted              Receipt
//	alarm              AlarmBody
//	mode_changed       ModeChangedBody
//	rule_added         RuleRecord
//	rule_revoked       RuleRevokedBody
//	config_changed     ConfigChangedBody
//	device_online      DeviceBody
//	device_offline     DeviceBody
//	ended              EndedBody
//	recovered          RecoveredBody
//	reconciled         ReconciledBody
//	checkpoint         CheckpointBody
//	login              LoginBody
//	link               LinkBody
//	safe_drive         SafeDriveBody
//	drift              DriftBody
//	schedule_skipped   ScheduleSkippedBody
//	schedule_missed    ScheduleMissedBody

// StartedBody is the body of a started event. A run restored after a
// restart names the step it resumes at and the approval it waits for.
type StartedBody struct {
	Approval      string `json:"approval,omitempty"`
	Origin        string `json:"origin"`
	Plan          string `json:"plan"`
	Principal     string `json:"principal"`
	Reason        string `json:"reason"`
	RequestID     string `json:"request_id"`
	ResumedAtStep int    `json:"resumed_at_step,omitempty"`
}

// AttemptBody is the body of an invoked event: an attempt as it moves
// through staged, authorized and executing.
type AttemptBody struct {
	Attempt       string       `json:"attempt"`
	Authorization string       `json:"authorization"`
	Capability    string       `json:"capability"`
	Device        string       `json:"device"`
	Key           string       `json:"key"`
	Principal     string       `json:"principal"`
	Reason        string       `json:"reason,omitempty"`
	State         AttemptState `json:"state"`
	Value         value.Value  `json:"value"`
}

// ObservedBody is the body of an observed event: one reading.
type ObservedBody struct {
	Device     string      `json:"device"`
	Capability string      `json:"capability"`
	Value      value.Value `json:"value"`
	Quality    string      `json:"quality"`
	At         time.Time   `json:"at"`
	Principal  string      `json:"principal"`
}

// RefusedBody is the body of a refused event: what was refused and what
// decided it.
type RefusedBody struct {
	Device     string       `json:"device,omitempty"`
	Capability string       `json:"capability,omitempty"`
	Value      *value.Value `json:"value,omitempty"`
	Why        string       `json:"why"`
	Stage      string       `json:"stage"`
	Mode       string       `json:"mode,omitempty"`
	Rule       string       `json:"rule,omitempty"`
	Interlock  string       `json:"interlock,omitempty"`
}

// FailedBody is the body of a failed event. Outcome says what the
// driver's error meant (devices.Outcome: "offline", "refused", "unknown",
// "bad_request", "failed") when a driver failed; Code is the device's own
// code of a refusal.
type FailedBody struct {
	Attempt    string       `json:"attempt,omitempty"`
	Capability string       `json:"capability"`
	Code       string       `json:"code,omitempty"`
	Device     string       `json:"device"`
	Error      string       `json:"error"`
	Outcome    string       `json:"outcome,omitempty"`
	Receipt    *Receipt     `json:"receipt,omitempty"`
	State      AttemptState `json:"state,omitempty"`
}

// ReadFailed reports whether the failure is of a read the driver failed
// (it has an outcome, where a write's has an attempt or a receipt): the
// last value read is no longer good.
func (b *FailedBody) ReadFailed() bool {
	return b.Attempt == "" && b.Receipt == nil && b.Outcome != ""
}

// AnsweredBody is the body of an approval_answered event that a person
// gave. Approval and Status are also those of a ClosedBody, so a reader
// that needs only them reads either.
type AnsweredBody struct {
	Approval   string   `json:"approval"`
	By         string   `json:"by"`
	Capability string   `json:"capability"`
	Decision   Decision `json:"decision"`
	Device     string   `json:"device"`
	Person     string   `json:"person"`
	Reason     string   `json:"reason"`
	// Record is the approval as it stands after this answer, when it is
	// still pending (one of several approvals): what a surface republishes.
	Record  *Approval      `json:"record,omitempty"`
	Rule    string         `json:"rule"`
	RuleWhy string         `json:"rule_why,omitempty"`
	Status  ApprovalStatus `json:"status"`
	// Value is the value an actuation was approved or denied for.
	Value *value.Value `json:"value,omitempty"`
}

// ClosedBody is the body of an approval_expired event: an approval that
// expired or was superseded.
type ClosedBody struct {
	Approval   string         `json:"approval"`
	Capability string         `json:"capability"`
	Device     string         `json:"device"`
	Status     ApprovalStatus `json:"status"`
	Why        string         `json:"why"`
}

// ModeChangedBody is the body of a mode_changed event. Expires is zero
// for a mode without a time limit.
type ModeChangedBody struct {
	By      string    `json:"by"`
	Expires time.Time `json:"expires"`
	From    string    `json:"from"`
	Reason  string    `json:"reason"`
	To      string    `json:"to"`
}

// RuleRevokedBody is the body of a rule_revoked event.
type RuleRevokedBody struct {
	By   string `json:"by"`
	Rule string `json:"rule"`
}

// ConfigChangedBody is the body of a config_changed event: which file was
// put in force, its digest, and what changed in what the engine holds.
type ConfigChangedBody struct {
	File string `json:"file"`
	// Digest is the SHA-256 of the file, in hexadecimal.
	Digest  string   `json:"digest"`
	Changes []string `json:"changes"`
	// Restart names the sections of the file that changed and are not
	// taken live: they wait for a restart.
	Restart []string `json:"restart,omitempty"`
	By      string   `json:"by"`
}

// DeviceBody is the body of device_online and device_offline events.
type DeviceBody struct {
	Device string `json:"device"`
	// Reason says why a device went offline, as its driver told it.
	Reason string `json:"reason,omitempty"`
}

// EndedBody is the body of an ended event.
type EndedBody struct {
	Actuations int       `json:"actuations"`
	End        EndReason `json:"end"`
	Spent      string    `json:"spent"`
	Steps      int       `json:"steps"`
	Why        string    `json:"why"`
}

// RecoveredBody is the body of a recovered event: what a start found of
// an attempt cut short by a stop.
type RecoveredBody struct {
	Attempt    string       `json:"attempt"`
	Capability string       `json:"capability"`
	Device     string       `json:"device"`
	From       AttemptState `json:"from"`
	Key        string       `json:"key"`
	To         AttemptState `json:"to"`
	Value      value.Value  `json:"value"`
	Why        string       `json:"why"`
}

// ReconciledBody is the body of a reconciled event.
type ReconciledBody struct {
	Attempt    string       `json:"attempt"`
	By         string       `json:"by"`
	Capability string       `json:"capability"`
	Device     string       `json:"device"`
	Found      Found        `json:"found"`
	Key        string       `json:"key"`
	Observed   *value.Value `json:"observed"`
	// Receipt is the act's receipt as the read-back confirmed it, when the
	// reconciliation found that it acted.
	Receipt *Receipt    `json:"receipt,omitempty"`
	Value   value.Value `json:"value"`
	Why     string      `json:"why"`
}

// LoginBody is the body of a login event: a login or logout on the
// console ("login", "logout"), or a summary of failed logins from one
// address over one window ("login_failed"), which names users, never a
// password or a token.
type LoginBody struct {
	Action     string    `json:"action"`
	Addresses  int       `json:"addresses,omitempty"`
	Failures   int       `json:"failures,omitempty"`
	First      time.Time `json:"first,omitzero"`
	Last       time.Time `json:"last,omitzero"`
	LockedOut  bool      `json:"locked_out,omitempty"`
	OtherUsers int       `json:"other_users,omitempty"`
	Refused    int       `json:"refused,omitempty"`
	Remote     string    `json:"remote"`
	Surface    string    `json:"surface"`
	User       string    `json:"user,omitempty"`
	Users      []string  `json:"users,omitempty"`
	Why        string    `json:"why,omitempty"`
}

// LinkBody is the body of a link event: the uplink's link changed state.
type LinkBody struct {
	Backlog      int    `json:"backlog"`
	BacklogBytes int64  `json:"backlog_bytes"`
	Broker       string `json:"broker"`
	Dropped      int64  `json:"dropped"`
	Link         string `json:"link"`
	State        string `json:"state"`
	Why          string `json:"why"`
}

// DecodeBody decodes ev's body into v, naming the event when it cannot.
func (ev Event) DecodeBody(v any) error {
	if len(ev.Body) == 0 {
		return fmt.Errorf("event %d (%s) has no body", ev.Seq, ev.Kind)
	}
	if err := json.Unmarshal(ev.Body, v); err != nil {
		return fmt.Errorf("event %d (%s): %w", ev.Seq, ev.Kind, err)
	}
	return nil
}
