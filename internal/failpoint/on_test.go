//go:build failpoint

package failpoint

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInjectActions(t *testing.T) {
	require.True(t, Enabled)
	const name = "test/error"
	require.NoError(t, Enable(name, "2*error(disk on fire)@2"))
	defer Disable(name)
	var errs []error
	for range 5 {
		errs = append(errs, Inject(name))
	}
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], ErrInjected)
	assert.ErrorContains(t, errs[2], "disk on fire")
	assert.NoError(t, errs[3])
	assert.NoError(t, errs[4])
	assert.Equal(t, int64(5), Hits(name))

	require.NoError(t, Enable("test/sleep", "sleep(30ms)"))
	defer Disable("test/sleep")
	start := time.Now()
	assert.NoError(t, Inject("test/sleep"))
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)

	require.NoError(t, Enable("test/panic", "panic(boom)"))
	defer Disable("test/panic")
	assert.PanicsWithValue(t, "failpoint test/panic: boom", func() { _ = Inject("test/panic") })

	assert.NoError(t, Inject("test/unarmed"))
	assert.Equal(t, int64(1), Hits("test/unarmed"))
	Disable(name)
	assert.NoError(t, Inject(name))
}

// The kill action kills the process at the point: a child armed through
// the environment dies by SIGKILL at its third evaluation.
func TestKillFromEnvironment(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		for i := 1; i <= 5; i++ {
			_ = Inject("test/kill")
			os.Stdout.WriteString("survived\n")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillFromEnvironment$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", EnvVar+"=test/kill=kill@3")
	out, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "status %v", ws)
	assert.Equal(t, "survived\nsurvived\n", string(out))

	cmd = exec.Command(os.Args[0], "-test.run=^TestKillFromEnvironment$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", EnvVar+"=test/kill=explode")
	err = cmd.Run()
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())
}
