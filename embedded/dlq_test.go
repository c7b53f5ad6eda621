package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
)

// dlqCluster starts a cluster on clk with topic Orders (2 queues), sends
// n messages with keys key-<i> and dead-letters each for group at once,
// a minute apart on clk. It returns the send results, in order.
func dlqCluster(t *testing.T, clk *fakeClock, group string, n int) (*embedded.Cluster, client.Config, []client.SendResult) {
	t.Helper()
	pc := clockCluster(t, clk, "Orders", 2)
	c, cfg, p := pc.c, pc.cfg, pc.p
	var sent []client.SendResult
	for i := range n {
		res, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "order %d", i), Tags: "created",
			Keys: []string{fmt.Sprintf("key-%d", i)}, Properties: map[string]string{"tenant": "acme"}})
		require.NoError(t, err)
		_, phys, err := message.DecodeOffsetMsgID(res.MsgID)
		require.NoError(t, err)
		sb, err := c.Broker().SendBack(t.Context(), broker.SendBackRequest{Group: group, PhysicalOffset: phys, DelayLevel: -1, Reason: "handler gave up"})
		require.NoError(t, err)
		require.True(t, sb.DeadLettered)
		sent = append(sent, res)
		clk.Advance(time.Minute)
	}
	require.Eventually(t, func() bool {
		_, maxOff := c.Broker().QueueOffsets(broker.DLQTopic(group), 0)
		return maxOff == int64(n)
	}, 5*time.Second, time.Millisecond)
	return c, cfg, sent
}

// The dead-letter admin end to end: client.Admin over gRPC lists, shows,
// resends (to the topic and to the retry topic), exports and purges; the
// marks survive a broker restart; /metrics counts.
func TestDLQAdminEndToEnd(t *testing.T) {
	clk := newFakeClock()
	c, cfg, sent := dlqCluster(t, clk, "billing", 3)
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	defer a.Close()
	f := client.DLQFilter{Group: "billing"}

	page, err := a.DLQList(t.Context(), f, "", 2)
	require.NoError(t, err)
	require.Len(t, page.Entries, 2)
	require.NotEmpty(t, page.NextCursor)
	d := page.Entries[0]
	assert.Equal(t, "broker-a", d.BrokerName)
	assert.Equal(t, int64(0), d.Offset)
	assert.Equal(t, sent[0].UniqKey, d.UniqKey)
	assert.Equal(t, "Orders", d.OriginTopic)
	assert.Equal(t, []string{"key-0"}, d.Keys)
	assert.Equal(t, "created", d.Tags)
	assert.Equal(t, "handler gave up", d.Reason)
	assert.Equal(t, len("order 0"), d.BodySize)
	page2, err := a.DLQList(t.Context(), f, page.NextCursor, 2)
	require.NoError(t, err)
	require.Len(t, page2.Entries, 1)
	assert.Equal(t, int64(2), page2.Entries[0].Offset)
	assert.Empty(t, page2.NextCursor)

	byKey, err := a.DLQList(t.Context(), client.DLQFilter{Group: "billing", Key: "key-1"}, "", 0)
	require.NoError(t, err)
	require.Len(t, byKey.Entries, 1)
	assert.Equal(t, sent[1].UniqKey, byKey.Entries[0].UniqKey)

	m, err := a.DLQShow(t.Context(), client.DLQRef{Group: "billing", MsgID: sent[1].UniqKey})
	require.NoError(t, err)
	assert.Equal(t, "order 1", string(m.Body))
	assert.Equal(t, "acme", m.Properties["tenant"])
	require.Len(t, m.History, 2)
	assert.Contains(t, m.History[1].What, "handler gave up")
	m2, err := a.DLQShow(t.Context(), client.DLQRef{Group: "billing", Offset: 1})
	require.NoError(t, err)
	assert.Equal(t, m.MsgID, m2.MsgID)

	// Resend one to Orders, twice: it arrives with DLQ_RESENDS 1, then 2.
	pc, err := client.NewPullConsumer(t.Context(), cfg, "inspect")
	require.NoError(t, err)
	defer pc.Close(context.Background())
	one := client.DLQSelection{Filter: client.DLQFilter{Group: "billing", MsgID: sent[0].UniqKey}}
	for n := 1; n <= 2; n++ {
		res, err := a.DLQResend(t.Context(), one, false)
		require.NoError(t, err)
		require.Len(t, res.Resent, 1)
		assert.Equal(t, "Orders", res.Resent[0].Topic)
		assert.Equal(t, int32(n), res.Resent[0].Resends)
		page, err := a.DLQList(t.Context(), one.Filter, "", 0)
		require.NoError(t, err)
		assert.Equal(t, int32(n), page.Entries[0].Resends)
	}
	var resent []*client.MessageExt
	require.Eventually(t, func() bool {
		resent = resent[:0]
		for _, m := range drainAll(t, pc, "Orders") {
			if m.Property(message.PropDLQResendTimes) != "" {
				resent = append(resent, m)
			}
		}
		return len(resent) == 2
	}, 5*time.Second, 10*time.Millisecond)
	for _, m := range resent {
		assert.Equal(t, sent[0].UniqKey, m.UniqKey)
		assert.Equal(t, "order 0", string(m.Body))
		assert.Equal(t, "acme", m.Property("tenant"))
		assert.Empty(t, m.Property(message.PropDLQOriginTopic))
	}
	assert.ElementsMatch(t, []string{"1", "2"}, []string{resent[0].Property(message.PropDLQResendTimes), resent[1].Property(message.PropDLQResendTimes)})

	// All to the retry topic.
	res, err := a.DLQResend(t.Context(), client.DLQSelection{Filter: f, All: true}, true)
	require.NoError(t, err)
	assert.Len(t, res.Resent, 3)
	assert.Equal(t, "%RETRY%billing", res.Resent[1].Topic)

	// Export: JSON lines that parse back.
	var buf bytes.Buffer
	n, err := a.DLQExport(t.Context(), f, &buf)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	var recs []broker.DLQExportRecord
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var r broker.DLQExportRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		recs = append(recs, r)
	}
	require.Len(t, recs, 3)
	assert.Equal(t, "order 2", string(recs[2].Body))
	assert.Equal(t, int32(3), recs[0].Resends)

	// Purge one; the rest and the marks survive a restart.
	purged, err := a.DLQPurge(t.Context(), client.DLQSelection{Filter: client.DLQFilter{Group: "billing", MsgID: sent[2].UniqKey}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), purged)
	metrics := scrape(t, c)
	assert.Regexp(t, `gantry_dlq_messages_total\{[^}]*group="billing"[^}]*\} 3\n`, metrics)
	assert.Regexp(t, `gantry_dlq_held_messages\{[^}]*group="billing"[^}]*\} 2\n`, metrics)
	assert.Regexp(t, `gantry_dlq_resends_total\{[^}]*group="billing"[^}]*\} 5\n`, metrics)

	before, err := a.DLQList(t.Context(), f, "", 0)
	require.NoError(t, err)
	require.Len(t, before.Entries, 2)
	require.NoError(t, c.RestartBroker(t.Context()))
	require.Eventually(t, func() bool {
		after, err := a.DLQList(t.Context(), f, "", 0)
		return err == nil && assert.ObjectsAreEqual(before, after)
	}, 5*time.Second, 10*time.Millisecond, "the resend marks and the purge survive a restart")

	// Errors.
	_, err = a.DLQList(t.Context(), client.DLQFilter{Group: "nobody"}, "", 0)
	assert.ErrorIs(t, err, client.ErrNotFound)
	_, err = a.DLQList(t.Context(), client.DLQFilter{Group: "billing", Begin: clk.Now(), End: clk.Now().Add(-time.Hour)}, "", 0)
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	_, err = a.DLQResend(t.Context(), client.DLQSelection{Filter: f}, false)
	assert.ErrorIs(t, err, client.ErrInvalidArgument, "an empty selection")
	_, err = a.DLQShow(t.Context(), client.DLQRef{Group: "billing", MsgID: "nope"})
	assert.ErrorIs(t, err, client.ErrNotFound)

	// Expiry: nothing is listed once dlqRetentionHours passed.
	clk.Advance(broker.DefaultDLQRetention)
	page, err = a.DLQList(t.Context(), f, "", 0)
	require.NoError(t, err)
	assert.Empty(t, page.Entries)
}

// drainAll pulls every queue of topic from 0.
func drainAll(t *testing.T, pc *client.PullConsumer, topic string) []*client.MessageExt {
	t.Helper()
	qs, err := pc.Queues(t.Context(), topic)
	require.NoError(t, err)
	var out []*client.MessageExt
	for _, q := range qs {
		for off := int64(0); ; {
			r, err := pc.Pull(t.Context(), q, off, client.PullOptions{MaxMessages: 64})
			require.NoError(t, err)
			out = append(out, r.Messages...)
			if len(r.Messages) == 0 || r.NextOffset == off {
				break
			}
			off = r.NextOffset
		}
	}
	return out
}

// scrape returns the broker's /metrics.
func scrape(t *testing.T, c *embedded.Cluster) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+c.HTTPAddr()+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
