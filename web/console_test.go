package web

import "testing"

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
