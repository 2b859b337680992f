// Package cardtest puts a test's files on a card that can be counted: an
// ext4 file system (noatime, as Raspberry Pi OS mounts its root) on a loop
// device, whose counters give every byte and cache flush written to it,
// ext4's own journal included: what would reach an SD card. It is for
// tests and benchmarks only.
package cardtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FS is a mounted card, or a plain directory where one cannot be made.
type FS struct {
	// Dir is where files go.
	Dir string
	dev string // "loop0"; empty for a plain directory
	// Why says why Dir is a plain directory, when it is.
	Why string
}

// Counted reports whether the device's counters are read.
func (f *FS) Counted() bool { return f.dev != "" }

// Mount makes a 512 MiB ext4 on a loop device and mounts it for the test,
// unless the process is not root or lacks mkfs.ext4, losetup or mount:
// then Dir is a plain temporary directory and Why says why.
func Mount(tb testing.TB) *FS {
	tb.Helper()
	tmp := tb.TempDir()
	return mount(tb, tmp, filepath.Join(tmp, "card"))
}

// MountAt is Mount on a new directory dir, so that what is written below
// it is counted apart from what is written beside it. Where no card can
// be made, dir is a plain directory.
func MountAt(tb testing.TB, dir string) *FS {
	tb.Helper()
	return mount(tb, tb.TempDir(), dir)
}

func mount(tb testing.TB, tmp, mnt string) *FS {
	tb.Helper()
	if err := os.Mkdir(mnt, 0o700); err != nil {
		tb.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return &FS{Dir: mnt, Why: "not root: no device counts"}
	}
	img := filepath.Join(tmp, "card.img")
	run := func(name string, args ...string) (string, error) {
		out, err := exec.Command(name, args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(512 << 20)
		f.Close()
	}
	if err != nil {
		tb.Fatalf("making the card's image: %v", err)
	}
	if out, err := run("mkfs.ext4", "-q", "-F", img); err != nil {
		return &FS{Dir: mnt, Why: "no mkfs.ext4: " + out}
	}
	dev, err := run("losetup", "-f", "--show", img)
	if err != nil {
		return &FS{Dir: mnt, Why: "no loop device: " + dev}
	}
	if out, err := run("mount", "-o", "noatime", dev, mnt); err != nil {
		_, _ = run("losetup", "-d", dev)
		return &FS{Dir: mnt, Why: "cannot mount: " + out}
	}
	tb.Cleanup(func() {
		_, _ = run("umount", "--lazy", mnt)
		_, _ = run("losetup", "-d", dev)
	})
	return &FS{Dir: mnt, dev: filepath.Base(dev)}
}

// Stat is what the card has been written: bytes and cache flushes.
type Stat struct{ Bytes, Flushes int64 }

// Sub returns s - o.
func (s Stat) Sub(o Stat) Stat { return Stat{s.Bytes - o.Bytes, s.Flushes - o.Flushes} }

// Stat writes back what the page cache holds of the card, so that the
// counts are whole, and reads the device's counters. It is zero for a
// plain directory.
func (f *FS) Stat(tb testing.TB) Stat {
	tb.Helper()
	if f.dev == "" {
		return Stat{}
	}
	_ = exec.Command("sync", "-f", f.Dir).Run()
	raw, err := os.ReadFile("/sys/block/" + f.dev + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	fields := strings.Fields(string(raw))
	num := func(i int) int64 {
		if i >= len(fields) {
			return 0
		}
		n, _ := strconv.ParseInt(fields[i], 10, 64)
		return n
	}
	// Field 7 is sectors written; field 16, where the kernel has it,
	// flush requests.
	return Stat{Bytes: num(6) * 512, Flushes: num(15)}
}
