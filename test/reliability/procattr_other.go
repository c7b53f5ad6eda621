//go:build !linux

package reliability

import "os/exec"

// ownChild does nothing where there is no parent-death signal.
func ownChild(*exec.Cmd) {}
