//go:build !linux

package main

import "os/exec"

// ownChild: only Linux can tie a child's life to its parent's.
func ownChild(*exec.Cmd) {}

// syncDisks runs sync(1) where there is one.
func syncDisks() { _ = exec.Command("sync").Run() }

// dirtyMiB: only Linux tells (/proc/meminfo).
func dirtyMiB() int { return -1 }
