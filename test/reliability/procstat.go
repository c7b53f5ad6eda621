package reliability

import (
	"fmt"
	"os"
	"syscall"
)

// OpenFiles counts a process's open file descriptors.
func OpenFiles(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// RaiseOpenFiles raises this process's soft limit on open files to its
// hard limit (children inherit it) and returns the new soft limit.
func RaiseOpenFiles() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

// MiB formats bytes as mebibytes with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }
