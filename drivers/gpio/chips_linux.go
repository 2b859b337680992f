package gpio

import (
	"os"
	"path/filepath"
)

// chips returns the GPIO character devices of this machine and, when one
// cannot be opened, why. It is a variable so that a test can play another
// machine.
var chips = func() ([]string, error) {
	found, err := filepath.Glob("/dev/gpiochip*")
	if err != nil {
		return nil, err
	}
	for _, c := range found {
		f, err := os.Open(c)
		if err != nil {
			return found, err
		}
		_ = f.Close()
	}
	return found, nil
}
