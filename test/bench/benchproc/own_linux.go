package benchproc

import (
	"os/exec"
	"syscall"
)

// OwnChild makes cmd's process die (SIGKILL) when the thread that started
// it ends: a measuring program killed leaves no server behind.
func OwnChild(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
