package runtime

import (
	"encoding/json"
	"time"
)

// Kind names what an event records.
type Kind string

// The event kinds.
const (
	KindStarted           Kind = "started"
	KindInvoked           Kind = "invoked"
	KindObserved          Kind = "observed"
	KindRefused           Kind = "refused"
	KindFailed            Kind = "failed"
	KindApprovalRequested Kind = "approval_requested"
	KindApprovalAnswered  Kind = "approval_answered"
	KindApprovalExpired   Kind = "approval_expired"
	KindActed             Kind = "acted"
	KindAlarm             Kind = "alarm"
	KindModeChanged       Kind = "mode_changed"
	KindRuleAdded         Kind = "rule_added"
	KindRuleRevoked       Kind = "rule_revoked"
	KindDeviceOnline      Kind = "device_online"
	KindDeviceOffline     Kind = "device_offline"
	KindEnded             Kind = "ended"
	// KindRecovered records what a start found of an attempt cut short by a
	// stop: abandoned before execution (refused), or executing (unknown).
	KindRecovered Kind = "recovered"
	// KindReconciled records an unknown attempt settled by a read-back or by
	// an admin, which lifts the lock on its actuator.
	KindReconciled Kind = "reconciled"
	// KindConfigChanged records a configuration file read again and put in
	// force (a reload).
	KindConfigChanged Kind = "config_changed"
)

// Event is one entry of the journal. Seq is assigned by the journal and
// grows by one for every event; subscribers resume from it. A durable
// journal also sets Mono, BootID, Prev and Hash, chaining every event to the
// one before it.
type Event struct {
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
	// Mono is nanoseconds on the monotonic clock of the boot that wrote the
	// event; it orders events even when the wall clock jumps.
	Mono   int64  `json:"mono,omitempty"`
	BootID string `json:"boot_id,omitempty"`
	Kind   Kind   `json:"kind"`
	// Run and Step place the event in a run; Run is empty for events of the
	// gateway itself (a scheduled poll, a device going offline).
	Run  string `json:"run,omitempty"`
	Step int    `json:"step,omitempty"`
	// Device is the device the event concerns, if any, for filtering.
	Device string `json:"device,omitempty"`
	// Body is the kind-specific content, a JSON object.
	Body json.RawMessage `json:"body,omitempty"`
	// Prev and Hash chain the event, in hex: Hash covers the event and Prev,
	// and Prev is the Hash of the event before.
	Prev string `json:"prev,omitempty"`
	Hash string `json:"hash,omitempty"`
}

// Durability says when a commit returns.
type Durability uint8

const (
	// Async commits may return before the entry is durable; the journal
	// makes it durable with the next sync commit or within its flush
	// interval (seconds, not milliseconds), and in order. Readings and
	// telemetry use it.
	Async Durability = iota
	// Sync commits return only once the entry is durable. Actuation records,
	// approvals, rules and mode changes use it.
	Sync
	// Prompt commits return at once, as Async ones, but the journal writes
	// them without waiting for its flush interval: an answer someone is
	// waiting for (a command refused or failed, a login refused) reaches
	// the readers of the journal, MQTT among them, as soon as it is
	// durable. It costs a write, shared with whatever else waits.
	Prompt
)
