// Command gantry is the Gantry message broker's single binary: one
// subcommand per role or tool (see root.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/gantrymq/gantry/internal/memlimit"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit codes.
const (
	exitOK       = 0
	exitProblems = 1 // the command ran and found problems
	exitUsage    = 2 // bad usage, or the command could not run
)

// exitError carries a subcommand's exit code. A nil err means the
// subcommand has already said what went wrong.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// run executes the command line args (without the program name) and
// returns the exit code. SIGINT and SIGTERM cancel the command's context.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "gantry:", ee.err)
		}
		return ee.code
	}
	// cobra's usage errors: unknown command or flag, wrong arguments.
	fmt.Fprintf(stderr, "gantry: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return exitUsage
}

// serverGC sets the garbage collector for a long-running server process:
// a broker's live heap is small (its data is in mapped files) and its
// garbage is request buffers, so collecting at 4x the live heap instead of
// 2x (GOGC=400, unless GOGC is set) halves GC work. The soft memory limit
// is a backstop against running out of memory, not a throttle: limit as
// broker.Config.MemoryLimit says (0: half the machine's or cgroup's
// memory, memlimit.Off: none), unless GOMEMLIMIT is set, which the runtime
// has applied already. A limit below the live heap keeps the collector
// running without pause (docs/decisions/0005-memory-limit-sized-from-machine.md). It returns a note
// of the limit for the log.
func serverGC(limit int64) string {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v
	}
	note := memlimit.Format(limit) + " (memoryLimit)"
	switch limit {
	case memlimit.Off:
		return "off (memoryLimit=off)"
	case 0:
		var err error
		if limit, note, err = memlimit.Default(os.DirFS("/")); err != nil {
			return fmt.Sprintf("off: the machine's memory is unknown: %v", err)
		}
		note = memlimit.Format(limit) + ", " + note
	}
	debug.SetMemoryLimit(limit)
	return note
}

// clientGC sets the garbage collector for `gantry bench`, a load
// generator: GOGC=400 and a soft limit of 40 MiB, or four times the bodies
// in flight when more, unless GOGC or GOMEMLIMIT say otherwise. Its heap
// churns through pull and send buffers; one that stays small reuses its
// memory, where one that swings touches memory the VM gave back to its
// host (docs/decisions/0005-memory-limit-sized-from-machine.md); the limit
// grows with the load so that it never throttles a larger one.
func clientGC(inflight, size int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(benchMemoryLimit(inflight, size))
	}
}

// benchMemoryLimit is the load generator's soft memory limit: 40 MiB, or
// four times the bodies in flight when more.
func benchMemoryLimit(inflight, size int) int64 {
	return max(40<<20, 4*int64(max(inflight, 0))*int64(max(size, 0)))
}
