package opcua

import (
	"math"
	"strings"
	"testing"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

func capOf(t value.Type) *devices.Capability {
	c := &devices.Capability{Name: "x", Kind: devices.KindActuator, Type: t}
	if t == value.TypeEnum {
		c.Enum = []string{"off", "low", "high"}
	}
	return c
}

var toVariantCases = []struct {
	name string
	typ  value.Type
	dt   dataType
	v    value.Value
	want any    // the variant's value
	err  string // or the error
}{
	{"bool", value.TypeBool, typeBoolean, value.Bool(true), true, ""},
	{"double", value.TypeNumber, typeDouble, value.Number(1.25), 1.25, ""},
	{"float", value.TypeNumber, typeFloat, value.Number(0.5), float32(0.5), ""},
	{"int32", value.TypeNumber, typeInt32, value.Number(-7), int32(-7), ""},
	{"byte", value.TypeNumber, typeByte, value.Number(255), uint8(255), ""},
	{"uint64", value.TypeNumber, typeUInt64, value.Number(1e18), uint64(1e18), ""},
	{"enum as string", value.TypeEnum, typeString, value.Enum("low"), "low", ""},
	{"enum as index", value.TypeEnum, typeInt16, value.Enum("high"), int16(2), ""},
	{"string", value.TypeString, typeString, value.Text("hello"), "hello", ""},
	{"fraction to int32", value.TypeNumber, typeInt32, value.Number(1.5), nil, "not a whole number, and the node is an Int32"},
	{"byte overflow", value.TypeNumber, typeByte, value.Number(256), nil, "out of the range of a Byte (0 to 255)"},
	{"sbyte underflow", value.TypeNumber, typeSByte, value.Number(-129), nil, "out of the range of an SByte"},
	{"int64 bound", value.TypeNumber, typeInt64, value.Number(math.Pow(2, 63)), nil, "out of the range of an Int64"},
	{"negative uint", value.TypeNumber, typeUInt32, value.Number(-1), nil, "out of the range of a UInt32"},
	{"float overflow", value.TypeNumber, typeFloat, value.Number(1e39), nil, "out of the range of a Float"},
	{"float tenth", value.TypeNumber, typeFloat, value.Number(0.1), float32(0.1), ""},
	{"float too precise", value.TypeNumber, typeFloat, value.Number(0.123456789), nil, "cannot be held by a Float, which would store 0.12345679"},
	{"float underflow", value.TypeNumber, typeFloat, value.Number(1e-50), nil, "cannot be held by a Float, which would store 0"},
	{"string to double", value.TypeString, typeDouble, value.Text("1"), nil, "capability x is a string, the node holds a Double"},
	{"bool to int", value.TypeBool, typeInt32, value.Bool(true), nil, "capability x is a bool, the node holds an Int32"},
	{"value of another type", value.TypeNumber, typeDouble, value.Text("1"), nil, "takes a number, not a string"},
	{"not an enum member", value.TypeEnum, typeString, value.Enum("max"), nil, `"max" is not a value of enum x`},
	{"enum index too big for", value.TypeEnum, typeString, value.Enum("off"), "off", ""},
}

func TestToVariant(t *testing.T) {
	for _, tc := range toVariantCases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := toVariant(capOf(tc.typ), tc.dt, tc.v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("toVariant(%v to %s) = %v, %v; want an error saying %q", tc.v, tc.dt, v, err, tc.err)
				}
				return
			}
			if err != nil || v.Value() != tc.want {
				t.Fatalf("toVariant(%v to %s) = %#v, %v; want %#v", tc.v, tc.dt, v.Value(), err, tc.want)
			}
		})
	}
}

func TestFromVariant(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  value.Type
		in   any
		want value.Value
		err  string
	}{
		{"bool", value.TypeBool, true, value.Bool(true), ""},
		{"uint16", value.TypeNumber, uint16(9), value.Number(9), ""},
		{"float", value.TypeNumber, float32(2.5), value.Number(2.5), ""},
		{"float tenth as written", value.TypeNumber, float32(0.1), value.Number(0.1), ""},
		{"enum by name", value.TypeEnum, "high", value.Enum("high"), ""},
		{"enum by index", value.TypeEnum, int32(1), value.Enum("low"), ""},
		{"text", value.TypeString, "ok", value.Text("ok"), ""},
		{"NaN", value.TypeNumber, math.NaN(), value.Value{}, "not a finite number"},
		{"string for a number", value.TypeNumber, "1", value.Value{}, "sent a String for x, which is a number"},
		{"enum index out", value.TypeEnum, int32(3), value.Value{}, "which has values 0 to 2"},
		{"enum name out", value.TypeEnum, "max", value.Value{}, "not one of its values"},
		{"array", value.TypeNumber, []float64{1, 2}, value.Value{}, "sent an array"},
		{"float for an enum", value.TypeEnum, 1.0, value.Value{}, "sent a Double for x, which is an enum"},
		{"too long", value.TypeString, strings.Repeat("a", value.MaxStringLen+1), value.Value{}, "at most 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromVariant(capOf(tc.typ), ua.MustVariant(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("fromVariant(%#v) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("fromVariant(%#v) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	if _, err := fromVariant(capOf(value.TypeNumber), nil); err == nil {
		t.Error("fromVariant(nil) took no value for a value")
	}
}

func TestDataTypeOf(t *testing.T) {
	for _, tc := range []struct {
		in       any
		want     dataType
		abstract bool
		err      string
	}{
		{ua.NewNumericNodeID(0, id.Double), typeDouble, false, ""},
		{ua.NewNumericExpandedNodeID(0, id.Int32), typeInt32, false, ""},
		{ua.NewNumericNodeID(0, id.Number), id.Number, true, ""},
		{ua.NewNumericNodeID(0, id.DateTime), 0, false, "DateTime (i=13) is not one the driver converts"},
		{ua.NewNumericExpandedNodeID(0, id.VariableNode), 0, false, "VariableNode (i=267)"},
		{ua.NewStringNodeID(3, "MyEnum"), 0, false, "ns=3;s=MyEnum is not a built-in type"},
		{"Double", 0, false, "not a node id"},
	} {
		got, abstract, err := dataTypeOf(ua.MustVariant(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("dataTypeOf(%v) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || abstract != tc.abstract {
			t.Errorf("dataTypeOf(%v) = %v, %v, %v; want %v, %v", tc.in, got, abstract, err, tc.want, tc.abstract)
		}
	}
	if got, err := concrete(id.Number, ua.MustVariant(float32(1))); err != nil || got != typeFloat {
		t.Errorf("concrete(Number, a Float) = %v, %v", got, err)
	}
	if _, err := concrete(id.UInteger, ua.MustVariant(int32(1))); err == nil {
		t.Error("concrete(UInteger, an Int32) took it")
	}
}

// FuzzConvert converts any value to any node type and back: it never
// panics, and what converts reads back as the value written (to a Float's
// precision).
func FuzzConvert(f *testing.F) {
	for _, tc := range toVariantCases {
		f.Add(uint8(tc.typ), uint32(tc.dt), tc.v.Bool, tc.v.Num, tc.v.Text)
	}
	f.Fuzz(func(t *testing.T, typ uint8, dt uint32, b bool, num float64, text string) {
		vt := value.Type(typ%4 + 1)
		c := capOf(vt)
		v := value.Value{Type: vt, Bool: b, Num: num, Text: text}
		vr, err := toVariant(c, dataType(dt), v)
		if err != nil {
			return
		}
		back, err := fromVariant(c, vr)
		if err != nil {
			if vt == value.TypeString && len(text) > value.MaxStringLen {
				return // written, but longer than a reading may be
			}
			t.Fatalf("%v written to %s reads back as an error: %v", v, dataType(dt), err)
		}
		// What was written reads back as written: a number a Float cannot
		// hold exactly is refused, never rounded.
		if !back.Equal(v) {
			t.Fatalf("%v written to %s reads back as %v", v, dataType(dt), back)
		}
	})
}
