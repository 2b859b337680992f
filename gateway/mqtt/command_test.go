package mqtt

import (
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
)

func TestParseCommand(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		payload string
		typ     devices.Type
		want    Request
		err     string
	}{
		{``, devices.TypeBool, Request{}, ""},
		{`true`, devices.TypeBool, Request{Value: devices.Bool(true)}, ""},
		{` 12.5 `, devices.TypeNumber, Request{Value: devices.Number(12.5)}, ""},
		{`{"value": false, "id": "a-1", "reason": "night", "expires": "2026-05-01T12:00:00Z"}`, devices.TypeBool,
			Request{Value: devices.Bool(false), ID: "a-1", Reason: "night", Expires: at}, ""},
		{`{"id": "r"}`, devices.TypeNumber, Request{ID: "r"}, ""},
		{`{"value": null}`, devices.TypeNumber, Request{}, ""},
		{`{"value": 1} {"value": 2}`, devices.TypeNumber, Request{}, "more than one value"},
		{`{"value": 1}x`, devices.TypeNumber, Request{}, "malformed JSON"},
		{`{"id": ""}`, devices.TypeNumber, Request{}, `field "id": empty`},
		{`{"id": "a b"}`, devices.TypeNumber, Request{}, `field "id": only printable`},
		{`{"id": "` + strings.Repeat("x", 200) + `"}`, devices.TypeNumber, Request{}, `field "id": 200 characters`},
		{`{"reason": 5}`, devices.TypeNumber, Request{}, `field "reason": want a string`},
		{`[1]`, devices.TypeNumber, Request{}, "value: want a number"},
		{`{"value": "on"}`, devices.TypeEnum, Request{}, "value"},
	}
	for _, tc := range cases {
		got, err := ParseCommand([]byte(tc.payload), tc.typ, []string{"off", "low", "high"})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseCommand(%q) error = %v, want %q", tc.payload, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseCommand(%q) = %v", tc.payload, err)
		case tc.err == "" && (!got.Value.Equal(tc.want.Value) || got.ID != tc.want.ID || got.Reason != tc.want.Reason || !got.Expires.Equal(tc.want.Expires)):
			t.Errorf("ParseCommand(%q) = %+v, want %+v", tc.payload, got, tc.want)
		}
	}
}

func TestStale(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		r      Request
		maxAge time.Duration
		want   string
	}{
		{Request{}, 0, ""},
		{Request{}, time.Minute, "cannot be told"},
		{Request{Expires: now.Add(time.Second)}, time.Minute, ""},
		{Request{Expires: now}, 0, "stale: it expired"},
		{Request{At: now.Add(-30 * time.Second)}, time.Minute, ""},
		{Request{At: now.Add(-2 * time.Minute)}, time.Minute, "older than the 1m0s allowed"},
	} {
		if got := tc.r.Stale(now, tc.maxAge); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Stale(%+v, %s) = %q, want %q", tc.r, tc.maxAge, got, tc.want)
		}
	}
}

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

// FuzzParseCommand feeds payloads of every value type: the parser must
// never panic, an error must say something, and a value it accepts must be
// of the type asked for.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{``, `true`, `1.5`, `"low"`, `{"value":true,"id":"x"}`, `{"value":{"a":1}}`, `{"expires":"2026-05-01T12:00:00Z"}`,
		`{"value": tru`, `{"valu": 1}`, `null`, `[`, `{"id":7}`} {
		for typ := range uint8(4) {
			f.Add([]byte(s), typ)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte, typ uint8) {
		ty := []devices.Type{devices.TypeBool, devices.TypeNumber, devices.TypeEnum, devices.TypeString}[typ%4]
		r, err := ParseCommand(payload, ty, []string{"off", "low", "high"})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if !r.Value.IsZero() && r.Value.Type != ty {
			t.Fatalf("asked for a %s, got %+v", ty, r.Value)
		}
		if len(r.ID) > MaxIDLength {
			t.Fatalf("an id of %d characters", len(r.ID))
		}
		if _, err := ParseRun(payload); err != nil && err.Error() == "" {
			t.Fatal("an empty error from ParseRun")
		}
	})
}
