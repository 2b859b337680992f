package journal

import (
	"os"
	"syscall"
)

// datasync makes f's data durable: fdatasync, which leaves out the
// timestamps a preallocated file's appends change.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// preallocate reserves size bytes for f, so that an append neither grows
// the file nor, past the first, allocates blocks. A file system without
// fallocate is no error worth failing for: the file grows as written.
func preallocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		if err != syscall.EINTR {
			return err
		}
	}
}
