package modbus

import (
	"fmt"
	"math"
	"strconv"
)

// Table is one of the four data tables of a Modbus server.
type Table uint8

// The tables. Coils and holding registers can be written; discrete inputs
// and input registers only read.
const (
	Coil Table = iota + 1
	Discrete
	Holding
	Input
)

// ParseTable parses a configuration name: coil, discrete, holding, input.
func ParseTable(s string) (Table, error) {
	for t := Coil; t <= Input; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown table %q (want coil, discrete, holding or input)", s)
}

// String returns the configuration name of t.
func (t Table) String() string {
	switch t {
	case Coil:
		return "coil"
	case Discrete:
		return "discrete"
	case Holding:
		return "holding"
	case Input:
		return "input"
	}
	return "none"
}

// Writable reports whether the table can be written: coils and holding
// registers.
func (t Table) Writable() bool { return t == Coil || t == Holding }

// Bits reports whether the table holds bits rather than registers.
func (t Table) Bits() bool { return t == Coil || t == Discrete }

// DataType is how a value is held in a table.
type DataType uint8

// The data types. Bool is a coil or discrete input, or a register that is
// true when not zero; the 32-bit types take two registers.
const (
	Bool DataType = iota + 1
	Int16
	Uint16
	Int32
	Uint32
	Float32
)

// ParseDataType parses a configuration name: bool, int16, uint16, int32,
// uint32, float32.
func ParseDataType(s string) (DataType, error) {
	for t := Bool; t <= Float32; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown type %q (want bool, int16, uint16, int32, uint32 or float32)", s)
}

// String returns the configuration name of t.
func (t DataType) String() string {
	switch t {
	case Bool:
		return "bool"
	case Int16:
		return "int16"
	case Uint16:
		return "uint16"
	case Int32:
		return "int32"
	case Uint32:
		return "uint32"
	case Float32:
		return "float32"
	}
	return "none"
}

// Registers is how many registers a value of t takes.
func (t DataType) Registers() int {
	if t == Int32 || t == Uint32 || t == Float32 {
		return 2
	}
	return 1
}

// rawRange is the range of the whole raw values of an integer type.
func (t DataType) rawRange() (float64, float64) {
	switch t {
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Uint16:
		return 0, math.MaxUint16
	case Int32:
		return math.MinInt32, math.MaxInt32
	case Uint32:
		return 0, math.MaxUint32
	}
	return -math.MaxFloat32, math.MaxFloat32
}

// WordOrder is the order of the two registers of a 32-bit value. Each
// register is big-endian, as the protocol says.
type WordOrder uint8

// The word orders. The zero value is BigWords.
const (
	// BigWords puts the high word in the first register.
	BigWords WordOrder = iota
	// LittleWords puts the low word in the first register.
	LittleWords
)

// ParseWordOrder parses a configuration name: big (the default for "")
// or little.
func ParseWordOrder(s string) (WordOrder, error) {
	switch s {
	case "", "big":
		return BigWords, nil
	case "little":
		return LittleWords, nil
	}
	return 0, fmt.Errorf("unknown word order %q (want big or little)", s)
}

// String returns "big" or "little".
func (o WordOrder) String() string {
	if o == LittleWords {
		return "little"
	}
	return "big"
}

// Point is where a value lives in a server and how it is held: a coil or
// discrete input, or one or two registers of a type, scaled. The
// engineering value of a number is raw*Scale + Offset.
type Point struct {
	Table   Table
	Address uint16
	// Type is Bool for a coil or a discrete input.
	Type  DataType
	Order WordOrder
	// Scale multiplies the raw value; zero means 1.
	Scale  float64
	Offset float64
}

// Check reports what makes p unusable, or nil.
func (p Point) Check() error {
	switch {
	case p.Table < Coil || p.Table > Input:
		return fmt.Errorf("no table")
	case p.Type < Bool || p.Type > Float32:
		return fmt.Errorf("no type")
	case p.Table.Bits() && p.Type != Bool:
		return fmt.Errorf("a %s holds a bool, not a number (%s)", p.Table, p.Type)
	case p.Type == Bool && (p.Scale != 0 && p.Scale != 1 || p.Offset != 0):
		return fmt.Errorf("a bool has no scale or offset")
	case math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0) || math.IsNaN(p.Offset) || math.IsInf(p.Offset, 0):
		return fmt.Errorf("scale and offset must be finite numbers")
	case int(p.Address)+p.Type.Registers() > 0x10000:
		return fmt.Errorf("a %s at address %d runs past address 65535", p.Type, p.Address)
	}
	return nil
}

// IsBool reports whether p holds a bool rather than a number.
func (p Point) IsBool() bool { return p.Type == Bool }

// ReadRequest is the request that reads p from unit.
func (p Point) ReadRequest(unit byte) Request {
	r := Request{Unit: unit, Address: p.Address, Quantity: uint16(p.Type.Registers())}
	switch p.Table {
	case Coil:
		r.Function = ReadCoils
	case Discrete:
		r.Function = ReadDiscreteInputs
	case Holding:
		r.Function = ReadHoldingRegisters
	case Input:
		r.Function = ReadInputRegisters
	}
	return r
}

// Bool returns the bool that resp, the response to p's ReadRequest, holds.
func (p Point) Bool(resp Response) (bool, error) {
	if p.Table.Bits() {
		if len(resp.Bits) < 1 {
			return false, fmt.Errorf("no bit in the response")
		}
		return resp.Bits[0], nil
	}
	if len(resp.Registers) < 1 {
		return false, fmt.Errorf("no register in the response")
	}
	return resp.Registers[0] != 0, nil
}

// Number returns the engineering value that resp, the response to p's
// ReadRequest, holds. It refuses a float32 that is not a finite number.
func (p Point) Number(resp Response) (float64, error) {
	regs := resp.Registers
	if len(regs) < p.Type.Registers() || p.Table.Bits() {
		return 0, fmt.Errorf("%d registers in the response, a %s takes %d", len(regs), p.Type, p.Type.Registers())
	}
	var raw float64
	switch p.Type {
	case Int16:
		raw = float64(int16(regs[0]))
	case Uint16:
		raw = float64(regs[0])
	case Int32:
		raw = float64(int32(p.join(regs)))
	case Uint32:
		raw = float64(p.join(regs))
	case Float32:
		f := math.Float32frombits(p.join(regs))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return 0, fmt.Errorf("the float32 at %s %d is not a finite number", p.Table, p.Address)
		}
		// The shortest decimal that is this float32: 21.3 reads as 21.3,
		// not as 21.299999237060547.
		raw, _ = strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	default:
		return 0, fmt.Errorf("a %s is not a number", p.Type)
	}
	return p.engineering(raw), nil
}

func (p Point) join(regs []uint16) uint32 {
	if p.Order == LittleWords {
		return uint32(regs[1])<<16 | uint32(regs[0])
	}
	return uint32(regs[0])<<16 | uint32(regs[1])
}

func (p Point) split(v uint32) []uint16 {
	if p.Order == LittleWords {
		return []uint16{uint16(v), uint16(v >> 16)}
	}
	return []uint16{uint16(v >> 16), uint16(v)}
}

// divisor returns n when Scale is 1/n for a whole n > 1 (0.1, 0.01), so
// that raw/n gives the decimal a person expects where raw*Scale would
// give 0.30000000000000004.
func (p Point) divisor() (float64, bool) {
	if p.Scale == 0 || math.Abs(p.Scale) >= 1 {
		return 0, false
	}
	n := math.Round(1 / p.Scale)
	return n, n > 1 && math.Abs(1/n-p.Scale) <= 1e-15*math.Abs(p.Scale)
}

func (p Point) engineering(raw float64) float64 {
	if n, ok := p.divisor(); ok {
		return raw/n + p.Offset
	}
	if p.Scale == 0 {
		return raw + p.Offset
	}
	return raw*p.Scale + p.Offset
}

// raw inverts engineering.
func (p Point) raw(v float64) float64 {
	v -= p.Offset
	if n, ok := p.divisor(); ok {
		return v * n
	}
	if p.Scale == 0 {
		return v
	}
	return v / p.Scale
}

// WriteBool returns the request that writes b to p on unit: a single coil,
// or a single register of 1 or 0. It refuses a point that is read-only or
// holds a number, wrapping [ErrBadValue].
func (p Point) WriteBool(unit byte, b bool) (Request, error) {
	if !p.Table.Writable() {
		return Request{}, fmt.Errorf("%w: the %s table is read-only", ErrBadValue, p.Table)
	}
	if p.Type != Bool {
		return Request{}, fmt.Errorf("%w: a bool to a %s register", ErrBadValue, p.Type)
	}
	if p.Table == Coil {
		return Request{Unit: unit, Function: WriteSingleCoil, Address: p.Address, Bits: []bool{b}}, nil
	}
	var v uint16
	if b {
		v = 1
	}
	return Request{Unit: unit, Function: WriteSingleRegister, Address: p.Address, Registers: []uint16{v}}, nil
}

// WriteNumber returns the request that writes the engineering value v to
// p on unit: function 6 for one register, 16 for two. It refuses, wrapping
// [ErrBadValue], a point that is read-only or holds a bool, a value that
// is not a whole raw value of an integer type once scale and offset are
// inverted, and one outside the type's range.
func (p Point) WriteNumber(unit byte, v float64) (Request, error) {
	if !p.Table.Writable() {
		return Request{}, fmt.Errorf("%w: the %s table is read-only", ErrBadValue, p.Table)
	}
	if p.Type == Bool || p.Table.Bits() {
		return Request{}, fmt.Errorf("%w: a number to a bool", ErrBadValue)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Request{}, fmt.Errorf("%w: %v is not a finite number", ErrBadValue, v)
	}
	raw := p.raw(v)
	lo, hi := p.Type.rawRange()
	if p.Type != Float32 {
		whole := math.Round(raw)
		if math.Abs(raw-whole) > 1e-9*math.Max(1, math.Abs(whole)) {
			return Request{}, fmt.Errorf("%w: %v is %v raw, not a whole %s (scale %v, offset %v)", ErrBadValue, v, raw, p.Type, p.scale(), p.Offset)
		}
		raw = whole
	}
	if raw < lo || raw > hi {
		return Request{}, fmt.Errorf("%w: %v is %v raw, outside the %s range %v..%v", ErrBadValue, v, raw, p.Type, lo, hi)
	}
	r := Request{Unit: unit, Address: p.Address}
	switch p.Type {
	case Int16:
		r.Function, r.Registers = WriteSingleRegister, []uint16{uint16(int16(raw))}
	case Uint16:
		r.Function, r.Registers = WriteSingleRegister, []uint16{uint16(raw)}
	case Int32:
		r.Function, r.Registers = WriteMultipleRegisters, p.split(uint32(int32(raw)))
	case Uint32:
		r.Function, r.Registers = WriteMultipleRegisters, p.split(uint32(raw))
	case Float32:
		r.Function, r.Registers = WriteMultipleRegisters, p.split(math.Float32bits(float32(raw)))
	}
	return r, nil
}

func (p Point) scale() float64 {
	if p.Scale == 0 {
		return 1
	}
	return p.Scale
}
