package mqtt

import "strings"

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

// reserved reports whether rel is a topic only the gateway publishes.
func reserved(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case "state", "approvals", "reply":
		return true
	case "events":
		return rel == "events" || strings.HasPrefix(rel, "events/")
	}
	return false
}
