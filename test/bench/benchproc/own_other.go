//go:build !linux

package benchproc

import "os/exec"

// OwnChild: only Linux can tie a child's life to its parent's.
func OwnChild(*exec.Cmd) {}
