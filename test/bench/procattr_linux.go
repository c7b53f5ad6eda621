package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

// ownChild makes the child, a server, die with the benchmark, if it is
// killed, and gives it the environment the benchmark was started with
// (serverEnv).
func ownChild(cmd *exec.Cmd) {
	benchproc.OwnChild(cmd)
	cmd.Env = serverEnv()
}

// clientGODEBUG is added to GODEBUG for the benchmark's own process,
// which holds both systems' clients, not for the servers it starts: the
// runtime returns the memory its scavenger frees with MADV_FREE instead of
// MADV_DONTNEED, so that a page the kernel has not taken back is used
// again without a fault. A consumer's heap swings by its pulls' buffers,
// and with MADV_DONTNEED each swing faults the pages back in
// (docs/decisions/0016-peer-benchmark-method.md). The runtime
// reads the setting only when it starts (and //go:debug does not take
// it), so the benchmark starts itself again with it.
const clientGODEBUG = "madvdontneed=0"

// startedGODEBUG names the variable that holds, in the benchmark started
// again, the GODEBUG it was first started with, for the servers.
const startedGODEBUG = "GANTRY_PEER_BENCH_GODEBUG"

// withClientGODEBUG starts the benchmark again, in place, with
// clientGODEBUG added to GODEBUG, unless it is that second start or
// GODEBUG already says madvdontneed.
func withClientGODEBUG() error {
	gd := os.Getenv("GODEBUG")
	if _, again := os.LookupEnv(startedGODEBUG); again || strings.Contains(gd, "madvdontneed=") {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	client := clientGODEBUG
	if gd != "" {
		client = gd + "," + clientGODEBUG
	}
	env := append(withoutGODEBUG(), startedGODEBUG+"="+gd, "GODEBUG="+client)
	return syscall.Exec(exe, os.Args, env)
}

// serverEnv is the environment for the servers: the benchmark's, with the
// GODEBUG it was first started with.
func serverEnv() []string {
	gd, again := os.LookupEnv(startedGODEBUG)
	if !again {
		return nil // the benchmark's own (exec.Cmd's default)
	}
	env := withoutGODEBUG()
	if gd != "" {
		env = append(env, "GODEBUG="+gd)
	}
	return env
}

// withoutGODEBUG is the environment without GODEBUG and startedGODEBUG.
func withoutGODEBUG() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") && !strings.HasPrefix(kv, startedGODEBUG+"=") {
			env = append(env, kv)
		}
	}
	return env
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
