package devices

import (
	"context"
	"errors"

	"github.com/shadowgate/shadowgate/value"
)

// Driver reaches devices. Implementations must be safe for concurrent use.
// Read and Write must honour ctx: they return when it is done. A driver
// failure is returned as an *OpError wrapping one of the typed outcomes
// (outcome.go). A write that failed before anything was sent says so with
// Offline, Refused or BadRequest; every other write error, a plain one
// included, is taken to mean the command may have reached the device, and
// the runtime locks the actuator and reads it back. A driver may also
// implement HealthReporter.
type Driver interface {
	// Open connects the driver. It is called once, before any other method.
	Open(ctx context.Context) error
	// Devices returns the devices reachable now. An unplugged device is
	// absent. The caller must not modify the returned slice.
	Devices() []Device
	// Read observes one capability.
	Read(ctx context.Context, device, capability string) (Reading, error)
	// Write changes one capability. It returns when the driver has passed the
	// value on; whether the world followed is for a read-back to tell.
	Write(ctx context.Context, device, capability string, v value.Value) error
	// Close releases the driver. Calls after Close return ErrClosed.
	Close() error
}

// Errors of drivers, for errors.Is.
var (
	// ErrOffline is returned when the device cannot be reached now.
	ErrOffline = errors.New("device offline")
	// ErrUnknownDevice is returned when the driver has no such device.
	ErrUnknownDevice = errors.New("unknown device")
	// ErrUnknownCapability is returned when the device has no such capability.
	ErrUnknownCapability = errors.New("unknown capability")
	// ErrNotWritable is returned for a write to a sensor.
	ErrNotWritable = errors.New("capability is not writable")
	// ErrNotReadable is returned for a read of an actuator without read-back.
	ErrNotReadable = errors.New("capability is not readable")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("driver closed")
)

// OpError is a driver failure on one device capability.
type OpError struct {
	// Op is "open", "read", "write" or "close".
	Op         string
	Device     string
	Capability string
	Err        error
}

func (e *OpError) Error() string {
	s := e.Op
	if e.Device != "" {
		s += " " + e.Device
		if e.Capability != "" {
			s += "." + e.Capability
		}
	}
	return s + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }
