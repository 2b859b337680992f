package mqtt

import (
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
