package modbus

import (
	"errors"
	"fmt"
)

// Errors of a request that cannot be encoded, for errors.Is. Nothing was
// sent when one of them comes back.
var (
	// ErrBadRequest is returned by [AppendRequest] for a unit id, function,
	// quantity or address range the protocol does not allow.
	ErrBadRequest = errors.New("bad modbus request")
	// ErrBadValue is returned when a value cannot be written to a [Point]:
	// the wrong type, not a whole raw value, or out of the type's range.
	ErrBadValue = errors.New("value cannot be written")
)

// Errors of a response frame, for errors.Is. Each is wrapped in a
// *[FrameError], which says what exactly was wrong; all of them mean the
// frame is noise, to be counted and discarded, never acted on.
var (
	// ErrShortFrame is returned when a frame ends before its length.
	ErrShortFrame = errors.New("short frame")
	// ErrLongFrame is returned when bytes follow the end of a frame.
	ErrLongFrame = errors.New("bytes after the frame")
	// ErrBadCRC is returned when a frame's CRC does not match its bytes.
	ErrBadCRC = errors.New("bad CRC")
	// ErrWrongUnit is returned when a frame comes from another unit id
	// than the request went to.
	ErrWrongUnit = errors.New("wrong unit id")
	// ErrWrongFunction is returned when a frame answers another function
	// than the request's.
	ErrWrongFunction = errors.New("wrong function code")
	// ErrByteCount is returned when a read response's byte count disagrees
	// with the quantity the request asked for.
	ErrByteCount = errors.New("byte count disagrees with the request")
	// ErrEcho is returned when a write response does not echo the
	// request's address, quantity or value.
	ErrEcho = errors.New("write response does not echo the request")
)

// FrameError is a response frame that is not a valid answer to its
// request. Err is one of the frame errors above; Detail says what was
// found.
type FrameError struct {
	Err    error
	Detail string
}

func (e *FrameError) Error() string { return e.Err.Error() + ": " + e.Detail }

func (e *FrameError) Unwrap() error { return e.Err }

// IsNoise reports whether err is a *FrameError: the bytes were not a valid
// answer (line noise, a corrupted or truncated frame, another device's).
func IsNoise(err error) bool {
	var fe *FrameError
	return errors.As(err, &fe)
}

func frameErr(kind error, format string, args ...any) error {
	return &FrameError{Err: kind, Detail: fmt.Sprintf(format, args...)}
}

// ExceptionError is an exception response: the server read the request
// and refused it with a code.
type ExceptionError struct {
	// Function is the request's function code.
	Function Function
	// Code is the exception code.
	Code byte
}

func (e *ExceptionError) Error() string {
	return fmt.Sprintf("exception 0x%02X (%s) to function %d", e.Code, ExceptionName(e.Code), e.Function)
}

// HexCode returns the code as the driver reports it: "0x02".
func (e *ExceptionError) HexCode() string { return fmt.Sprintf("0x%02X", e.Code) }

// Name returns the code's name in the specification's words.
func (e *ExceptionError) Name() string { return ExceptionName(e.Code) }

// The exception codes of the specification.
const (
	IllegalFunction                    byte = 0x01
	IllegalDataAddress                 byte = 0x02
	IllegalDataValue                   byte = 0x03
	ServerDeviceFailure                byte = 0x04
	Acknowledge                        byte = 0x05
	ServerDeviceBusy                   byte = 0x06
	MemoryParityError                  byte = 0x08
	GatewayPathUnavailable             byte = 0x0A
	GatewayTargetDeviceFailedToRespond byte = 0x0B
)

// ExceptionName names an exception code: "illegal data address". A code
// the specification does not define is "unknown exception".
func ExceptionName(code byte) string {
	switch code {
	case IllegalFunction:
		return "illegal function"
	case IllegalDataAddress:
		return "illegal data address"
	case IllegalDataValue:
		return "illegal data value"
	case ServerDeviceFailure:
		return "server device failure"
	case Acknowledge:
		return "acknowledge"
	case ServerDeviceBusy:
		return "server device busy"
	case MemoryParityError:
		return "memory parity error"
	case GatewayPathUnavailable:
		return "gateway path unavailable"
	case GatewayTargetDeviceFailedToRespond:
		return "gateway target device failed to respond"
	}
	return "unknown exception"
}
