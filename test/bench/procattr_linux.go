package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// ownChild makes the child die with the benchmark, if it is killed.
func ownChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// syncDisks writes every dirty page back (sync(2)).
func syncDisks() { syscall.Sync() }

// dirtyMiB reports the page cache's dirty and under-writeback memory
// (/proc/meminfo), or -1.
func dirtyMiB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	kb := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), ":")
		if name != "Dirty" && name != "Writeback" {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB")); err == nil {
			kb += n
		}
	}
	return kb >> 10
}
