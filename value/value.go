// Package value holds the one typed value of Shadowgate: a bool, a number,
// an enum member or a string. Devices read and write it, and governance
// judges it; both import this package, so neither converts.
package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// Type is the type of a capability's value.
type Type uint8

// The value types. TypeNone is no type (the zero Value).
const (
	TypeNone Type = iota
	TypeBool
	TypeNumber
	TypeEnum
	TypeString
)

// ParseType parses a configuration name: bool, number, enum or string.
func ParseType(s string) (Type, error) {
	switch s {
	case "bool":
		return TypeBool, nil
	case "number":
		return TypeNumber, nil
	case "enum":
		return TypeEnum, nil
	case "string":
		return TypeString, nil
	}
	return TypeNone, errors.New("unknown value type " + strconv.Quote(s) + " (want bool, number, enum or string)")
}

// String returns the configuration name of t.
func (t Type) String() string {
	switch t {
	case TypeBool:
		return "bool"
	case TypeNumber:
		return "number"
	case TypeEnum:
		return "enum"
	case TypeString:
		return "string"
	}
	return "none"
}

// MaxStringLen bounds a string or enum value, in bytes.
const MaxStringLen = 1024

// Value is a typed value of a capability. Exactly one of Bool, Num and Text
// is meaningful, as Type says; enum and string values use Text. Numbers are
// always finite.
type Value struct {
	Type Type
	Bool bool
	Num  float64
	Text string
}

// Bool returns a bool value.
func Bool(b bool) Value { return Value{Type: TypeBool, Bool: b} }

// Number returns a number value.
func Number(f float64) Value { return Value{Type: TypeNumber, Num: f} }

// Enum returns an enum value.
func Enum(s string) Value { return Value{Type: TypeEnum, Text: s} }

// Text returns a string value.
func Text(s string) Value { return Value{Type: TypeString, Text: s} }

// IsZero reports whether v holds no value.
func (v Value) IsZero() bool { return v.Type == TypeNone }

// Equal reports whether v and o are the same value of the same type.
// Enum and string values compare by their text, so a value read back from
// JSON (where the two look alike) equals the value written.
func (v Value) Equal(o Value) bool {
	if v.Type != o.Type && !(v.isText() && o.isText()) {
		return false
	}
	switch v.Type {
	case TypeBool:
		return v.Bool == o.Bool
	case TypeNumber:
		return v.Num == o.Num
	case TypeEnum, TypeString:
		return v.Text == o.Text
	}
	return true
}

// Any returns v as a plain Go value: bool, float64, string or nil.
func (v Value) Any() any {
	switch v.Type {
	case TypeBool:
		return v.Bool
	case TypeNumber:
		return v.Num
	case TypeEnum, TypeString:
		return v.Text
	}
	return nil
}

// String formats v as JSON.
func (v Value) String() string {
	b, _ := v.MarshalJSON()
	return string(b)
}

// MarshalJSON encodes v as a JSON scalar, or null when v is zero.
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.Type {
	case TypeBool:
		return strconv.AppendBool(nil, v.Bool), nil
	case TypeNumber:
		if math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
			return nil, errors.New("value is not a finite number")
		}
		if math.Abs(v.Num) < 1e21 && v.Num == math.Trunc(v.Num) {
			return strconv.AppendFloat(nil, v.Num, 'f', -1, 64), nil
		}
		return strconv.AppendFloat(nil, v.Num, 'g', -1, 64), nil
	case TypeEnum, TypeString:
		return json.Marshal(v.Text)
	}
	return []byte("null"), nil
}

// UnmarshalJSON decodes a JSON scalar, inferring its type: true and false
// are bools, numbers are numbers, strings are strings, null is no value.
// Where the type is known, ParseValue is stricter.
func (v *Value) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, " \t\r\n")
	if len(b) == 0 {
		return errors.New("empty value")
	}
	t := TypeNone
	switch describe(b) {
	case "null":
		*v = Value{}
		return nil
	case "a bool":
		t = TypeBool
	case "a number":
		t = TypeNumber
	case "a string":
		t = TypeString
	case "an object":
		return v.unmarshalTagged(b)
	default:
		return &ValueError{Want: TypeNone, Why: "a value must be a JSON bool, number or string, got " + describe(b)}
	}
	parsed, err := ParseValue(t, b, nil)
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}

// unmarshalTagged reads the tagged form {"type":N,"bool":..,"num":..,"text":..}
// in which rules and envelopes were journaled before the two value types
// became one, so that a journal written then still loads.
func (v *Value) unmarshalTagged(b []byte) error {
	var t struct {
		Type *Type   `json:"type"`
		Bool bool    `json:"bool"`
		Num  float64 `json:"num"`
		Text string  `json:"text"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil || t.Type == nil || *t.Type > TypeString {
		return &ValueError{Want: TypeNone, Why: "a value must be a JSON bool, number or string, got an object"}
	}
	out := Value{Type: *t.Type, Bool: t.Bool, Num: t.Num, Text: t.Text}
	if out.Type == TypeNumber && (math.IsNaN(out.Num) || math.IsInf(out.Num, 0)) {
		return &ValueError{Want: TypeNumber, Why: "value is not a finite number"}
	}
	if out.isText() && (len(out.Text) > MaxStringLen || !utf8.ValidString(out.Text)) {
		return &ValueError{Want: out.Type, Why: "text is not valid UTF-8 of at most " + strconv.Itoa(MaxStringLen) + " bytes"}
	}
	*v = out
	return nil
}

// ValueError says why raw bytes are not a value of the wanted type.
type ValueError struct {
	Want Type
	Got  string // a short description of what was found
	Why  string
}

func (e *ValueError) Error() string {
	if e.Why != "" {
		return "want a " + e.Want.String() + ": " + e.Why
	}
	return "want a " + e.Want.String() + ", got " + e.Got
}

// ParseValue parses one JSON scalar as a value of type t, strictly: a bool
// must be true or false (the string "true" is not a bool), a number must be
// a finite JSON number that fits a float64 (1e400 is an error), an enum must
// be a JSON string among allowed, and a string must be a JSON string of at
// most MaxStringLen bytes of valid UTF-8. Surrounding whitespace is allowed;
// anything else after the scalar is an error.
func ParseValue(t Type, raw []byte, allowed []string) (Value, error) {
	raw = bytes.Trim(raw, " \t\r\n") // JSON whitespace only
	if len(raw) == 0 {
		return Value{}, &ValueError{Want: t, Got: "nothing"}
	}
	got := describe(raw)
	switch t {
	case TypeBool:
		switch string(raw) {
		case "true":
			return Bool(true), nil
		case "false":
			return Bool(false), nil
		}
		return Value{}, &ValueError{Want: t, Got: got}
	case TypeNumber:
		if got != "a number" {
			return Value{}, &ValueError{Want: t, Got: got}
		}
		if !json.Valid(raw) {
			return Value{}, &ValueError{Want: t, Why: "malformed number " + clip(raw)}
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return Value{}, &ValueError{Want: t, Why: "number " + clip(raw) + " is out of range"}
		}
		return Number(f), nil
	case TypeEnum, TypeString:
		if got != "a string" {
			return Value{}, &ValueError{Want: t, Got: got}
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Value{}, &ValueError{Want: t, Why: "malformed string " + clip(raw)}
		}
		if len(s) > MaxStringLen {
			return Value{}, &ValueError{Want: t, Why: "string is longer than " + strconv.Itoa(MaxStringLen) + " bytes"}
		}
		if !utf8.ValidString(s) {
			return Value{}, &ValueError{Want: t, Why: "string is not valid UTF-8"}
		}
		if t == TypeString {
			return Text(s), nil
		}
		for _, a := range allowed {
			if a == s {
				return Enum(s), nil
			}
		}
		return Value{}, &ValueError{Want: t, Why: strconv.Quote(s) + " is not one of " + quoteAll(allowed)}
	}
	return Value{}, &ValueError{Want: t, Why: "the capability has no value type"}
}

// describe names the JSON kind that raw starts with.
func describe(raw []byte) string {
	switch c := raw[0]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		if string(raw) == "true" || string(raw) == "false" {
			return "a bool"
		}
	case c == 'n' && string(raw) == "null":
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return "malformed JSON " + clip(raw)
}

func clip(raw []byte) string {
	const max = 32
	if len(raw) > max {
		return strconv.Quote(string(raw[:max])) + "..."
	}
	return strconv.Quote(string(raw))
}

func quoteAll(ss []string) string {
	var b []byte
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, s)
	}
	return string(append(b, ']'))
}

func (v Value) isText() bool { return v.Type == TypeEnum || v.Type == TypeString }
