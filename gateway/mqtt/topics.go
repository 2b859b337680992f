package mqtt

import (
	"strings"
	"unicode/utf8"
)

// Matches reports whether the topic filter matches the topic name, with
// MQTT's wildcards: "+" is one level, a final "#" is any number of levels,
// the parent included. It allocates nothing: the broker asks it for every
// publish and every delivery.
func Matches(filter, topic string) bool {
	f, t := filter, topic
	tEnded := false // every level of topic has been compared
	for {
		level, fRest, fMore := strings.Cut(f, "/")
		if level == "#" {
			return !fMore
		}
		if tEnded {
			return false
		}
		tLevel, tRest, tMore := strings.Cut(t, "/")
		if level != "+" && level != tLevel {
			return false
		}
		if !fMore {
			return !tMore
		}
		tEnded = !tMore
		f, t = fRest, tRest
	}
}

// Covers reports whether every topic that filter can match is matched by
// pattern, so that a subscription to filter may be allowed by pattern. It
// allocates nothing.
func Covers(pattern, filter string) bool {
	p, f := pattern, filter
	fEnded := false // every level of filter has been compared
	for {
		level, pRest, pMore := strings.Cut(p, "/")
		if level == "#" {
			return !pMore
		}
		if fEnded {
			return false
		}
		fLevel, fRest, fMore := strings.Cut(f, "/")
		switch {
		case fLevel == "#":
			return false // the filter reaches further than the pattern
		case level == "+":
		case fLevel == "+" || level != fLevel:
			return false
		}
		if !pMore {
			return !fMore
		}
		fEnded = !fMore
		p, f = pRest, fRest
	}
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
