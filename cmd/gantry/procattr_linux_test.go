package main

import (
	"os/exec"
	"syscall"
)

// ownChild makes a child process die with the test process: a test
// binary killed by -timeout leaves no nameserver or broker holding ports.
func ownChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
