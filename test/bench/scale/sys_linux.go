package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// diskBytes is the disk a file really takes: its allocated blocks, not
// its length (a sparse file's holes take none, a preallocated file's
// unwritten extents do).
func diskBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// freeBytes is the space available to this user on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// procStats are a process's resident memory and open files.
type procStats struct {
	vmRSS, rssAnon int64 // bytes
	fds            int
}

func readProc(pid int) (procStats, error) {
	var ps procStats
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), ":")
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &ps.vmRSS
		case "RssAnon":
			dst = &ps.rssAnon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return ps, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return ps, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return ps, err
	}
	ps.fds = len(fds)
	return ps, nil
}
