package compat

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
)

// checkExt checks a message an official consumer got against what was
// sent and what the producer was told.
func checkExt(t *testing.T, s sent, m *primitive.MessageExt) {
	t.Helper()
	body := label(s.msg.Body)
	assert.Equal(t, len(s.msg.Body), len(m.Body), "%s: body length", body)
	assert.True(t, bytes.Equal(s.msg.Body, m.Body), "%s: body %s", body, label(m.Body))
	assert.Equal(t, s.msg.Topic, m.Topic, "%q: topic", body)
	if s.msgID != "" {
		assert.Equal(t, s.msgID, m.MsgId, "%q: msgId (UNIQ_KEY)", body)
	}
	if s.offsetMsgID != "" {
		assert.Equal(t, s.offsetMsgID, m.OffsetMsgId, "%q: offsetMsgId", body)
	}
	if s.queue >= 0 {
		assert.Equal(t, s.queue, m.Queue.QueueId, "%q: queue", body)
		assert.Equal(t, s.queueOffset, m.QueueOffset, "%q: queue offset", body)
	}
	assert.Equal(t, s.msg.GetTags(), m.GetTags(), "%q: tags", body)
	assert.Equal(t, s.msg.GetKeys(), m.GetKeys(), "%q: keys", body)
	assert.Equal(t, userProps(s.msg.GetProperties()), userProps(m.GetProperties()), "%q: user properties", body)
}

// byQueue groups sent messages by queue, in offset order.
func byQueue(ss []sent) map[int][]sent {
	out := map[int][]sent{}
	for _, s := range ss {
		out[s.queue] = append(out[s.queue], s)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b sent) int { return cmp.Compare(a.queueOffset, b.queueOffset) })
	}
	return out
}

// TestPullConsumer reads with the official pull consumer: PullFrom at
// given offsets (with and without a tag filter, and past the end), and
// Pull from the group's offsets, committing them with UpdateOffset and
// PersistOffset, which Gantry's admin then reports.
func TestPullConsumer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *broker.Config) { c.LongPollingMaxHold = time.Second })
	const topic, n = "T_pull", 40
	e.createTopic(topic, 4)
	p := e.producer()
	var msgs []*primitive.Message
	for i := range n {
		msgs = append(msgs, testMessage(topic, "pull", i))
	}
	res := sendAll(t, p, msgs)
	e.waitDispatched(topic, n)
	queues := byQueue(res)

	t.Run("PullFrom", func(t *testing.T) {
		e := e.in(t)
		c := e.pullConsumer("G_pullfrom", topic, all)
		mqs, err := c.GetTopicRouteInfo(topic)
		require.NoError(t, err)
		require.Len(t, mqs, 4, "queues of %s", topic)
		for _, mq := range mqs {
			want := queues[mq.QueueId]
			r, err := c.PullFrom(t.Context(), mq, 0, 64)
			require.NoError(t, err)
			require.Equal(t, primitive.PullFound, r.Status, "queue %d", mq.QueueId)
			got := r.GetMessageExts()
			require.Len(t, got, len(want), "queue %d", mq.QueueId)
			for i := range got {
				checkExt(t, want[i], got[i])
			}
			assert.Equal(t, int64(len(want)), r.NextBeginOffset, "queue %d: next begin offset", mq.QueueId)
			assert.Equal(t, int64(0), r.MinOffset, "queue %d: min offset", mq.QueueId)
			assert.Equal(t, int64(len(want)), r.MaxOffset, "queue %d: max offset", mq.QueueId)

			// From the middle, two messages.
			r, err = c.PullFrom(t.Context(), mq, 1, 2)
			require.NoError(t, err)
			require.Equal(t, primitive.PullFound, r.Status)
			require.Len(t, r.GetMessageExts(), 2)
			checkExt(t, want[1], r.GetMessageExts()[0])
			checkExt(t, want[2], r.GetMessageExts()[1])
			assert.Equal(t, int64(3), r.NextBeginOffset)

			// Past the end: the offset is illegal, and the broker says
			// where the queue ends.
			r, err = c.PullFrom(t.Context(), mq, int64(len(want))+5, 8)
			require.NoError(t, err)
			assert.Equal(t, primitive.PullOffsetIllegal, r.Status, "queue %d: pull past the end", mq.QueueId)
			assert.Equal(t, int64(len(want)), r.NextBeginOffset, "queue %d: next begin offset past the end", mq.QueueId)
		}
		t.Logf("PullFrom: %d queues read, %d messages; offsets, ids, tags, keys and properties as sent", len(mqs), n)
	})

	t.Run("PullFromTagFilter", func(t *testing.T) {
		e := e.in(t)
		c := e.pullConsumer("G_pulltag", topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagB"})
		mqs, err := c.GetTopicRouteInfo(topic)
		require.NoError(t, err)
		total := 0
		for _, mq := range mqs {
			var want []sent
			for _, s := range queues[mq.QueueId] {
				if s.msg.GetTags() == "TagB" {
					want = append(want, s)
				}
			}
			r, err := c.PullFrom(t.Context(), mq, 0, 64)
			require.NoError(t, err)
			got := r.GetMessageExts()
			require.Len(t, got, len(want), "queue %d: TagB messages (status %v)", mq.QueueId, r.Status)
			for i := range got {
				checkExt(t, want[i], got[i])
			}
			total += len(got)
		}
		t.Logf("PullFrom with TagB: %d of %d messages", total, n)
	})

	t.Run("Pull", func(t *testing.T) {
		e := e.in(t)
		const group = "G_pull"
		c := e.pullConsumer(group, topic, all)
		next := map[primitive.MessageQueue]int64{}
		bySent := map[string]sent{}
		for _, s := range res {
			bySent[string(s.msg.Body)] = s
		}
		seen := map[string]int{}
		pulls, dups := 0, 0
		deadline := time.Now().Add(waitShort)
		for len(seen) < n {
			require.True(t, time.Now().Before(deadline), "Pull read %d of %d messages in %d pulls", len(seen), n, pulls)
			r, err := c.Pull(t.Context(), 16)
			require.NoError(t, err)
			pulls++
			ms := r.GetMessageExts()
			if r.Status != primitive.PullFound || len(ms) == 0 {
				continue
			}
			for _, m := range ms {
				s, ok := bySent[string(m.Body)]
				require.True(t, ok, "unknown message %q", m.Body)
				checkExt(t, s, m)
				if seen[string(m.Body)]++; seen[string(m.Body)] > 1 {
					dups++
				}
			}
			next[*ms[0].Queue] = r.NextBeginOffset
			require.NoError(t, c.UpdateOffset(ms[0].Queue, r.NextBeginOffset))
			require.NoError(t, c.PersistOffset(t.Context(), topic))
		}
		t.Logf("Pull: %d messages in %d pulls, %d read twice", n, pulls, dups)
		// PersistOffset sends the offsets of the queues the consumer's own
		// rebalance assigned it and drops the others from its table
		// (remoteBrokerOffsetStore.persist); until that rebalance, which
		// Start runs in the background, has run, offsets set with
		// UpdateOffset are lost. Set and persist them until the broker has
		// them all.
		eventually(t, waitShort, "offsets committed by PersistOffset", func() (bool, string) {
			for mq, off := range next {
				require.NoError(t, c.UpdateOffset(&mq, off))
			}
			require.NoError(t, c.PersistOffset(t.Context(), topic))
			ps, err := e.admin.ConsumerProgress(t.Context(), group, topic)
			if err != nil {
				return false, err.Error()
			}
			done := len(ps) == len(next)
			for _, p := range ps {
				done = done && p.ConsumerOffset == next[primitive.MessageQueue{Topic: topic, BrokerName: p.Queue.BrokerName, QueueId: int(p.Queue.ID)}]
			}
			return done, fmt.Sprint(ps)
		})
		e.waitCommitted(group, topic)
	})
}

// TestConsumeFromTimestamp cuts a topic at a second boundary between two
// batches of messages. SEARCH_OFFSET_BY_TIMESTAMP, sent by the official
// pull consumer's OffsetForTimestamp, finds the cut in every queue: it is
// the call (the same client function, the same header) an official push
// consumer with CONSUME_FROM_TIMESTAMP makes for a queue its group has no
// offset in. A new group's push consumer with CONSUME_FROM_TIMESTAMP then
// reads this young topic from its first message, before the cut, as it
// would from a Java broker: QUERY_CONSUMER_OFFSET answers offset 0, not
// "none", for a queue never trimmed whose first message is recent
// (remotingapi.Config.YoungQueueBytes, 1 GiB),
// and the client searches by time only after "none".
func TestConsumeFromTimestamp(t *testing.T) {
	t.Parallel()
	t.Run("young queue", func(t *testing.T) { consumeFromTimestamp(t, true) })
	t.Run("searched", func(t *testing.T) { consumeFromTimestamp(t, false) })
}

// consumeFromTimestamp sends n messages, cuts at the next second, sends n
// more, and starts a new group's push consumer from the cut. With young,
// the broker answers a new group's offset query with 0 on a young queue,
// as a Java broker does, and the consumer reads everything; without, it
// answers QUERY_NOT_FOUND, the consumer searches the queues by time and
// reads only what came after the cut.
func consumeFromTimestamp(t *testing.T, young bool) {
	var e *env
	if young {
		e = newEnv(t)
	} else {
		e = newEnvWith(t, func(rc *remotingapi.Config) { rc.YoungQueueBytes = -1 })
	}
	const topic, group, n = "T_timestamp", "G_timestamp", 20
	e.createTopic(topic, 4)
	p := e.producer()
	mk := func(prefix string) []*primitive.Message {
		var out []*primitive.Message
		for i := range n {
			out = append(out, primitive.NewMessage(topic, fmt.Appendf(nil, "%s-%d", prefix, i)))
		}
		return out
	}
	before := sendAll(t, p, mk("before"))
	// The client's timestamp has a precision of one second (yyyyMMddHHmmss,
	// read as UTC): cut at the next second.
	cut := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(cut) + 20*time.Millisecond)
	after := sendAll(t, p, mk("after"))
	e.waitDispatched(topic, 2*n)

	pc := e.pullConsumer("G_timestamp_pull", topic, all)
	mqs, err := pc.GetTopicRouteInfo(topic)
	require.NoError(t, err)
	beforeIn := map[int]int64{}
	for _, s := range before {
		beforeIn[s.queue]++
	}
	found := map[int]int64{}
	for _, mq := range mqs {
		off, err := pc.OffsetForTimestamp(mq, cut.UnixMilli())
		require.NoError(t, err)
		found[mq.QueueId] = off
		assert.Equal(t, beforeIn[mq.QueueId], off, "queue %d: offset for %s", mq.QueueId, cut.Format(time.RFC3339))
	}
	t.Logf("cut at %s: SEARCH_OFFSET_BY_TIMESTAMP found offsets %v (messages before the cut per queue %v)",
		cut.UTC().Format("20060102150405"), found, beforeIn)
	rec := newRecorder()
	e.pushConsumer(group, topic, all, rec.handler("A"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromTimestamp),
		consumer.WithConsumeTimestamp(cut.UTC().Format("20060102150405")))
	if young {
		everything := append(bodiesOf(msgsOf(before)), bodiesOf(msgsOf(after))...)
		rec.waitBodies(t, everything, waitShort)
		dups, _ := rec.duplicates(everything)
		t.Logf("a new group's push consumer from %s on a young topic consumed all %d messages (the %d before the cut too), %d duplicates",
			cut.UTC().Format("20060102150405"), len(everything), n, dups)
		assert.Zero(t, dups, "duplicates")
		return
	}
	want := bodiesOf(msgsOf(after))
	rec.waitBodies(t, want, waitShort)
	time.Sleep(500 * time.Millisecond) // room for anything from before the cut to show up
	dups, _ := rec.duplicates(want)
	for _, b := range bodiesOf(msgsOf(before)) {
		assert.Empty(t, rec.deliveries(b), "%s was sent before the cut", b)
	}
	t.Logf("a new group's push consumer from %s consumed the %d messages after the cut and none of the %d before, %d duplicates",
		cut.UTC().Format("20060102150405"), len(want), n, dups)
	assert.Zero(t, dups, "duplicates")
}

func msgsOf(ss []sent) []*primitive.Message {
	out := make([]*primitive.Message, len(ss))
	for i, s := range ss {
		out[i] = s.msg
	}
	return out
}
