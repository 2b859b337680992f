package opcua

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// dataType is a built-in OPC UA data type the driver converts, by its node
// id in namespace 0 (which is also its variant type id): Boolean (1),
// SByte (2) to UInt64 (9), Float (10), Double (11) and String (12).
type dataType uint32

// The data types the driver converts.
const (
	typeBoolean dataType = id.Boolean
	typeSByte   dataType = id.SByte
	typeByte    dataType = id.Byte
	typeInt16   dataType = id.Int16
	typeUInt16  dataType = id.UInt16
	typeInt32   dataType = id.Int32
	typeUInt32  dataType = id.UInt32
	typeInt64   dataType = id.Int64
	typeUInt64  dataType = id.UInt64
	typeFloat   dataType = id.Float
	typeDouble  dataType = id.Double
	typeString  dataType = id.String
)

// String names the type as the OPC UA specification does: "Double".
func (t dataType) String() string {
	if t.known() {
		return id.Name(uint32(t))
	}
	return "i=" + strconv.FormatUint(uint64(t), 10)
}

func (t dataType) known() bool { return t >= typeBoolean && t <= typeString }

// integer reports whether t is one of SByte to UInt64.
func (t dataType) integer() bool { return t >= typeSByte && t <= typeUInt64 }

// numeric reports whether t holds a number.
func (t dataType) numeric() bool { return t.integer() || t == typeFloat || t == typeDouble }

// intRange is the range of an integer type, as float64 (exact for the
// bounds that matter: the upper bounds of Int64 and UInt64 are 2^63 and
// 2^64, one past the largest value, so they are compared with <).
func (t dataType) intRange() (lo, hiExclusive float64) {
	switch t {
	case typeSByte:
		return math.MinInt8, math.MaxInt8 + 1
	case typeByte:
		return 0, math.MaxUint8 + 1
	case typeInt16:
		return math.MinInt16, math.MaxInt16 + 1
	case typeUInt16:
		return 0, math.MaxUint16 + 1
	case typeInt32:
		return math.MinInt32, math.MaxInt32 + 1
	case typeUInt32:
		return 0, math.MaxUint32 + 1
	case typeInt64:
		return math.MinInt64, -math.MinInt64 // 2^63
	case typeUInt64:
		return 0, 2 * -float64(math.MinInt64) // 2^64
	}
	return 0, 0
}

// dataTypeOf reads a node's DataType attribute, a NodeID (or, from some
// servers, an ExpandedNodeID) in namespace 0. abstract is true for
// BaseDataType, Number, Integer and UInteger, which say only what family
// the value is of: the type of the value itself then decides.
func dataTypeOf(v *ua.Variant) (t dataType, abstract bool, err error) {
	var n *ua.NodeID
	switch x := v.Value().(type) {
	case *ua.NodeID:
		n = x
	case *ua.ExpandedNodeID:
		if x != nil {
			n = x.NodeID
		}
	}
	if n == nil {
		return 0, false, fmt.Errorf("the DataType attribute is %s, not a node id", variantDesc(v))
	}
	if n.Namespace() != 0 || (n.Type() != ua.NodeIDTypeTwoByte && n.Type() != ua.NodeIDTypeFourByte && n.Type() != ua.NodeIDTypeNumeric) {
		return 0, false, fmt.Errorf("data type %s is not a built-in type (want Boolean, SByte to UInt64, Float, Double or String)", n)
	}
	t = dataType(n.IntID())
	switch n.IntID() {
	case id.BaseDataType, id.Number, id.Integer, id.UInteger:
		return t, true, nil
	}
	if !t.known() {
		return t, false, fmt.Errorf("data type %s (i=%d) is not one the driver converts (Boolean, SByte to UInt64, Float, Double or String)", id.Name(n.IntID()), n.IntID())
	}
	return t, false, nil
}

// concrete narrows an abstract data type by the variant type of the
// node's value: a Number node holding a Double is taken for a Double.
func concrete(abstract dataType, v *ua.Variant) (dataType, error) {
	if v == nil || isArray(v) || !dataType(v.Type()).known() {
		return 0, fmt.Errorf("data type %s with a value of %s: the driver cannot tell which type to write", id.Name(uint32(abstract)), variantDesc(v))
	}
	t := dataType(v.Type())
	ok := abstract == id.BaseDataType ||
		abstract == id.Number && t.numeric() ||
		abstract == id.Integer && (t == typeSByte || t == typeInt16 || t == typeInt32 || t == typeInt64) ||
		abstract == id.UInteger && (t == typeByte || t == typeUInt16 || t == typeUInt32 || t == typeUInt64)
	if !ok {
		return 0, fmt.Errorf("data type %s holds a value of type %s", id.Name(uint32(abstract)), t)
	}
	return t, nil
}

// fits says whether capability c can be carried by a node of type t: a
// bool by a Boolean, a number by any numeric type, an enum by a String
// (the member's name) or an integer (the member's index in the enum list,
// from 0), a string by a String.
func fits(c *devices.Capability, t dataType) error {
	ok := false
	switch c.Type {
	case value.TypeBool:
		ok = t == typeBoolean
	case value.TypeNumber:
		ok = t.numeric()
	case value.TypeEnum:
		ok = t == typeString || t.integer()
	case value.TypeString:
		ok = t == typeString
	}
	if !ok {
		return fmt.Errorf("capability %s is %s %s, the node holds %s %s", c.Name, article(c.Type.String()), c.Type, article(t.String()), t)
	}
	return nil
}

// toVariant converts v, a value of capability c, to a variant of the node's
// type t, strictly: a value that does not fit (a fraction for an integer,
// out of the type's range, another type) is an error naming both types.
// Nothing is rounded but a number written to a Float, which is stored to
// float32 precision.
func toVariant(c *devices.Capability, t dataType, v value.Value) (*ua.Variant, error) {
	if v.Type != c.Type {
		return nil, fmt.Errorf("capability %s takes %s %s, not %s %s", c.Name, article(c.Type.String()), c.Type, article(v.Type.String()), v.Type)
	}
	if err := fits(c, t); err != nil {
		return nil, err
	}
	var x any
	switch {
	case v.Type == value.TypeBool:
		x = v.Bool
	case v.Type == value.TypeString || v.Type == value.TypeEnum && t == typeString:
		if v.Type == value.TypeEnum && !slices.Contains(c.Enum, v.Text) {
			return nil, fmt.Errorf("%q is not a value of enum %s", v.Text, c.Name)
		}
		if !utf8.ValidString(v.Text) {
			return nil, fmt.Errorf("the text for %s is not valid UTF-8", c.Name)
		}
		x = v.Text
	case v.Type == value.TypeEnum:
		i := slices.Index(c.Enum, v.Text)
		if i < 0 {
			return nil, fmt.Errorf("%q is not a value of enum %s", v.Text, c.Name)
		}
		n, err := numberAs(float64(i), t)
		if err != nil {
			return nil, fmt.Errorf("enum %s: member %q (index %d) %w", c.Name, v.Text, i, err)
		}
		x = n
	default:
		n, err := numberAs(v.Num, t)
		if err != nil {
			return nil, fmt.Errorf("number %s for %s %w", strconv.FormatFloat(v.Num, 'g', -1, 64), c.Name, err)
		}
		x = n
	}
	vr, err := ua.NewVariant(x)
	if err != nil { // every x above is a variant type
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	return vr, nil
}

// numberAs converts f to the Go type of numeric data type t.
func numberAs(f float64, t dataType) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("is not finite, and %s holds finite numbers", t)
	}
	switch t {
	case typeDouble:
		return f, nil
	case typeFloat:
		if math.Abs(f) > math.MaxFloat32 {
			return nil, fmt.Errorf("is out of the range of a Float (±%g)", math.MaxFloat32)
		}
		// A Float holds about seven digits: a number it cannot hold as
		// written would be stored as another (1e-50 as 0), and its
		// read-back would contradict the command. It is refused instead.
		if g := float32(f); shortest32(g) != f {
			return nil, fmt.Errorf("cannot be held by a Float, which would store %s; write it with at most seven significant digits", strconv.FormatFloat(float64(g), 'g', -1, 32))
		}
		return float32(f), nil
	}
	if !t.integer() {
		return nil, fmt.Errorf("cannot be written to %s %s", article(t.String()), t)
	}
	if f != math.Trunc(f) {
		return nil, fmt.Errorf("is not a whole number, and the node is %s %s", article(t.String()), t)
	}
	lo, hi := t.intRange()
	if f < lo || f >= hi {
		return nil, fmt.Errorf("is out of the range of %s %s (%s to %s)", article(t.String()), t,
			strconv.FormatFloat(lo, 'f', -1, 64), strconv.FormatFloat(hi-1, 'f', -1, 64))
	}
	switch t {
	case typeSByte:
		return int8(f), nil
	case typeByte:
		return uint8(f), nil
	case typeInt16:
		return int16(f), nil
	case typeUInt16:
		return uint16(f), nil
	case typeInt32:
		return int32(f), nil
	case typeUInt32:
		return uint32(f), nil
	case typeInt64:
		return int64(f), nil
	default:
		return uint64(f), nil
	}
}

// fromVariant converts a value a server sent for capability c, strictly:
// a variant of another kind than c's (a String for a number), an array, a
// number that is not finite, an enum index or name that is not a member,
// or text that is not UTF-8 or is too long is an error.
func fromVariant(c *devices.Capability, v *ua.Variant) (value.Value, error) {
	if v == nil || v.Value() == nil {
		return value.Value{}, fmt.Errorf("the server sent no value for %s", c.Name)
	}
	if isArray(v) {
		return value.Value{}, fmt.Errorf("the server sent an array for %s, which is %s %s", c.Name, article(c.Type.String()), c.Type)
	}
	bad := func() (value.Value, error) {
		return value.Value{}, fmt.Errorf("the server sent %s for %s, which is %s %s", variantDesc(v), c.Name, article(c.Type.String()), c.Type)
	}
	var f float64
	isNum := true
	switch x := v.Value().(type) {
	case int8:
		f = float64(x)
	case uint8:
		f = float64(x)
	case int16:
		f = float64(x)
	case uint16:
		f = float64(x)
	case int32:
		f = float64(x)
	case uint32:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float32:
		// The decimal a person wrote, not the binary neighbour float64
		// would show: a Float written as 0.1 reads back as 0.1.
		f = shortest32(x)
	case float64:
		f = x
	default:
		isNum = false
	}
	switch c.Type {
	case value.TypeBool:
		if b, ok := v.Value().(bool); ok {
			return value.Bool(b), nil
		}
	case value.TypeNumber:
		if !isNum {
			return bad()
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return value.Value{}, fmt.Errorf("the server sent %v for %s, which is not a finite number", f, c.Name)
		}
		return value.Number(f), nil
	case value.TypeEnum:
		if s, ok := v.Value().(string); ok {
			if slices.Contains(c.Enum, s) {
				return value.Enum(s), nil
			}
			return value.Value{}, fmt.Errorf("the server sent %q for enum %s, which is not one of its values", truncate(s), c.Name)
		}
		if isNum && dataType(v.Type()).integer() {
			if f >= 0 && f < float64(len(c.Enum)) {
				return value.Enum(c.Enum[int(f)]), nil
			}
			return value.Value{}, fmt.Errorf("the server sent %s for enum %s, which has values 0 to %d", strconv.FormatFloat(f, 'f', -1, 64), c.Name, len(c.Enum)-1)
		}
	case value.TypeString:
		if s, ok := v.Value().(string); ok {
			if len(s) > value.MaxStringLen || !utf8.ValidString(s) {
				return value.Value{}, fmt.Errorf("the server sent text for %s that is not valid UTF-8 of at most %d bytes", c.Name, value.MaxStringLen)
			}
			return value.Text(s), nil
		}
	}
	return bad()
}

// variantDesc names what a variant holds: "a Double", "an array of String".
func variantDesc(v *ua.Variant) string {
	if v == nil || v.Type() == ua.TypeIDNull {
		return "no value"
	}
	name := v.Type().String()
	if name == "" || dataType(v.Type()).known() {
		name = dataType(v.Type()).String()
	}
	if isArray(v) {
		return "an array of " + name
	}
	return article(name) + " " + name
}

// article is "a" or "an", as word needs.
func article(word string) string {
	switch {
	case strings.HasPrefix(word, "UInt"):
		return "a" // a "you-int"
	case strings.HasPrefix(word, "SByte"):
		return "an" // an "ess-byte"
	}
	if word != "" && (word[0] == 'a' || word[0] == 'e' || word[0] == 'i' || word[0] == 'o' || word[0] == 'u' ||
		word[0] == 'A' || word[0] == 'E' || word[0] == 'I' || word[0] == 'O' || word[0] == 'U') {
		return "an"
	}
	return "a"
}

// truncate shortens text a server sent before it goes into an error.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	for i := max; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return ""
}

// isArray reports whether v holds an array (of any length).
func isArray(v *ua.Variant) bool {
	return v.Has(ua.VariantArrayValues) || v.Has(ua.VariantArrayDimensions) || v.ArrayLength() > 0
}

// shortest32 is x as the shortest decimal that is exactly this float32,
// read as a float64: 0.1, not 0.10000000149011612.
func shortest32(x float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return f
}
