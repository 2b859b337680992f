package command

import (
	"slices"
	"strings"
)

// The topics of the protocol, relative to a surface's prefix
// ("shadowgate/<gateway-id>/" on the broker, the configured prefix
// upstream).
const (
	// TopicEvents carries every journal event.
	TopicEvents = "events"
	// TopicCheckpoints carries the newest signed checkpoint, retained.
	TopicCheckpoints = "checkpoints"
)

// StateTopic is the retained state topic of a capability.
func StateTopic(device, capability string) string { return "state/" + device + "/" + capability }

// ReceiptTopic is where the uplink forwards the receipts of a capability.
func ReceiptTopic(device, capability string) string { return "receipts/" + device + "/" + capability }

// ApprovalTopic holds a pending approval, retained while it is pending.
func ApprovalTopic(id string) string { return "approvals/" + id }

// AlarmTopic holds an alarm, retained while it stands (active or
// unacknowledged) and cleared by an empty message once it is back to
// normal.
func AlarmTopic(id string) string { return "alarms/" + id }

// AlarmIDOK reports whether an alarm id can be one topic level: not
// empty, and no "/", wildcard or NUL. The engine's ids (kind.device.
// capability, kind.plan) always can.
func AlarmIDOK(id string) bool { return id != "" && !strings.ContainsAny(id, "/+#\x00") }

// CommandFilters are the filters, relative to the prefix, that commands
// arrive on: cmd/<device>/<capability> and run/<plan>.
var CommandFilters = []string{"cmd/#", "run/#"}

// Route is where a publish under the gateway's prefix goes.
type Route struct {
	// Kind is "cmd", "run", or "" for a topic outside the scheme.
	Kind       string
	Device     string
	Capability string
	Plan       string
}

// ParseRoute reads a topic relative to the prefix.
func ParseRoute(rel string) Route {
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 3 && parts[0] == "cmd" && parts[1] != "" && parts[2] != "":
		return Route{Kind: "cmd", Device: parts[1], Capability: parts[2]}
	case len(parts) == 2 && parts[0] == "run" && parts[1] != "":
		return Route{Kind: "run", Plan: parts[1]}
	}
	return Route{}
}

// ReplyTopic is the default reply topic of a route, relative to the prefix.
func (r Route) ReplyTopic() string {
	switch r.Kind {
	case "cmd":
		return "reply/" + r.Device + "/" + r.Capability
	case "run":
		return "reply/run/" + r.Plan
	}
	return "reply/error"
}

// outputs are the first levels of the topics only the gateway publishes.
var outputs = []string{"state", "reply", "events", "approvals", "alarms", "status", "checkpoints", "ha"}

// IsOutput reports whether rel, a topic relative to the prefix, is one
// only the gateway publishes (state/, reply/, events, approvals/, alarms/,
// status, checkpoints, and ha/, Home Assistant's state and outcomes): no
// client may publish there, directly, by a will, by a retained message or
// through a v5 Response Topic.
func IsOutput(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return slices.Contains(outputs, first)
}

// IsCommand reports whether rel, a topic relative to the prefix, is one
// the gateway takes commands on: cmd/ or run/.
func IsCommand(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return first == "cmd" || first == "run"
}
