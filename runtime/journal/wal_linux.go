package journal

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
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

// directAlign is the alignment, of offset and length, that a direct
// write to f needs, as the file system reports it (statx's
// STATX_DIOALIGN, Linux 6.1 and later); 0 where f cannot be written
// directly, the kernel does not say, or a buffer aligned to memAlign
// would not do.
func directAlign(f *os.File) int64 {
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st); err != nil ||
		st.Mask&unix.STATX_DIOALIGN == 0 || st.Dio_offset_align == 0 ||
		st.Dio_mem_align > memAlign || st.Dio_offset_align > memAlign {
		return 0
	}
	return int64(st.Dio_offset_align)
}

// setDirect turns O_DIRECT on or off for f's writes.
func setDirect(f *os.File, on bool) error {
	fd := f.Fd()
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, fl)
	return err
}
