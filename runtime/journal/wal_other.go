//go:build !linux

package journal

import (
	"errors"
	"os"
)

func datasync(f *os.File) error { return f.Sync() }

func preallocate(*os.File, int64) error { return errors.ErrUnsupported }

func directAlign(*os.File) int64 { return 0 }

func setDirect(*os.File, bool) error { return errors.ErrUnsupported }
