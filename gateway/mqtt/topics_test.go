package mqtt

import "testing"

func TestTopicFilters(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/#", "a", true}, {"a/#", "a/b/c", true}, {"a/+/c", "a/b/c", true}, {"a/+", "a/b/c", false},
		{"#", "x", true}, {"a/b", "a/b", true}, {"a/b", "a/c", false}, {"+/+", "a", false},
	} {
		if got := Matches(tc.filter, tc.topic); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v", tc.filter, tc.topic, got)
		}
	}
	for _, tc := range []struct {
		pattern, filter string
		want            bool
	}{
		{"a/#", "a/#", true}, {"a/#", "a/+/c", true}, {"a/+/c", "a/+/c", true}, {"a/+/c", "a/#", false},
		{"a/b/#", "a/#", false}, {"a/+", "a/b", true}, {"a/b", "a/+", false}, {"#", "#", true},
	} {
		if got := Covers(tc.pattern, tc.filter); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v", tc.pattern, tc.filter, got)
		}
	}
}
