package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shadowgate/shadowgate/value"
)

func TestParseCommand(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		payload string
		typ     value.Type
		want    Request
		err     string
	}{
		{``, value.TypeBool, Request{}, ""},
		{`true`, value.TypeBool, Request{Value: value.Bool(true)}, ""},
		{` 12.5 `, value.TypeNumber, Request{Value: value.Number(12.5)}, ""},
		{`{"value": false, "id": "a-1", "reason": "night", "expires": "2026-05-01T12:00:00Z"}`, value.TypeBool,
			Request{Value: value.Bool(false), ID: "a-1", Reason: "night", Expires: at}, ""},
		{`{"id": "r"}`, value.TypeNumber, Request{ID: "r"}, ""},
		{`{"value": null}`, value.TypeNumber, Request{}, ""},
		{`{"value": 1} {"value": 2}`, value.TypeNumber, Request{}, "more than one value"},
		{`{"value": 1}x`, value.TypeNumber, Request{}, "malformed JSON"},
		{`{"id": ""}`, value.TypeNumber, Request{}, `field "id": empty`},
		{`{"id": "a b"}`, value.TypeNumber, Request{}, `field "id": only printable`},
		{`{"id": "` + strings.Repeat("x", 200) + `"}`, value.TypeNumber, Request{}, `field "id": 200 characters`},
		{`{"reason": 5}`, value.TypeNumber, Request{}, `field "reason": want a string`},
		{`[1]`, value.TypeNumber, Request{}, "value: want a number"},
		{`{"value": "on"}`, value.TypeEnum, Request{}, "value"},
		{`{"value":false,"id":"e3","value":true}`, value.TypeBool, Request{}, `key "value" appears twice`},
		{`{"value":false,"VALUE":true}`, value.TypeBool, Request{}, `key "VALUE" appears twice`},
		{`{"id":"a","\u0069d":"b"}`, value.TypeBool, Request{}, `key "id" appears twice`},
		{`{"value":{"a":1,"b":{"c":1,"c":2}}}`, value.TypeBool, Request{}, `key "c" appears twice`},
		{`{"value":[{"a":1},{"a":2}],"id":"x"}`, value.TypeBool, Request{}, `field "value"`},
		{`{"value":` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `}`, value.TypeBool, Request{}, "nested deeper than 32"},
		{`{"` + strings.Repeat("k", 500) + `":1,"` + strings.Repeat("k", 500) + `":2}`, value.TypeBool, Request{}, `unknown field "` + strings.Repeat("k", 80) + `…"`},
		{`{"reason":"a","` + strings.Repeat("k", 5) + `":1,"reason":"b"}`, value.TypeBool, Request{}, `unknown field "kkkkk"`},
		{"{\"id\":\"\xff\xfe\"}", value.TypeBool, Request{}, "not valid UTF-8"},
		{"\"\xff\"", value.TypeString, Request{}, "not valid UTF-8"},
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

// FuzzParseCommand feeds payloads of every value type: the parser must
// never panic, an error must say something, a value it accepts must be of
// the type asked for, and PeekID reads only valid ids.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{``, `true`, `1.5`, `"low"`, `{"value":true,"id":"x"}`, `{"value":{"a":1}}`, `{"expires":"2026-05-01T12:00:00Z"}`,
		`{"value": tru`, `{"valu": 1}`, `null`, `[`, `{"id":7}`, `{"value":false,"id":"e3","value":true}`, `{"Value":1,"value":2}`,
		`{"value":{"a":{"a":1,"a":2}}}`, `{"value":[[[[{"x":1,"x":2}]]]]}`, "{\"id\":\"\xff\xfe\"}", `{"id":"a","\u0069d":"b"}`} {
		for typ := range uint8(4) {
			f.Add([]byte(s), typ)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte, typ uint8) {
		ty := []value.Type{value.TypeBool, value.TypeNumber, value.TypeEnum, value.TypeString}[typ%4]
		// The id a reply to a payload that does not parse carries is a valid one.
		if id := PeekID(payload); id != "" && checkID(id) != "" {
			t.Fatalf("PeekID(%q) = %q, not a valid id", payload, id)
		}
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
		if !utf8.Valid(payload) {
			t.Fatalf("a payload of invalid UTF-8 was taken: %q", payload)
		}
		if RepeatedKey(payload) != nil {
			t.Fatalf("a payload with a repeated key was taken: %q", payload)
		}
		if n := naiveRepeats(payload); n {
			t.Fatalf("a payload the naive check finds a repeated key in was taken: %q", payload)
		}
		if _, err := ParseRun(payload); err != nil && err.Error() == "" {
			t.Fatal("an empty error from ParseRun")
		}
	})
}

// naiveRepeats is a reference for repeatedKey on the top-level object: it
// decodes the object into a list of raw key/value pairs and compares the
// keys as encoding/json matches fields, case-insensitively.
func naiveRepeats(payload []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	var seen []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
		for _, s := range seen {
			if strings.EqualFold(s, k.(string)) {
				return true
			}
		}
		seen = append(seen, k.(string))
	}
	return false
}

// TestRepeatedKey checks the token walk on its own: what it refuses, what
// it lets through, and that no input makes it panic.
func TestRepeatedKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{`{}`, ""}, {`[]`, ""}, {`1`, ""}, {`{"a":1,"b":2}`, ""}, {`[{"a":1},{"a":1}]`, ""},
		{`{"a":{"b":1},"b":1}`, ""}, {`{"a":["a","a"]}`, ""}, {`{"a":1,"a":1}`, `key "a" appears twice`},
		{`{"k":1,"\u212a":2}`, "key \"\u212a\" appears twice"}, {`{"a":[{"x":[],"x":{}}]}`, `key "x" appears twice`},
		{strings.Repeat(`[`, 32) + strings.Repeat(`]`, 32), ""}, {strings.Repeat(`[`, 33) + strings.Repeat(`]`, 33), "nested deeper"},
		{strings.Repeat(`{"a":`, 100000), "nested deeper"}, {`{"a":1,`, ""}, {`}}]]`, ""},
	} {
		err := RepeatedKey([]byte(tc.in))
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("RepeatedKey(%.40q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}
