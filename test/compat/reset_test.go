package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// committedSum is the sum of group's committed offsets of topic, as
// Gantry's admin reports them.
func (e *env) committedSum(group, topic string) int64 {
	e.t.Helper()
	ps, err := e.admin.ConsumerProgress(context.Background(), group, topic)
	require.NoError(e.t, err)
	var sum int64
	for _, p := range ps {
		sum += p.ConsumerOffset
	}
	return sum
}

// A reset of a group's offsets by time while the official push consumer
// runs: the broker sends it RESET_CONSUMER_CLIENT_OFFSET, and it reads its
// queues again from the new offsets (the second half of the messages, not
// the first). The reset holds meanwhile: the client pauses 10 s and, as it
// does every 5 s, commits the offsets it had before, which the broker
// ignores until the group pulls from the reset ones.
func TestPushConsumerFollowsOffsetReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic, group = "T_reset", "G_reset"
	e.createTopic(topic, 4)
	p := e.producer()
	msgs := make([]*primitive.Message, 20)
	for i := range msgs {
		msgs[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "m-%d", i))
	}
	sendAll(t, p, msgs[:10])
	e.waitDispatched(topic, 10)
	first := time.Now().UnixMilli() // every m-0..m-9 was stored by now
	for time.Now().UnixMilli() <= first {
		time.Sleep(time.Millisecond)
	}
	mid := time.Now()
	sendAll(t, p, msgs[10:])
	e.waitDispatched(topic, 20)

	rec := newRecorder()
	e.pushConsumer(group, topic, all, rec.handler("A"))
	rec.waitBodies(t, bodiesOf(msgs), waitShort)
	e.waitCommitted(group, topic)

	offs, err := e.admin.ResetOffsetByTime(t.Context(), group, topic, mid)
	require.NoError(t, err)
	var sum int64
	for _, off := range offs {
		sum += off
	}
	require.Equal(t, int64(10), sum, "the middle: %v", offs)
	reset := time.Now()
	// Until the consumer reads again, the committed offsets stay the reset
	// ones, whatever it commits meanwhile.
	reread := func() bool { return len(rec.deliveries("m-10")) > 1 }
	for !reread() {
		require.Equal(t, int64(10), e.committedSum(group, topic), "the reset holds (%s after it)", time.Since(reset).Round(time.Millisecond))
		require.Less(t, time.Since(reset), waitLong, "the consumer did not read m-10 again")
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the official consumer read m-10 again %s after the reset", time.Since(reset).Round(time.Millisecond))
	eventually(t, waitLong, "m-10..m-19 delivered again", func() (bool, string) {
		var missing []string
		for _, m := range msgs[10:] {
			if len(rec.deliveries(string(m.Body))) < 2 {
				missing = append(missing, string(m.Body))
			}
		}
		return len(missing) == 0, fmt.Sprint("not again: ", missing)
	})
	for _, m := range msgs[:10] {
		assert.Len(t, rec.deliveries(string(m.Body)), 1, "%s is before the reset time: not read again", m.Body)
	}
	e.waitCommitted(group, topic)
}
