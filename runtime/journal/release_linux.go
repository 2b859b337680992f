package journal

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// releasePages drops the store's pages from this process's memory: the
// kernel keeps them in its page cache while it has room, and a later read
// maps them again. The check at start reads every page of the file, and
// without this they would stay resident for as long as the process runs.
// It holds a read transaction, so that bbolt does not remap meanwhile.
func (j *DB) releasePages() {
	_ = j.db.View(func(tx *bolt.Tx) error {
		data, size := j.db.Info().Data, tx.Size()
		if data == 0 || size <= 0 {
			return nil
		}
		// The mapping starts on a page; bbolt's Info gives it as an
		// address, which madvise takes as it is.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, data, uintptr(size), syscall.MADV_DONTNEED); errno != 0 {
			return errno
		}
		return nil
	})
}
