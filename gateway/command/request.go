package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shadowgate/shadowgate/value"
)

// Request is a parsed command payload.
type Request struct {
	// ID is the idempotency key given by the sender, or empty.
	ID     string
	Reason string
	// Value is what to write; zero for a read.
	Value value.Value
	// Expires, if set, is when the command goes stale; At, if set, is when
	// it was sent. A stale command is refused, never executed late.
	Expires time.Time
	At      time.Time
}

// MaxIDLength bounds a request id.
const MaxIDLength = 128

// body is the object form of a payload.
type body struct {
	Value   json.RawMessage `json:"value"`
	ID      *string         `json:"id"`
	Reason  *string         `json:"reason"`
	Expires *string         `json:"expires"`
	At      *string         `json:"at"`
}

// ParseCommand parses the payload of cmd/<device>/<capability>: a JSON
// object {"value": v, "id": "…", "reason": "…", "expires": "RFC 3339",
// "at": "RFC 3339"}, every field optional, or a bare JSON scalar that is
// the value. No value means a read. The value must be of type t (one of
// enum for an enum). A payload that is not valid UTF-8, or an object with
// a key twice (at any depth, in any letter case, as encoding/json matches
// fields), is refused: which of two values is meant cannot be told. Errors
// name the field that is wrong.
func ParseCommand(payload []byte, t value.Type, enum []string) (Request, error) {
	var r Request
	if !utf8.Valid(payload) {
		return r, errNotUTF8
	}
	p := bytes.TrimLeft(payload, " \t\r\n")
	if len(p) == 0 {
		return r, nil
	}
	if p[0] != '{' {
		v, err := value.ParseValue(t, payload, enum)
		if err != nil {
			return r, fmt.Errorf("value: %w", err)
		}
		r.Value = v
		return r, nil
	}
	b, err := decodeBody(payload)
	if err != nil {
		return r, err
	}
	if err := b.common(&r); err != nil {
		return r, err
	}
	if len(b.Value) > 0 && !bytes.Equal(bytes.TrimSpace(b.Value), []byte("null")) {
		v, err := value.ParseValue(t, b.Value, enum)
		if err != nil {
			return r, fmt.Errorf("field \"value\": %w", err)
		}
		r.Value = v
	}
	return r, nil
}

// ParseRun parses the payload of run/<plan>: empty, or a JSON object with
// "id", "reason", "expires" and "at", each optional. It refuses what
// ParseCommand refuses: invalid UTF-8 and repeated keys.
func ParseRun(payload []byte) (Request, error) {
	var r Request
	if !utf8.Valid(payload) {
		return r, errNotUTF8
	}
	if len(bytes.TrimSpace(payload)) == 0 {
		return r, nil
	}
	b, err := decodeBody(payload)
	if err != nil {
		return r, err
	}
	if len(b.Value) > 0 {
		return r, errors.New(`field "value": a plan run takes no value`)
	}
	return r, b.common(&r)
}

func decodeBody(payload []byte) (body, error) {
	var b body
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return b, fmt.Errorf("field %q: want a %s, got a JSON %s", te.Field, te.Type, te.Value)
		case errors.As(err, &se):
			return b, fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, se)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
			if uerr != nil {
				name = strings.TrimPrefix(err.Error(), "json: unknown field ")
			}
			return b, fmt.Errorf("unknown field %s (want value, id, reason, expires or at)", QuoteShort(name))
		}
		return b, fmt.Errorf("malformed JSON: %v", err)
	}
	if dec.More() {
		return b, errors.New("malformed JSON: more than one value")
	}
	if _, err := dec.Token(); err == nil {
		return b, errors.New("malformed JSON: trailing data after the object")
	}
	if err := RepeatedKey(payload); err != nil {
		return b, err
	}
	return b, nil
}

// errNotUTF8 is the error for a payload that is not valid UTF-8: decoded,
// each bad byte would become U+FFFD, so that different payloads (and ids)
// would read the same.
var errNotUTF8 = errors.New("not valid UTF-8 text")

// maxDepth bounds the nesting RepeatedKey walks; no command nests at all.
const maxDepth = 32

// RepeatedKey returns an error naming the first key that an object of
// data, valid JSON, holds twice, comparing keys as encoding/json matches
// them to fields (unescaped, letter case folded), or data nested deeper
// than maxDepth. It reads data token by token, and never panics.
func RepeatedKey(data []byte) error {
	type level struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder has named
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				f := foldKey(k)
				if stack[n-1].keys[f] {
					return fmt.Errorf("key %s appears twice in one object", QuoteShort(k))
				}
				stack[n-1].keys[f], stack[n-1].wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return fmt.Errorf("nested deeper than %d levels", maxDepth)
			}
			if tok == json.Delim('{') {
				stack = append(stack, level{keys: map[string]bool{}, wantKey: true})
			} else {
				stack = append(stack, level{})
			}
			continue
		case json.Delim('}'), json.Delim(']'):
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
		// A value has ended: in an object, a key comes next.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
}

// foldKey is a key as encoding/json compares it with a field name, each
// rune replaced by the smallest of its case-fold set: "ID", "Id" and "id"
// are the same field, and so are "K" and the Kelvin sign.
func foldKey(k string) string {
	var sb strings.Builder
	for _, r := range k {
		lo := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			lo = min(lo, f)
		}
		sb.WriteRune(lo)
	}
	return sb.String()
}

// QuoteShort quotes what a client sent, cut to 80 characters, for an
// error message.
func QuoteShort(v string) string {
	v = strings.ToValidUTF8(v, "?")
	if utf8.RuneCountInString(v) > 80 {
		v = string([]rune(v)[:80]) + "…"
	}
	return strconv.Quote(v)
}

// checkID says what is wrong with a request id, or "".
func checkID(id string) string {
	switch {
	case id == "":
		return `field "id": empty; leave it out and the gateway makes one`
	case len(id) > MaxIDLength:
		return fmt.Sprintf(`field "id": %d characters, at most %d`, len(id), MaxIDLength)
	case !utf8.ValidString(id) || strings.IndexFunc(id, func(c rune) bool { return !unicode.IsPrint(c) || unicode.IsSpace(c) }) >= 0:
		return `field "id": only printable characters without spaces`
	}
	return ""
}

// PeekID reads a command's id from a payload that may not parse as a
// whole, so that a reply saying what is wrong still carries it: the value
// of the top-level "id" key of a JSON object, read up to the first syntax
// error, when it is a string that is a valid id. It returns "" when no id
// can be read, or when the object has more than one "id".
func PeekID(payload []byte) string {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	id, ids := "", 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		k, _ := key.(string)
		if foldKey(k) != foldKey("id") {
			continue
		}
		ids++
		var s string
		if utf8.Valid(v) && json.Unmarshal(v, &s) == nil && checkID(s) == "" {
			id = s
		}
	}
	if ids != 1 {
		return "" // two ids: which one is meant cannot be told
	}
	return id
}

func (b *body) common(r *Request) error {
	if b.ID != nil {
		if why := checkID(*b.ID); why != "" {
			return errors.New(why)
		}
		r.ID = *b.ID
	}
	if b.Reason != nil {
		if len(*b.Reason) > 1024 {
			return errors.New(`field "reason": longer than 1024 bytes`)
		}
		r.Reason = *b.Reason
	}
	for _, f := range []struct {
		name string
		s    *string
		to   *time.Time
	}{{"expires", b.Expires, &r.Expires}, {"at", b.At, &r.At}} {
		if f.s == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, *f.s)
		if err != nil {
			return fmt.Errorf("field %q: %s is not an RFC 3339 time (like 2026-05-01T12:00:00Z)", f.name, QuoteShort(*f.s))
		}
		*f.to = t
	}
	return nil
}

// Stale says why a request is too old to carry out at now, or "". With
// maxAge set, a request must carry expires or at to be judged at all.
func (r *Request) Stale(now time.Time, maxAge time.Duration) string {
	if !r.Expires.IsZero() && !now.Before(r.Expires) {
		return "stale: it expired at " + r.Expires.Format(time.RFC3339Nano)
	}
	if !r.At.IsZero() && maxAge > 0 && now.Sub(r.At) > maxAge {
		return fmt.Sprintf("stale: sent at %s, %s ago, older than the %s allowed", r.At.Format(time.RFC3339Nano),
			now.Sub(r.At).Round(time.Millisecond), maxAge)
	}
	if maxAge > 0 && r.Expires.IsZero() && r.At.IsZero() {
		return "its age cannot be told: give \"expires\" or \"at\""
	}
	return ""
}
