package modbus

import (
	"encoding/binary"
	"fmt"
)

// Function is a Modbus function code.
type Function byte

// The function codes this package speaks.
const (
	ReadCoils              Function = 1
	ReadDiscreteInputs     Function = 2
	ReadHoldingRegisters   Function = 3
	ReadInputRegisters     Function = 4
	WriteSingleCoil        Function = 5
	WriteSingleRegister    Function = 6
	WriteMultipleCoils     Function = 15
	WriteMultipleRegisters Function = 16
)

// Limits of the specification.
const (
	// MinUnit and MaxUnit bound a unit id a request may go to (0 is the
	// broadcast, which never answers; 248 to 255 are reserved).
	MinUnit = 1
	MaxUnit = 247
	// MaxReadBits, MaxReadRegisters, MaxWriteCoils and MaxWriteRegisters
	// bound a request's quantity.
	MaxReadBits       = 2000
	MaxReadRegisters  = 125
	MaxWriteCoils     = 1968
	MaxWriteRegisters = 123
	// MaxFrame is the longest RTU frame, in bytes.
	MaxFrame = 256
	// ExceptionLen is the length of an exception response frame.
	ExceptionLen = 5
)

// String names the function as the specification does.
func (f Function) String() string {
	switch f {
	case ReadCoils:
		return "read coils"
	case ReadDiscreteInputs:
		return "read discrete inputs"
	case ReadHoldingRegisters:
		return "read holding registers"
	case ReadInputRegisters:
		return "read input registers"
	case WriteSingleCoil:
		return "write single coil"
	case WriteSingleRegister:
		return "write single register"
	case WriteMultipleCoils:
		return "write multiple coils"
	case WriteMultipleRegisters:
		return "write multiple registers"
	}
	return fmt.Sprintf("function %d", byte(f))
}

// IsWrite reports whether f changes the server's state.
func (f Function) IsWrite() bool {
	return f == WriteSingleCoil || f == WriteSingleRegister || f == WriteMultipleCoils || f == WriteMultipleRegisters
}

// Request is one request to a server. For a read, Quantity says how many
// bits or registers. A write carries its values: Bits for functions 5 (one
// bit) and 15, Registers for 6 (one register) and 16; Quantity is then
// ignored (the values' length is the quantity).
type Request struct {
	Unit      byte
	Function  Function
	Address   uint16
	Quantity  uint16
	Bits      []bool
	Registers []uint16
}

// quantity is the number of bits or registers the request covers.
func (r *Request) quantity() int {
	switch r.Function {
	case WriteSingleCoil, WriteMultipleCoils:
		return len(r.Bits)
	case WriteSingleRegister, WriteMultipleRegisters:
		return len(r.Registers)
	}
	return int(r.Quantity)
}

// Check reports what the protocol does not allow in r, wrapping
// [ErrBadRequest], or nil.
func (r *Request) Check() error {
	if r.Unit < MinUnit || r.Unit > MaxUnit {
		return fmt.Errorf("%w: unit id %d is outside %d..%d", ErrBadRequest, r.Unit, MinUnit, MaxUnit)
	}
	limit := 0
	switch r.Function {
	case ReadCoils, ReadDiscreteInputs:
		limit = MaxReadBits
	case ReadHoldingRegisters, ReadInputRegisters:
		limit = MaxReadRegisters
	case WriteSingleCoil, WriteSingleRegister:
		limit = 1
	case WriteMultipleCoils:
		limit = MaxWriteCoils
	case WriteMultipleRegisters:
		limit = MaxWriteRegisters
	default:
		return fmt.Errorf("%w: %v is not supported", ErrBadRequest, r.Function)
	}
	q := r.quantity()
	if q < 1 || q > limit {
		if limit == 1 {
			return fmt.Errorf("%w: %v takes exactly one value, not %d", ErrBadRequest, r.Function, q)
		}
		return fmt.Errorf("%w: %v of %d is outside 1..%d", ErrBadRequest, r.Function, q, limit)
	}
	if int(r.Address)+q > 0x10000 {
		return fmt.Errorf("%w: %v of %d at address %d runs past address 65535", ErrBadRequest, r.Function, q, r.Address)
	}
	return nil
}

// AppendRequest appends the RTU frame of r, with its CRC, to dst. It
// returns dst unchanged and an error wrapping [ErrBadRequest] when r is
// not a request the protocol allows.
func AppendRequest(dst []byte, r Request) ([]byte, error) {
	if err := r.Check(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, r.Unit, byte(r.Function))
	dst = binary.BigEndian.AppendUint16(dst, r.Address)
	switch r.Function {
	case ReadCoils, ReadDiscreteInputs, ReadHoldingRegisters, ReadInputRegisters:
		dst = binary.BigEndian.AppendUint16(dst, r.Quantity)
	case WriteSingleCoil:
		v := uint16(0x0000)
		if r.Bits[0] {
			v = 0xFF00
		}
		dst = binary.BigEndian.AppendUint16(dst, v)
	case WriteSingleRegister:
		dst = binary.BigEndian.AppendUint16(dst, r.Registers[0])
	case WriteMultipleCoils:
		n := len(r.Bits)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
		dst = append(dst, byte((n+7)/8))
		dst = appendBits(dst, r.Bits)
	case WriteMultipleRegisters:
		n := len(r.Registers)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
		dst = append(dst, byte(2*n))
		for _, v := range r.Registers {
			dst = binary.BigEndian.AppendUint16(dst, v)
		}
	}
	c := CRC16(dst[start:])
	return append(dst, byte(c), byte(c>>8)), nil
}

// appendBits packs bits, the first in the lowest bit of the first byte.
func appendBits(dst []byte, bits []bool) []byte {
	for i := 0; i < len(bits); i += 8 {
		var b byte
		for k := 0; k < 8 && i+k < len(bits); k++ {
			if bits[i+k] {
				b |= 1 << k
			}
		}
		dst = append(dst, b)
	}
	return dst
}

// ResponseLen is the length of the normal response frame to r, CRC
// included; an exception response is [ExceptionLen] bytes. It is 0 for a
// request that [Request.Check] refuses.
func (r *Request) ResponseLen() int {
	if r.Check() != nil {
		return 0
	}
	switch r.Function {
	case ReadCoils, ReadDiscreteInputs:
		return 3 + (int(r.Quantity)+7)/8 + 2
	case ReadHoldingRegisters, ReadInputRegisters:
		return 3 + 2*int(r.Quantity) + 2
	}
	return 8 // a write echoes address and value or quantity
}

// FrameLen says how long the response to r whose first bytes are got will
// be: [ExceptionLen] once the function byte says it is an exception, else
// [Request.ResponseLen]. A reader has the whole frame when len(got) reaches
// it.
func (r *Request) FrameLen(got []byte) int {
	if len(got) >= 2 && got[1] == byte(r.Function)|0x80 {
		return ExceptionLen
	}
	return r.ResponseLen()
}

// Response is what a server answered: the bits or registers a read asked
// for. A write's response carries nothing beyond its echo, which Decode
// checks.
type Response struct {
	Bits      []bool
	Registers []uint16
}

// Decode reads the response frame to req. It returns the data read, an
// *[ExceptionError] when the server refused, or a *[FrameError] when the
// frame is not a valid answer to req. It never panics and does not keep
// frame.
func Decode(req Request, frame []byte) (Response, error) {
	if err := req.Check(); err != nil {
		return Response{}, err
	}
	n := len(frame)
	if n < ExceptionLen {
		return Response{}, frameErr(ErrShortFrame, "%d bytes, the shortest frame is %d", n, ExceptionLen)
	}
	want := req.FrameLen(frame)
	if got, sent := CRC16(frame[:n-2]), binary.LittleEndian.Uint16(frame[n-2:]); got != sent {
		if n < want {
			return Response{}, frameErr(ErrShortFrame, "%d bytes of the %d of a %v response", n, want, req.Function)
		}
		return Response{}, frameErr(ErrBadCRC, "the frame says %04X, its bytes give %04X", sent, got)
	}
	if frame[0] != req.Unit {
		return Response{}, frameErr(ErrWrongUnit, "a frame from unit %d to a request to unit %d", frame[0], req.Unit)
	}
	fn := frame[1]
	if fn == byte(req.Function)|0x80 {
		if n != ExceptionLen {
			return Response{}, frameErr(lengthErr(n, ExceptionLen), "an exception frame of %d bytes, not %d", n, ExceptionLen)
		}
		return Response{}, &ExceptionError{Function: req.Function, Code: frame[2]}
	}
	if fn != byte(req.Function) {
		return Response{}, frameErr(ErrWrongFunction, "function %d in the response to a %v request", fn, req.Function)
	}
	if req.Function.IsWrite() {
		return Response{}, checkEcho(&req, frame)
	}
	count := int(frame[2])
	var wantCount int
	switch req.Function {
	case ReadCoils, ReadDiscreteInputs:
		wantCount = (int(req.Quantity) + 7) / 8
	default:
		wantCount = 2 * int(req.Quantity)
	}
	if count != wantCount {
		return Response{}, frameErr(ErrByteCount, "%d data bytes in the response, %d asked for by a %v of %d", count, wantCount, req.Function, req.Quantity)
	}
	if n != 3+count+2 {
		return Response{}, frameErr(lengthErr(n, 3+count+2), "%d bytes in a frame of byte count %d (want %d)", n, count, 3+count+2)
	}
	data := frame[3 : 3+count]
	if req.Function == ReadCoils || req.Function == ReadDiscreteInputs {
		bits := make([]bool, req.Quantity)
		for i := range bits {
			bits[i] = data[i/8]&(1<<(i%8)) != 0
		}
		return Response{Bits: bits}, nil
	}
	regs := make([]uint16, req.Quantity)
	for i := range regs {
		regs[i] = binary.BigEndian.Uint16(data[2*i:])
	}
	return Response{Registers: regs}, nil
}

func lengthErr(n, want int) error {
	if n < want {
		return ErrShortFrame
	}
	return ErrLongFrame
}

// checkEcho checks a write's response, whose CRC is good: 8 bytes echoing
// the address and the value (5, 6) or the quantity (15, 16).
func checkEcho(req *Request, frame []byte) error {
	if len(frame) != 8 {
		return frameErr(lengthErr(len(frame), 8), "%d bytes in the response to a %v, want 8", len(frame), req.Function)
	}
	addr, v := binary.BigEndian.Uint16(frame[2:]), binary.BigEndian.Uint16(frame[4:])
	var want uint16
	switch req.Function {
	case WriteSingleCoil:
		if req.Bits[0] {
			want = 0xFF00
		}
	case WriteSingleRegister:
		want = req.Registers[0]
	default:
		want = uint16(req.quantity())
	}
	if addr != req.Address || v != want {
		return frameErr(ErrEcho, "address %d and %04X echoed to a %v of %04X at address %d", addr, v, req.Function, want, req.Address)
	}
	return nil
}
