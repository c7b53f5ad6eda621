package testutil

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// DiskBytes is the disk the regular files under root take: their
// allocated blocks, not their lengths (a sparse file takes what it holds).
func DiskBytes(tb testing.TB, root string) int64 {
	tb.Helper()
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// ProcessCPU is the CPU time (user and system) the process has used so
// far: a measure that, unlike wall time, a busy machine does not inflate.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
