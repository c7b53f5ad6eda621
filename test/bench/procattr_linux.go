package main

import (
	"os/exec"
	"syscall"
)

// ownChild makes the child die with the benchmark, if it is killed.
func ownChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// syncDisks writes every dirty page back (sync(2)).
func syncDisks() { syscall.Sync() }
