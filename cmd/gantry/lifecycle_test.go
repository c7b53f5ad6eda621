package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// deleteSubGroup removes a group's config; with -r its offsets and its
// retry and dead-letter topics too; again it succeeds (nothing left).
func TestAdminDeleteSubGroup(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", c.NameServerAddr()}, args...)...)
	}
	code, _, errOut := admin("updateTopic", "-t", "Orders", "-r", "1", "-w", "1")
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = admin("updateSubGroup", "-g", "billing")
	require.Equal(t, exitOK, code, errOut)
	b := c.Broker()
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	require.Eventually(t, func() bool { code, _, _ := admin("topicRoute", "-t", "Orders"); return code == exitOK }, 5*time.Second, 10*time.Millisecond)
	res, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("order 1")})
	require.NoError(t, err)
	require.NoError(t, b.CommitOffset("billing", "Orders", 0, 1))
	m, err := b.MessageByOffsetID(res.MsgID)
	require.NoError(t, err)
	_, err = b.SendBack(t.Context(), broker.SendBackRequest{Group: "billing", PhysicalOffset: m.PhysicalOffset, DelayLevel: -1})
	require.NoError(t, err)
	dlq := broker.DLQTopic("billing")

	code, out, errOut := admin("deleteSubGroup", "-g", "billing")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "delete subscription group billing success\n", out)
	_, ok := b.Group("billing")
	assert.False(t, ok)
	_, ok = b.QueryOffset("billing", "Orders", 0)
	assert.True(t, ok, "without -r the offsets stay")
	_, ok = b.Topic(dlq)
	assert.True(t, ok, "without -r the dead-letter topic stays")

	code, out, errOut = admin("deleteSubGroup", "-g", "billing", "-r")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "delete subscription group billing success, with its offsets, %RETRY%billing and %DLQ%billing\n", out)
	_, ok = b.QueryOffset("billing", "Orders", 0)
	assert.False(t, ok)
	_, ok = b.Topic(dlq)
	assert.False(t, ok)
	_, maxOff := b.QueueOffsets(dlq, 0)
	assert.Zero(t, maxOff, "its dead letters go")

	code, _, errOut = admin("deleteSubGroup", "-g", "billing", "-r")
	assert.Equal(t, exitOK, code, "idempotent: %s", errOut)
	code, _, errOut = admin("deleteSubGroup")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"groupName"`)
}
