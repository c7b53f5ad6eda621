package compat

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRocketMQClientExample builds docs/examples/rocketmq-client (a module
// of its own, on the same official client as this suite) and runs it
// against the test's cluster: it creates its topic, sends its messages
// with the official producer and exits 0 once its push consumer has
// received every one.
func TestRocketMQClientExample(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example:", err)
	}
	e := newEnv(t)
	bin := filepath.Join(t.TempDir(), "rocketmq-client")
	build := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "docs", "examples", "rocketmq-client")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build of the example:\n%s", out)

	const topic, count = "T_example", 5
	run := exec.CommandContext(t.Context(), bin, "-n", e.ns, "-b", e.c.BrokerRemotingAddr(),
		"-t", topic, "-g", "G_example", "-count", strconv.Itoa(count), "-timeout", waitLong.String())
	out, err = run.CombinedOutput()
	require.NoError(t, err, "the example failed:\n%s", out)
	t.Logf("the example's output:\n%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("received all %d messages", count))
	e.waitDispatched(topic, count)
}
