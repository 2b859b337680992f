package mqtt

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Matches reports whether the topic filter matches the topic name, with
// MQTT's wildcards: "+" is one level, a final "#" is any number of levels,
// the parent included.
func Matches(filter, topic string) bool {
	f := strings.Split(filter, "/")
	t := strings.Split(topic, "/")
	for i, level := range f {
		if level == "#" {
			return i == len(f)-1
		}
		if i >= len(t) || (level != "+" && level != t[i]) {
			return false
		}
	}
	return len(f) == len(t)
}

// Covers reports whether every topic that filter can match is matched by
// pattern, so that a subscription to filter may be allowed by pattern.
func Covers(pattern, filter string) bool {
	p := strings.Split(pattern, "/")
	f := strings.Split(filter, "/")
	for i, level := range p {
		if level == "#" {
			return i == len(p)-1
		}
		if i >= len(f) {
			return false
		}
		switch {
		case f[i] == "#":
			return false // the filter reaches further than the pattern
		case level == "+":
		case f[i] == "+" || level != f[i]:
			return false
		}
	}
	return len(p) == len(f)
}

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
var outputs = []string{"state", "reply", "events", "approvals", "alarms", "status", "checkpoints"}

// reserved reports whether rel, a topic relative to the prefix, is one only
// the gateway publishes: no client may publish there, directly, by a will,
// by a retained message or through a v5 Response Topic.
func reserved(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return slices.Contains(outputs, first)
}

// inbound reports whether rel, a topic relative to the prefix, is one the
// gateway takes commands on: cmd/ or run/.
func inbound(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return first == "cmd" || first == "run"
}

// topicName says why s is not a topic name a client may have the gateway
// or the broker publish on (a will, a response topic), or "".
func topicName(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case strings.ContainsAny(s, "#+"):
		return "it holds a wildcard"
	case strings.HasPrefix(s, "$"):
		return "topics starting with $ belong to the broker"
	case strings.ContainsRune(s, 0) || !utf8.ValidString(s):
		return "it is not valid UTF-8 text"
	case len(s) > 65535:
		return "it is longer than 65535 bytes"
	}
	return ""
}
