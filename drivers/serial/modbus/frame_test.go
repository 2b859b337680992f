package modbus

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestCRC16CheckValue(t *testing.T) {
	if got := CRC16([]byte("123456789")); got != 0x4B37 {
		t.Fatalf("CRC16(123456789) = %04X, want 4B37 (CRC-16/MODBUS)", got)
	}
}

// exchange is a request, its frame and a response frame with what it
// decodes to. The frames are the worked examples of the protocol's
// literature (unit 17, 0x11), with their published CRCs, and one of
// unit 1 whose response CRC is our own: one
// table drives the encoder's and the decoder's tests, the fuzz seeds and
// the benchmarks.
type exchange struct {
	name     string
	req      Request
	frame    []byte
	response []byte
	want     Response
}

var exchanges = []exchange{
	{
		name: "read coils 20-56",
		req:  Request{Unit: 0x11, Function: ReadCoils, Address: 0x13, Quantity: 0x25},
		frame: []byte{
			0x11,       // unit
			0x01,       // function: read coils
			0x00, 0x13, // address 19 (coil 20)
			0x00, 0x25, // quantity 37
			0x0E, 0x84, // CRC, low byte first
		},
		response: []byte{
			0x11, 0x01,
			0x05,                         // byte count
			0xCD, 0x6B, 0xB2, 0x0E, 0x1B, // coils 20-27, 28-35, 36-43, 44-51, 52-56 (first in bit 0)
			0x45, 0xE6, // CRC
		},
		want: Response{Bits: bits(0xCD, 0x6B, 0xB2, 0x0E, 0x1B)[:37]},
	},
	{
		name:     "read discrete inputs 197-218",
		req:      Request{Unit: 0x11, Function: ReadDiscreteInputs, Address: 0xC4, Quantity: 0x16},
		frame:    []byte{0x11, 0x02, 0x00, 0xC4, 0x00, 0x16, 0xBA, 0xA9},
		response: []byte{0x11, 0x02, 0x03, 0xAC, 0xDB, 0x35, 0x20, 0x18},
		want:     Response{Bits: bits(0xAC, 0xDB, 0x35)[:22]},
	},
	{
		name:  "read holding registers 40108-40110",
		req:   Request{Unit: 0x11, Function: ReadHoldingRegisters, Address: 0x6B, Quantity: 3},
		frame: []byte{0x11, 0x03, 0x00, 0x6B, 0x00, 0x03, 0x76, 0x87},
		response: []byte{
			0x11, 0x03,
			0x06,       // byte count: 3 registers
			0xAE, 0x41, // 0xAE41
			0x56, 0x52, // 0x5652
			0x43, 0x40, // 0x4340
			0x49, 0xAD, // CRC
		},
		want: Response{Registers: []uint16{0xAE41, 0x5652, 0x4340}},
	},
	{
		name:     "read input register 30009",
		req:      Request{Unit: 0x11, Function: ReadInputRegisters, Address: 0x08, Quantity: 1},
		frame:    []byte{0x11, 0x04, 0x00, 0x08, 0x00, 0x01, 0xB2, 0x98},
		response: []byte{0x11, 0x04, 0x02, 0x00, 0x0A, 0xF8, 0xF4},
		want:     Response{Registers: []uint16{10}},
	},
	{
		name: "write coil 173 on",
		req:  Request{Unit: 0x11, Function: WriteSingleCoil, Address: 0xAC, Bits: []bool{true}},
		frame: []byte{
			0x11, 0x05,
			0x00, 0xAC, // address 172 (coil 173)
			0xFF, 0x00, // on
			0x4E, 0x8B,
		},
		response: []byte{0x11, 0x05, 0x00, 0xAC, 0xFF, 0x00, 0x4E, 0x8B}, // the echo
	},
	{
		name:     "write register 40002",
		req:      Request{Unit: 0x11, Function: WriteSingleRegister, Address: 0x01, Registers: []uint16{3}},
		frame:    []byte{0x11, 0x06, 0x00, 0x01, 0x00, 0x03, 0x9A, 0x9B},
		response: []byte{0x11, 0x06, 0x00, 0x01, 0x00, 0x03, 0x9A, 0x9B},
	},
	{
		name: "write coils 20-29",
		req:  Request{Unit: 0x11, Function: WriteMultipleCoils, Address: 0x13, Bits: bits(0xCD, 0x01)[:10]},
		frame: []byte{
			0x11, 0x0F,
			0x00, 0x13, // address
			0x00, 0x0A, // quantity 10
			0x02,       // byte count
			0xCD, 0x01, // coils
			0xBF, 0x0B,
		},
		response: []byte{0x11, 0x0F, 0x00, 0x13, 0x00, 0x0A, 0x26, 0x99}, // address and quantity
	},
	{
		name: "write registers 40002-40003",
		req:  Request{Unit: 0x11, Function: WriteMultipleRegisters, Address: 0x01, Registers: []uint16{0x000A, 0x0102}},
		frame: []byte{
			0x11, 0x10,
			0x00, 0x01, // address
			0x00, 0x02, // quantity
			0x04,       // byte count
			0x00, 0x0A, // 10
			0x01, 0x02, // 258
			0xC6, 0xF0,
		},
		response: []byte{0x11, 0x10, 0x00, 0x01, 0x00, 0x02, 0x12, 0x98},
	},
	{
		name:     "read holding register 0 of unit 1",
		req:      Request{Unit: 1, Function: ReadHoldingRegisters, Address: 0, Quantity: 1},
		frame:    []byte{0x01, 0x03, 0x00, 0x00, 0x00, 0x01, 0x84, 0x0A},
		response: []byte{0x01, 0x03, 0x02, 0x00, 0xD7, 0xF8, 0x1A}, // 215 (21.5 °C at scale 0.1); our CRC
		want:     Response{Registers: []uint16{215}},
	},
}

// bits unpacks bytes, the first bit in bit 0.
func bits(b ...byte) []bool {
	var out []bool
	for _, x := range b {
		for k := range 8 {
			out = append(out, x&(1<<k) != 0)
		}
	}
	return out
}

func TestAppendRequest(t *testing.T) {
	for _, x := range exchanges {
		got, err := AppendRequest([]byte{0xAA}, x.req)
		if err != nil {
			t.Fatalf("%s: AppendRequest: %v", x.name, err)
		}
		if !bytes.Equal(got[1:], x.frame) || got[0] != 0xAA {
			t.Errorf("%s: AppendRequest = % X, want AA % X", x.name, got, x.frame)
		}
		if n := x.req.ResponseLen(); n != len(x.response) {
			t.Errorf("%s: ResponseLen = %d, want %d", x.name, n, len(x.response))
		}
	}
}

func TestDecode(t *testing.T) {
	for _, x := range exchanges {
		got, err := Decode(x.req, x.response)
		if err != nil {
			t.Fatalf("%s: Decode(% X): %v", x.name, x.response, err)
		}
		if !reflect.DeepEqual(got, x.want) {
			t.Errorf("%s: Decode = %+v, want %+v", x.name, got, x.want)
		}
	}
}

func TestRequestLimits(t *testing.T) {
	for _, c := range []struct {
		req Request
		ok  bool
	}{
		{Request{Unit: 0, Function: ReadCoils, Quantity: 1}, false},
		{Request{Unit: 247, Function: ReadCoils, Quantity: 1}, true},
		{Request{Unit: 248, Function: ReadCoils, Quantity: 1}, false},
		{Request{Unit: 1, Function: ReadCoils, Quantity: 2000}, true},
		{Request{Unit: 1, Function: ReadDiscreteInputs, Quantity: 2001}, false},
		{Request{Unit: 1, Function: ReadHoldingRegisters, Quantity: 125}, true},
		{Request{Unit: 1, Function: ReadInputRegisters, Quantity: 126}, false},
		{Request{Unit: 1, Function: ReadInputRegisters, Quantity: 0}, false},
		{Request{Unit: 1, Function: WriteMultipleCoils, Bits: make([]bool, 1968)}, true},
		{Request{Unit: 1, Function: WriteMultipleCoils, Bits: make([]bool, 1969)}, false},
		{Request{Unit: 1, Function: WriteMultipleRegisters, Registers: make([]uint16, 123)}, true},
		{Request{Unit: 1, Function: WriteMultipleRegisters, Registers: make([]uint16, 124)}, false},
		{Request{Unit: 1, Function: WriteSingleRegister, Registers: []uint16{1, 2}}, false},
		{Request{Unit: 1, Function: WriteSingleCoil}, false},
		{Request{Unit: 1, Function: ReadHoldingRegisters, Address: 65535, Quantity: 1}, true},
		{Request{Unit: 1, Function: ReadHoldingRegisters, Address: 65535, Quantity: 2}, false},
		{Request{Unit: 1, Function: 7, Quantity: 1}, false},
	} {
		_, err := AppendRequest(nil, c.req)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadRequest)) {
			t.Errorf("AppendRequest(%+v) = %v, want ok %v", c.req, err, c.ok)
		}
	}
}

// withCRC returns b with its CRC appended.
func withCRC(b ...byte) []byte { return appendCRC(b) }

func TestDecodeRefuses(t *testing.T) {
	readHR := Request{Unit: 1, Function: ReadHoldingRegisters, Address: 0, Quantity: 2}
	writeCoil := Request{Unit: 1, Function: WriteSingleCoil, Address: 4, Bits: []bool{true}}
	good := withCRC(1, 3, 4, 0, 1, 0, 2)
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xFF
	for _, c := range []struct {
		name  string
		req   Request
		frame []byte
		want  error
	}{
		{"nothing", readHR, nil, ErrShortFrame},
		{"four bytes", readHR, []byte{1, 3, 4, 0}, ErrShortFrame},
		{"truncated", readHR, good[:6], ErrShortFrame},
		{"bad CRC", readHR, badCRC, ErrBadCRC},
		{"another unit", readHR, withCRC(2, 3, 4, 0, 1, 0, 2), ErrWrongUnit},
		{"another function", readHR, withCRC(1, 4, 4, 0, 1, 0, 2), ErrWrongFunction},
		{"another function's exception", readHR, withCRC(1, 0x84, 2), ErrWrongFunction},
		{"byte count of one register", readHR, withCRC(1, 3, 2, 0, 1), ErrByteCount},
		{"byte count that lies", readHR, withCRC(1, 3, 4, 0, 1, 0, 2, 9), ErrLongFrame},
		{"long exception", readHR, withCRC(1, 0x83, 2, 0), ErrLongFrame},
		{"write echo of another value", writeCoil, withCRC(1, 5, 0, 4, 0, 0), ErrEcho},
		{"write echo of another address", writeCoil, withCRC(1, 5, 0, 5, 0xFF, 0), ErrEcho},
		{"short write echo", writeCoil, withCRC(1, 5, 0, 4, 0xFF), ErrShortFrame},
	} {
		_, err := Decode(c.req, c.frame)
		if !errors.Is(err, c.want) || !IsNoise(err) {
			t.Errorf("%s: Decode(% X) = %v, want %v", c.name, c.frame, err, c.want)
		}
	}
}

func TestDecodeException(t *testing.T) {
	req := Request{Unit: 10, Function: ReadCoils, Address: 0x1000, Quantity: 1}
	frame := []byte{
		0x0A, // unit 10
		0x81, // read coils | 0x80
		0x02, // illegal data address
		0xB0, 0x53,
	}
	if n := req.FrameLen(frame[:2]); n != ExceptionLen {
		t.Fatalf("FrameLen of an exception's first bytes = %d, want %d", n, ExceptionLen)
	}
	_, err := Decode(req, frame)
	var ex *ExceptionError
	if !errors.As(err, &ex) || ex.Code != IllegalDataAddress || ex.HexCode() != "0x02" || ex.Name() != "illegal data address" {
		t.Fatalf("Decode(% X) = %v, want exception 0x02 illegal data address", frame, err)
	}
	if IsNoise(err) {
		t.Fatal("an exception was taken for noise")
	}
	want := map[byte]string{1: "illegal function", 2: "illegal data address", 3: "illegal data value",
		4: "server device failure", 5: "acknowledge", 6: "server device busy", 8: "memory parity error",
		0x0A: "gateway path unavailable", 0x0B: "gateway target device failed to respond", 0x07: "unknown exception"}
	for code, name := range want {
		if got := ExceptionName(code); got != name {
			t.Errorf("ExceptionName(0x%02X) = %q, want %q", code, got, name)
		}
	}
}

// FuzzDecode: no frame panics the decoder; what it accepts has the
// quantity asked for; an exception is five bytes; every refusal is noise
// or an exception. With sign set, the frame gets unit 1 and a good CRC,
// so that the fuzzer reaches past the CRC check.
func FuzzDecode(f *testing.F) {
	for _, x := range exchanges {
		f.Add(byte(x.req.Function), x.req.Quantity, false, x.response)
		f.Add(byte(x.req.Function), x.req.Quantity, true, x.response[:len(x.response)-2])
	}
	f.Add(byte(ReadCoils), uint16(1), false, []byte{0x0A, 0x81, 0x02, 0xB0, 0x53})
	f.Add(byte(ReadCoils), uint16(1), true, []byte{0x01, 0x81, 0x02})
	f.Fuzz(func(t *testing.T, fn byte, q uint16, sign bool, frame []byte) {
		req := Request{Unit: 1, Function: Function(fn), Quantity: q}
		switch req.Function {
		case WriteSingleCoil:
			req.Bits = []bool{q&1 != 0}
		case WriteMultipleCoils:
			req.Bits = make([]bool, q%2000)
		case WriteSingleRegister:
			req.Registers = []uint16{q}
		case WriteMultipleRegisters:
			req.Registers = make([]uint16, q%130)
		}
		if sign && len(frame) > 0 && len(frame) < MaxFrame {
			frame[0] = 1
			frame = appendCRC(frame)
		}
		resp, err := Decode(req, frame)
		var ex *ExceptionError
		switch {
		case err == nil:
			if n := len(resp.Bits) + len(resp.Registers); !req.Function.IsWrite() && n != int(q) {
				t.Fatalf("Decode(% X) to %+v: %d values, want %d", frame, req, n, q)
			}
			if len(frame) != req.ResponseLen() {
				t.Fatalf("Decode accepted %d bytes, ResponseLen is %d", len(frame), req.ResponseLen())
			}
		case errors.As(err, &ex):
			if len(frame) != ExceptionLen {
				t.Fatalf("an exception of %d bytes: % X", len(frame), frame)
			}
		case !IsNoise(err) && !errors.Is(err, ErrBadRequest):
			t.Fatalf("Decode(% X) = %v, neither noise nor an exception", frame, err)
		}
	})
}

func BenchmarkAppendRequest(b *testing.B) {
	req := Request{Unit: 1, Function: WriteMultipleRegisters, Address: 10, Registers: []uint16{1, 2}}
	buf := make([]byte, 0, MaxFrame)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := AppendRequest(buf[:0], req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	x := exchanges[2] // three holding registers
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(x.req, x.response); err != nil {
			b.Fatal(err)
		}
	}
}

// Encoding and decoding a register read allocate no more than the values
// returned.
func TestAllocs(t *testing.T) {
	x := exchanges[2]
	buf := make([]byte, 0, MaxFrame)
	if n := testing.AllocsPerRun(100, func() { _, _ = AppendRequest(buf[:0], x.req) }); n != 0 {
		t.Errorf("AppendRequest allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Decode(x.req, x.response) }); n > 1 {
		t.Errorf("Decode allocates %v times, want at most 1 (the registers)", n)
	}
}
