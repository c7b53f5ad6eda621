//go:build !linux

package main

import (
	"errors"
	"os"
)

// diskBytes: without the block count, the length.
func diskBytes(fi os.FileInfo) int64 { return fi.Size() }

func freeBytes(string) (int64, error) { return 0, errors.New("free space: Linux only") }

type procStats struct {
	vmRSS, rssAnon int64
	fds            int
}

func readProc(int) (procStats, error) { return procStats{}, errors.New("/proc: Linux only") }
