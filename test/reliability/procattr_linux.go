package reliability

import (
	"os/exec"
	"syscall"
)

// ownChild makes a child process die with the test process.
func ownChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
