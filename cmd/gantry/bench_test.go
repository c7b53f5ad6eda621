package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// bench consume --push reads messages of the largest body the broker
// takes, and says so when its consumer cannot fetch: the failed pulls are
// counted in its summary, logged, and fail the run.
func TestBenchConsumePush(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	ns := c.NameServerAddr()
	admin, err := client.NewAdmin(t.Context(), client.Config{NameServers: []string{ns}})
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close() })
	for _, topic := range []string{"Big", "Refused"} {
		require.NoError(t, admin.CreateTopic(t.Context(), client.TopicConfig{Name: topic, ReadQueueNums: 2, WriteQueueNums: 2}))
	}

	code, out, errOut := execute(t, "bench", "produce", "-n", ns, "-t", "Big", "--count", "3", "--size", "4194304")
	require.Equal(t, exitOK, code, out+errOut)
	code, out, errOut = execute(t, "bench", "consume", "--push", "-n", ns, "-t", "Big", "-g", "big", "--count", "3")
	require.Equal(t, exitOK, code, out+errOut)
	assert.Contains(t, out, "push consume: 3 msgs")
	assert.Contains(t, out, " 0 errors")

	// A group whose consumption is disabled: the broker refuses its pulls.
	require.NoError(t, admin.CreateGroup(t.Context(), client.GroupConfig{Name: "disabled", Disabled: true}))
	code, out, errOut = execute(t, "bench", "produce", "-n", ns, "-t", "Refused", "--count", "5")
	require.Equal(t, exitOK, code, out+errOut)
	code, out, errOut = execute(t, "bench", "consume", "--push", "-n", ns, "-t", "Refused", "-g", "disabled", "--count", "5")
	assert.Equal(t, exitProblems, code, out+errOut)
	// Nothing consumed: no rate, the error says why and counts the failures.
	assert.NotContains(t, out, "push consume:")
	m := regexp.MustCompile(`gantry: (\d+) pulls failed, the last: .*group \\?"disabled\\?" has consumption disabled`).FindStringSubmatch(errOut)
	require.NotNil(t, m, errOut)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Positive(t, n, "the failed pulls are counted")
	assert.Regexp(t, `pull errors \d+ \(last: .*consumption disabled`, out, "the progress lines show them")
	assert.Contains(t, errOut, `level=WARN msg="pull failed"`)
}
