package plc

import "errors"

// Errors from starting the PLC.
var (
	// ErrSecurityUnsupported is returned by [Start] when Options.Security
	// asks for a Basic256Sha256 endpoint: the gopcua v0.8.0 server cannot
	// open such a secure channel (see the package documentation).
	ErrSecurityUnsupported = errors.New("security mode not supported by the gopcua server")
)

// Errors from the Go-side setters and from [PLC.Restart].
var (
	// ErrUnknownTag is returned when a tag is not one of [Tags].
	ErrUnknownTag = errors.New("unknown tag")
	// ErrTypeMismatch is returned when a value's Go type does not match
	// the tag's data type (float64 for Double, float32 for Float, int32
	// for Int32, bool for Boolean).
	ErrTypeMismatch = errors.New("value type does not match the tag")
	// ErrOutOfRange is returned when a number is outside the tag's range.
	ErrOutOfRange = errors.New("value out of range")
	// ErrClosed is returned by [PLC.Restart] after [PLC.Close].
	ErrClosed = errors.New("plc closed")
)
