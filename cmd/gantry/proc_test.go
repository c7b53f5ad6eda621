package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary run the gantry command line it was given
// instead of the tests: a real gantry process without building one.
const childEnv = "GANTRY_CMD_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// child is a gantry command line running in a child process.
type child struct {
	cmd         *exec.Cmd
	out, errOut syncBuffer
	done        chan error // its exit, once
}

// startGantry starts a gantry command line in a child process: the test
// binary itself, running the command instead of the tests.
func startGantry(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], args...), done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.errOut
	ownChild(c.cmd)
	require.NoError(t, c.cmd.Start())
	go func() { c.done <- c.cmd.Wait() }()
	return c
}

// gantryRun runs a short gantry command line in a child process, within
// 60 s, and returns its exit code and output.
func gantryRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	c := startGantry(t, args...)
	select {
	case err := <-c.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), c.out.String(), c.errOut.String()
		}
		require.NoError(t, err)
		return 0, c.out.String(), c.errOut.String()
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("gantry %q did not finish in 60 s; stdout: %s stderr: %s", args, c.out.String(), c.errOut.String())
		return -1, "", ""
	}
}

// gantryServe starts a long-running gantry command line (namesrv, broker,
// dev) in a child process and waits until its output matches ready; it
// returns the submatches. The child gets SIGINT at the test's end and must
// exit 0 within 20 s.
func gantryServe(t *testing.T, ready *regexp.Regexp, args ...string) []string {
	t.Helper()
	c := startGantry(t, args...)
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-c.done:
			assert.NoError(t, err, "gantry %q exit; stderr: %s", args, c.errOut.String())
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
			t.Errorf("gantry %q did not stop on SIGINT; stderr: %s", args, c.errOut.String())
		}
	})
	var m []string
	require.Eventually(t, func() bool {
		select {
		case err := <-c.done:
			c.done <- err
			return true
		default:
		}
		m = ready.FindStringSubmatch(c.out.String())
		return m != nil
	}, 30*time.Second, 10*time.Millisecond, "gantry %q; stderr: %s", args, c.errOut.String())
	require.NotNil(t, m, "gantry %q exited early; stdout: %s stderr: %s", args, c.out.String(), c.errOut.String())
	return m
}
