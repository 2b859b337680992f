package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// errDriverPanicked is wrapped by the error of a driver call that panicked.
// A panicking Write is an unknown outcome, as a timeout is: the command may
// have reached the device before the driver failed.
var errDriverPanicked = errors.New("the driver panicked")

// driverPanic turns a panic of the driver call op on device.capability
// into an error wrapping errDriverPanicked, logged once here with its
// stack. It must be deferred directly by the function making the call.
func (e *Engine) driverPanic(err *error, op, device, capability string) {
	v := recover()
	if v == nil {
		return
	}
	e.log.Error("driver panicked", "op", op, "device_id", device, "capability", capability,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	*err = &devices.OpError{Op: op, Device: device, Capability: capability, Err: fmt.Errorf("%w: %v", errDriverPanicked, v)}
}

// callRead calls d.Read, turning a panic into an error.
func (e *Engine) callRead(ctx context.Context, d devices.Driver, device, capability string) (rd devices.Reading, err error) {
	defer e.driverPanic(&err, "read", device, capability)
	return d.Read(ctx, device, capability)
}

// callWrite calls d.Write, turning a panic into an error that wraps
// errDriverPanicked.
func (e *Engine) callWrite(ctx context.Context, d devices.Driver, device, capability string, v value.Value) (err error) {
	defer e.driverPanic(&err, "write", device, capability)
	return d.Write(ctx, device, capability, v)
}
