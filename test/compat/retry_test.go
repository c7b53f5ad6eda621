package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// TestRetryThenDLQ has an official push consumer (MaxReconsumeTimes 2)
// answer ConsumeRetryLater for one message every time: the message comes
// back through %RETRY%<group> after the retry ladder's delays (levels 3
// and 4: 1 s, then 2 s, in this suite), with its id, topic, body and keys,
// twice, and is then dead-lettered to %DLQ%<group>, where Gantry's admin
// lists it. The other messages are consumed once.
func TestRetryThenDLQ(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic, group, maxReconsume = "T_retry", "G_retry", 2
	e.createTopic(topic, 2)
	// The official client learns a topic's route when it starts and then
	// every 30 s; a Java-like broker creates %RETRY%<group> at the group's
	// first heartbeat, just after the route query of Start, so retries
	// would only flow after the next refresh. Create it first, as an
	// operator would, to keep the ladder's timing measurable.
	e.createTopic("%RETRY%"+group, 1)

	p := e.producer()
	poison := primitive.NewMessage(topic, []byte("poison-body"))
	poison.WithTag("TagP")
	poison.WithKeys([]string{"poison"})
	poison.WithProperty("kind", "poison")
	msgs := []*primitive.Message{poison}
	for i := range 4 {
		msgs = append(msgs, primitive.NewMessage(topic, fmt.Appendf(nil, "ok-%d", i)))
	}

	var mu sync.Mutex
	var attempts []delivery
	rec := newRecorder()
	ok := rec.handler("A")
	handler := func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range ms {
			if string(m.Body) == "poison-body" {
				mu.Lock()
				attempts = append(attempts, delivery{member: "A", at: time.Now(), msg: m})
				mu.Unlock()
				return consumer.ConsumeRetryLater, nil
			}
		}
		return ok(ctx, ms...)
	}
	e.pushConsumer(group, topic, all, handler, consumer.WithMaxReconsumeTimes(maxReconsume))
	e.waitMembers(group, 1)
	res := sendAll(t, p, msgs)
	poisonID := res[0].msgID

	// The dead letter appears after the third failure.
	var dead []client.DeadLetter
	eventually(t, waitShort, "dead letter of "+group, func() (bool, string) {
		page, err := e.admin.DLQList(context.Background(), client.DLQFilter{Group: group}, "", 10)
		if err != nil {
			return false, err.Error()
		}
		dead = page.Entries
		mu.Lock()
		defer mu.Unlock()
		return len(dead) > 0, fmt.Sprintf("%d deliveries of the poison message, dlq %v", len(attempts), page.Entries)
	})
	// No further delivery: wait longer than the next level would take.
	time.Sleep(shortDelayLevels[2+maxReconsume] + time.Second)

	rec.waitBodies(t, bodiesOf(msgs[1:]), waitShort)
	dups, _ := rec.duplicates(bodiesOf(msgs[1:]))
	assert.Zero(t, dups, "the other messages are consumed once")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, maxReconsume+1, "deliveries of the failing message: the first and %d retries", maxReconsume)
	for i, a := range attempts {
		m := a.msg
		assert.Equal(t, int32(i), m.ReconsumeTimes, "delivery %d: reconsume times", i)
		assert.Equal(t, topic, m.Topic, "delivery %d: topic (the client restores it from RETRY_TOPIC)", i)
		assert.Equal(t, poisonID, m.MsgId, "delivery %d: the message keeps its id", i)
		assert.Equal(t, "poison-body", string(m.Body), "delivery %d: body", i)
		assert.Equal(t, "poison", m.GetKeys(), "delivery %d: keys", i)
		assert.Equal(t, "TagP", m.GetTags(), "delivery %d: tags", i)
		assert.Equal(t, "poison", m.GetProperty("kind"), "delivery %d: user property", i)
		if i == 0 {
			continue
		}
		gap := a.at.Sub(attempts[i-1].at)
		level := 3 + i - 1 // 3 + the reconsume times of the failed delivery
		want := shortDelayLevels[level-1]
		t.Logf("retry %d (%s, queue %d of %s): %s after the previous delivery; delay level %d is %s",
			i, m.MsgId, m.Queue.QueueId, m.Queue.Topic, gap.Round(time.Millisecond), level, want)
		assert.GreaterOrEqual(t, gap, want-50*time.Millisecond, "retry %d came before its delay level %d (%s)", i, level, want)
		assert.Less(t, gap, want+5*time.Second, "retry %d came long after its delay level %d (%s)", i, level, want)
	}

	require.Len(t, dead, 1, "dead letters of %s", group)
	d := dead[0]
	t.Logf("dead letter: offset %d of %%DLQ%%%s, id %s, origin %s %s, reconsume times %d, reason %q",
		d.Offset, group, d.UniqKey, d.OriginTopic, d.OriginMsgID, d.ReconsumeTimes, d.Reason)
	assert.Equal(t, topic, d.OriginTopic, "dead letter's origin topic")
	assert.Equal(t, poisonID, d.UniqKey, "dead letter's id")
	assert.Equal(t, []string{"poison"}, d.Keys, "dead letter's keys")
	assert.Equal(t, "TagP", d.Tags, "dead letter's tags")
	full, err := e.admin.DLQShow(t.Context(), client.DLQRef{Group: group, MsgID: poisonID})
	require.NoError(t, err)
	assert.Equal(t, "poison-body", string(full.Body), "dead letter's body")
	assert.Equal(t, "poison", full.Properties["kind"], "dead letter's user property")
}
