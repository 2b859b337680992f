//go:build !linux

package gpio

import "errors"

// chips returns the GPIO character devices of this machine: there are
// none but on Linux. It is a variable so that a test can play another
// machine.
var chips = func() ([]string, error) { return nil, errors.ErrUnsupported }
