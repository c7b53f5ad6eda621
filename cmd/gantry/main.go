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

// serverGC sets the garbage collector for a long-running server process
// unless GOGC or GOMEMLIMIT say otherwise: a broker's live heap is small
// (its data is in mapped files) and its garbage is request buffers, so
// collecting at 4x the live heap instead of 2x halves GC work; a soft limit
// of 40 MiB makes the collector work harder before the heap grows past it.
func serverGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(40 << 20)
	}
}
