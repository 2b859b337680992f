//go:build !linux

package mqtt

import "os"

func datasync(f *os.File) error { return f.Sync() }
