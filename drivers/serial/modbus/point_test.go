package modbus

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestPointNumber(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Point
		regs []uint16
		want float64
	}{
		{"int16 x0.1", Point{Table: Input, Type: Int16, Scale: 0.1}, []uint16{215}, 21.5},
		{"negative int16 x0.1", Point{Table: Input, Type: Int16, Scale: 0.1}, []uint16{0xFFF6}, -1},
		{"int16 x0.1 that is not 0.30000000000000004", Point{Table: Input, Type: Int16, Scale: 0.1}, []uint16{3}, 0.3},
		{"uint16 x0.1", Point{Table: Input, Type: Uint16, Scale: 0.1}, []uint16{655}, 65.5},
		{"uint16 with offset", Point{Table: Holding, Type: Uint16, Scale: 2, Offset: -40}, []uint16{30}, 20},
		{"int32 big", Point{Table: Holding, Type: Int32}, []uint16{0xFFFF, 0xFFFE}, -2},
		{"int32 little", Point{Table: Holding, Type: Int32, Order: LittleWords}, []uint16{0xFFFE, 0xFFFF}, -2},
		{"uint32 big", Point{Table: Holding, Type: Uint32}, []uint16{0x0001, 0x0002}, 65538},
		{"uint32 little", Point{Table: Holding, Type: Uint32, Order: LittleWords}, []uint16{0x0002, 0x0001}, 65538},
		{"float32 big", Point{Table: Input, Type: Float32}, []uint16{0x41AA, 0x6666}, 21.3},
		{"float32 little", Point{Table: Input, Type: Float32, Order: LittleWords}, []uint16{0x6666, 0x41AA}, 21.3},
	} {
		got, err := c.p.Number(Response{Registers: c.regs})
		if err != nil || got != c.want {
			t.Errorf("%s: Number(%04X) = %v, %v, want %v", c.name, c.regs, got, err, c.want)
		}
		if !c.p.Table.Writable() {
			continue
		}
		req, err := c.p.WriteNumber(7, c.want)
		if err != nil || !reflect.DeepEqual(req.Registers, c.regs) {
			t.Errorf("%s: WriteNumber(%v) = %04X, %v, want %04X", c.name, c.want, req.Registers, err, c.regs)
		}
	}
	if _, err := (Point{Table: Input, Type: Float32}).Number(Response{Registers: []uint16{0x7FC0, 0}}); err == nil {
		t.Error("a NaN float32 was read as a number")
	}
}

func TestPointWriteRequests(t *testing.T) {
	hr := Point{Table: Holding, Address: 9, Type: Int16, Scale: 0.1}
	req, err := hr.WriteNumber(3, 21.5)
	want := Request{Unit: 3, Function: WriteSingleRegister, Address: 9, Registers: []uint16{215}}
	if err != nil || !reflect.DeepEqual(req, want) {
		t.Errorf("WriteNumber(21.5) = %+v, %v, want %+v", req, err, want)
	}
	f := Point{Table: Holding, Address: 4, Type: Float32}
	req, err = f.WriteNumber(3, 21.3)
	want = Request{Unit: 3, Function: WriteMultipleRegisters, Address: 4, Registers: []uint16{0x41AA, 0x6666}}
	if err != nil || !reflect.DeepEqual(req, want) {
		t.Errorf("WriteNumber(21.3) to a float32 = %+v, %v, want %+v", req, err, want)
	}
	coil := Point{Table: Coil, Address: 2, Type: Bool}
	req, err = coil.WriteBool(3, true)
	want = Request{Unit: 3, Function: WriteSingleCoil, Address: 2, Bits: []bool{true}}
	if err != nil || !reflect.DeepEqual(req, want) {
		t.Errorf("WriteBool(true) to a coil = %+v, %v, want %+v", req, err, want)
	}
	reg := Point{Table: Holding, Address: 2, Type: Bool}
	req, err = reg.WriteBool(3, true)
	want = Request{Unit: 3, Function: WriteSingleRegister, Address: 2, Registers: []uint16{1}}
	if err != nil || !reflect.DeepEqual(req, want) {
		t.Errorf("WriteBool(true) to a register = %+v, %v, want %+v", req, err, want)
	}
	if b, err := reg.Bool(Response{Registers: []uint16{7}}); err != nil || !b {
		t.Errorf("Bool of register 7 = %v, %v, want true", b, err)
	}
}

func TestPointRefusesValues(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Point
		v    float64
	}{
		{"not a whole raw value", Point{Table: Holding, Type: Int16, Scale: 0.1}, 21.55},
		{"above int16", Point{Table: Holding, Type: Int16}, 32768},
		{"below int16", Point{Table: Holding, Type: Int16}, -32769},
		{"negative uint16", Point{Table: Holding, Type: Uint16}, -1},
		{"above uint16 after scaling", Point{Table: Holding, Type: Uint16, Scale: 0.1}, 6553.6},
		{"above uint32", Point{Table: Holding, Type: Uint32}, 1 << 32},
		{"above float32", Point{Table: Holding, Type: Float32}, math.MaxFloat64},
		{"infinite", Point{Table: Holding, Type: Float32}, math.Inf(1)},
		{"read-only", Point{Table: Input, Type: Int16}, 1},
		{"to a coil", Point{Table: Coil, Type: Bool}, 1},
	} {
		if req, err := c.p.WriteNumber(1, c.v); !errors.Is(err, ErrBadValue) {
			t.Errorf("%s: WriteNumber(%v) = %+v, %v, want ErrBadValue", c.name, c.v, req, err)
		}
	}
	if _, err := (Point{Table: Discrete, Type: Bool}).WriteBool(1, true); !errors.Is(err, ErrBadValue) {
		t.Errorf("WriteBool to a discrete input = %v, want ErrBadValue", err)
	}
	if _, err := (Point{Table: Holding, Type: Int16}).WriteBool(1, true); !errors.Is(err, ErrBadValue) {
		t.Errorf("WriteBool to an int16 = %v, want ErrBadValue", err)
	}
}

func TestPointCheck(t *testing.T) {
	for _, c := range []struct {
		p  Point
		ok bool
	}{
		{Point{Table: Coil, Type: Bool}, true},
		{Point{Table: Coil, Type: Int16}, false},
		{Point{Table: Holding, Type: Bool, Scale: 2}, false},
		{Point{Table: Holding, Type: Float32, Address: 65534}, true},
		{Point{Table: Holding, Type: Float32, Address: 65535}, false},
		{Point{Table: Holding, Type: Int16, Scale: math.NaN()}, false},
		{Point{Type: Int16}, false},
	} {
		if err := c.p.Check(); (err == nil) != c.ok {
			t.Errorf("Check(%+v) = %v, want ok %v", c.p, err, c.ok)
		}
	}
}

func TestParseNames(t *testing.T) {
	for _, s := range []string{"coil", "discrete", "holding", "input"} {
		if tb, err := ParseTable(s); err != nil || tb.String() != s {
			t.Errorf("ParseTable(%q) = %v, %v", s, tb, err)
		}
	}
	for _, s := range []string{"bool", "int16", "uint16", "int32", "uint32", "float32"} {
		if dt, err := ParseDataType(s); err != nil || dt.String() != s {
			t.Errorf("ParseDataType(%q) = %v, %v", s, dt, err)
		}
	}
	if o, err := ParseWordOrder(""); err != nil || o != BigWords {
		t.Errorf("ParseWordOrder(\"\") = %v, %v, want big", o, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := ParseTable("holdings"); return err },
		func() error { _, err := ParseDataType("int64"); return err },
		func() error { _, err := ParseWordOrder("middle"); return err },
	} {
		if bad() == nil {
			t.Error("a wrong name was parsed")
		}
	}
}
