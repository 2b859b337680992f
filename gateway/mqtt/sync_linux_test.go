package mqtt

import (
	"os"
	"syscall"
)

// datasync is fdatasync, as the journal's log makes its durable points.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
