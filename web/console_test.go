package web

import (
	"regexp"
	"strings"
	"testing"
)

func TestFieldOf(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`field "reason": a denial says why`, "reason"},
		{`field "rule_for": want a duration`, "rule_for"},
		{`field "value.a": nested`, ""},
		{`approval apr-1 is expired`, ""},
		{`field "reason`, ""},
	} {
		if got := fieldOf(tc.msg); got != tc.want {
			t.Errorf("fieldOf(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestScriptKnowsStreamKinds: the script listens on the browser's one
// event stream for the kinds of every page (pageKinds), which it keeps
// rather than each page sending them; the two lists are the same.
func TestScriptKnowsStreamKinds(t *testing.T) {
	m := regexp.MustCompile(`var streamKinds ?= ?\[([^\]]*)\];`).FindSubmatch(staticFiles()["/app.js"])
	if m == nil {
		t.Fatal("the script as sent has no streamKinds")
	}
	got := strings.ReplaceAll(strings.ReplaceAll(string(m[1]), `"`, ""), " ", "")
	if got != streamKinds {
		t.Errorf("the script listens for %s, want the kinds of every page, %s", got, streamKinds)
	}
}
