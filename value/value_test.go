package value

import (
	"encoding/json"
	"strings"
	"testing"
)

var valueCases = []struct {
	name    string
	typ     Type
	raw     string
	enum    []string
	want    Value
	wantErr string
}{
	{"bool true", TypeBool, "true", nil, Bool(true), ""},
	{"bool false with space", TypeBool, " false\n", nil, Bool(false), ""},
	{"string true is not a bool", TypeBool, `"true"`, nil, Value{}, "want a bool, got a string"},
	{"one is not a bool", TypeBool, "1", nil, Value{}, "want a bool, got a number"},
	{"null is not a bool", TypeBool, "null", nil, Value{}, "want a bool, got null"},
	{"number", TypeNumber, "42.5", nil, Number(42.5), ""},
	{"negative exponent", TypeNumber, "-1e-3", nil, Number(-0.001), ""},
	{"number too large", TypeNumber, "1e400", nil, Value{}, `want a number: number "1e400" is out of range`},
	{"number leading zero", TypeNumber, "012", nil, Value{}, `want a number: malformed number "012"`},
	{"number trailing garbage", TypeNumber, "12 13", nil, Value{}, `want a number: malformed number "12 13"`},
	{"string number is not a number", TypeNumber, `"12"`, nil, Value{}, "want a number, got a string"},
	{"NaN is not a number", TypeNumber, "NaN", nil, Value{}, `want a number, got malformed JSON "NaN"`},
	{"enum", TypeEnum, `"high"`, []string{"low", "high"}, Enum("high"), ""},
	{"enum outside set", TypeEnum, `"max"`, []string{"low", "high"}, Value{}, `want a enum: "max" is not one of ["low", "high"]`},
	{"string with escapes", TypeString, `"a\u00e9\n"`, nil, Text("aé\n"), ""},
	{"object is not a string", TypeString, `{"value":1}`, nil, Value{}, "want a string, got an object"},
	{"string unterminated", TypeString, `"abc`, nil, Value{}, `want a string: malformed string "\"abc"`},
	{"empty", TypeNumber, "  ", nil, Value{}, "want a number, got nothing"},
	{"string too long", TypeString, `"` + strings.Repeat("x", MaxStringLen+1) + `"`, nil, Value{}, "want a string: string is longer than 1024 bytes"},
	{"no type", TypeNone, "1", nil, Value{}, "want a none: the capability has no value type"},
}

func TestParseValue(t *testing.T) {
	t.Parallel()
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseValue(tc.typ, []byte(tc.raw), tc.enum)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseValue(%v, %q) error = %v, want %q", tc.typ, tc.raw, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseValue(%v, %q) = %v", tc.typ, tc.raw, err)
			}
			if !got.Equal(tc.want) {
				t.Fatalf("ParseValue(%v, %q) = %v, want %v", tc.typ, tc.raw, got, tc.want)
			}
		})
	}
}

// FuzzParseValue checks that parsing never panics, that what parses
// round-trips through MarshalJSON, and that it agrees with encoding/json on
// which inputs are valid JSON.
func FuzzParseValue(f *testing.F) {
	for _, tc := range valueCases {
		f.Add(uint8(tc.typ), tc.raw)
	}
	enum := []string{"low", "high"}
	f.Fuzz(func(t *testing.T, typ uint8, raw string) {
		ty := Type(typ % 5)
		v, err := ParseValue(ty, []byte(raw), enum)
		if err != nil {
			if v.Type != TypeNone {
				t.Fatalf("ParseValue(%v, %q) returned %v with error %v", ty, raw, v, err)
			}
			return
		}
		if v.Type != ty {
			t.Fatalf("ParseValue(%v, %q) = %v of type %v", ty, raw, v, v.Type)
		}
		if !json.Valid([]byte(raw)) {
			t.Fatalf("ParseValue(%v, %q) accepted invalid JSON", ty, raw)
		}
		enc, err := v.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%v): %v", v, err)
		}
		back, err := ParseValue(ty, enc, enum)
		if err != nil || !back.Equal(v) {
			t.Fatalf("round trip of %q: %q gave %v, %v", raw, enc, back, err)
		}
	})
}

// A rule journaled before the two value types became one wrote its values
// tagged; such a journal still loads, and nothing else passes as a value.
func TestUnmarshalTagged(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Value
	}{
		{`{"type":1,"bool":true}`, Bool(true)},
		{`{"type":2,"num":3.5}`, Number(3.5)},
		{`{"type":3,"text":"open"}`, Enum("open")},
		{`{"type":4,"text":"hi"}`, Text("hi")},
	} {
		var v Value
		if err := json.Unmarshal([]byte(c.in), &v); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if v != c.want {
			t.Errorf("%s = %#v, want %#v", c.in, v, c.want)
		}
	}
	for _, in := range []string{`{}`, `{"type":9}`, `{"type":1,"extra":1}`, `{"type":"bool"}`} {
		var v Value
		if err := json.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%s decoded as %#v, want an error", in, v)
		}
	}
}
