package governance

import (
	"math"
	"strconv"
)

// ValueType is the type of a capability's value.
type ValueType uint8

// The value types. TypeNone marks a step that carries no value (a read).
const (
	TypeNone ValueType = iota
	TypeBool
	TypeNumber
	TypeEnum
	TypeString
)

// String returns the type's configuration name.
func (t ValueType) String() string {
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

// Value is what the judge sees of a step's input. Exactly one of Bool, Num
// and Text is meaningful, as Type says; enum and string values use Text.
//
// It mirrors devices.Value on purpose: governance and devices are both pure
// and import nothing of ours, so the runtime converts one into the other.
type Value struct {
	Type ValueType `json:"type"`
	Bool bool      `json:"bool,omitempty"`
	Num  float64   `json:"num,omitempty"`
	Text string    `json:"text,omitempty"`
}

// Bool returns a bool value.
func Bool(b bool) Value { return Value{Type: TypeBool, Bool: b} }

// Number returns a number value.
func Number(f float64) Value { return Value{Type: TypeNumber, Num: f} }

// Enum returns an enum value.
func Enum(s string) Value { return Value{Type: TypeEnum, Text: s} }

// Text returns a string value.
func Text(s string) Value { return Value{Type: TypeString, Text: s} }

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

// String formats v as JSON would.
func (v Value) String() string {
	switch v.Type {
	case TypeBool:
		return strconv.FormatBool(v.Bool)
	case TypeNumber:
		return formatNumber(v.Num)
	case TypeEnum, TypeString:
		return strconv.Quote(v.Text)
	}
	return "null"
}

func formatNumber(f float64) string {
	if math.Abs(f) < 1e21 && f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func (v Value) isText() bool { return v.Type == TypeEnum || v.Type == TypeString }
