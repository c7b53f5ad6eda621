//go:build !linux

package main

import "os/exec"

// ownChild: only Linux can tie a child's life to its parent's.
func ownChild(*exec.Cmd) {}

// withClientGODEBUG: the setting it adds on Linux (procattr_linux.go) is
// Linux's.
func withClientGODEBUG() error { return nil }

// syncDisks runs sync(1) where there is one.
func syncDisks() { _ = exec.Command("sync").Run() }

// dirtyMiB: only Linux tells (/proc/meminfo).
func dirtyMiB() int { return -1 }
