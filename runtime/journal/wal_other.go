//go:build !linux

package journal

import (
	"errors"
	"os"
)

func datasync(f *os.File) error { return f.Sync() }

func preallocate(*os.File, int64) error { return errors.ErrUnsupported }
