package compat

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/testutil"
)

// The official client against a topic's limits: a message sent with the
// TTL_MS property reaches no push consumer once expired, and a send to a
// full queue of a refusing topic fails at once (SYSTEM_BUSY, not retried)
// naming the limit.
func TestOfficialClientLimits(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	e := newEnv(t, func(bc *broker.Config) { bc.Now = clock.Now })
	ctx := t.Context()
	for _, tc := range []client.TopicConfig{
		{Name: "Alarms", ReadQueueNums: 1, WriteQueueNums: 1},
		{Name: "Commands", ReadQueueNums: 1, WriteQueueNums: 1,
			Attributes: map[string]string{broker.AttrMaxBacklog: "2", broker.AttrBacklogPolicy: broker.PolicyRefuse}},
	} {
		require.NoError(t, e.admin.CreateTopic(ctx, tc))
		require.Eventually(t, func() bool { _, err := e.admin.Route(ctx, tc.Name); return err == nil }, waitShort, tick)
	}
	p := e.producer()

	for i, ttl := range []string{"1000", "", "1000", ""} {
		m := primitive.NewMessage("Alarms", []byte{byte('a' + i)})
		if ttl != "" {
			m.WithProperty(broker.PropTTL, ttl)
		}
		r, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, r.Status)
	}
	e.waitDispatched("Alarms", 4)
	clock.Advance(2 * time.Second)
	var mu sync.Mutex
	var got []string
	e.pushConsumer("CG_alarms", "Alarms", all, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	})
	e.waitCommitted("CG_alarms", "Alarms")
	mu.Lock()
	slices.Sort(got)
	assert.Equal(t, []string{"b", "d"}, got, "the expired messages were never delivered")
	mu.Unlock()
	st, err := e.admin.TopicStatus(ctx, "Alarms")
	require.NoError(t, err)
	assert.Equal(t, int64(2), st[0].Limits.Expired)

	for _, body := range []string{"1", "2"} {
		_, err := p.SendSync(ctx, primitive.NewMessage("Commands", []byte(body)))
		require.NoError(t, err)
	}
	_, err = p.SendSync(ctx, primitive.NewMessage("Commands", []byte("3")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CODE: 2,")
	assert.Contains(t, err.Error(), "queue.max.backlog=2")
	e.waitDispatched("Commands", 2)
}
