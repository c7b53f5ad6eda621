package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// updateTopic -a sets a topic's limits (a bad one refused naming it), and
// topicStatus shows them with each queue's backlog, expired and dropped
// messages.
func TestAdminTopicLimits(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", c.NameServerAddr()}, args...)...)
	}

	code, out, errOut := admin("updateTopic", "-t", "Telemetry", "-r", "1", "-w", "1", "--attributes", "-retention.hours")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--attributes: "-retention.hours": want +key=value`)
	assert.Empty(t, out)
	code, _, errOut = admin("updateTopic", "-t", "Telemetry", "-r", "1", "-w", "1", "--attributes", "+queue.max.backlog=lots")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `queue.max.backlog="lots"`)
	code, _, errOut = admin("updateTopic", "-t", "Telemetry", "-r", "1", "-w", "1",
		"--attributes", "+retention.hours=24,+queue.max.backlog=3,+queue.max.policy=drop-oldest,+ttl.default.ms=60000")
	require.Equal(t, exitOK, code, errOut)

	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	require.Eventually(t, func() bool { code, _, _ := admin("topicRoute", "-t", "Telemetry"); return code == exitOK }, 5*time.Second, 10*time.Millisecond)
	for range 5 {
		_, err := p.Send(t.Context(), &client.Message{Topic: "Telemetry", Body: []byte("t")})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, out, _ = admin("topicStatus", "-t", "Telemetry")
		return regexp.MustCompile(`(?m)^broker-a\s+0\s+2\s+5\s+\S+ \S+\s+3\s+0\s+2$`).MatchString(out)
	}, 5*time.Second, 10*time.Millisecond, "min 2, max 5, backlog 3, expired 0, dropped 2:\n%s", out)
	assert.Regexp(t, `(?m)^#Broker Name\s+#QID\s+#Min Offset\s+#Max Offset\s+#Last Updated\s+#Backlog\s+#Expired\s+#Dropped$`, out)
	assert.Contains(t, out, "broker-a: retention 24h0m0s, max backlog 3 per queue (drop-oldest), default TTL 1m0s\n")
}
