package compat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// orderTracker checks orderly consumption as it happens: no queue is in
// two handler calls at once, and each sharding key's messages are first
// seen in the order they were sent.
type orderTracker struct {
	mu         sync.Mutex
	inHandler  map[int]string // queue -> member now handling it
	overlaps   []string
	nextSeq    map[string]int // key -> next sequence number expected
	outOfOrder []string
	seen       map[string]bool // bodies
	members    map[int]map[string]int
	redelivers int
}

func newOrderTracker() *orderTracker {
	return &orderTracker{inHandler: map[int]string{}, nextSeq: map[string]int{}, seen: map[string]bool{}, members: map[int]map[string]int{}}
}

func (o *orderTracker) handler(member string) handlerFunc {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		q := msgs[0].Queue.QueueId
		o.mu.Lock()
		if other, busy := o.inHandler[q]; busy {
			o.overlaps = append(o.overlaps, fmt.Sprintf("queue %d: %s entered while %s was handling it", q, member, other))
		}
		o.inHandler[q] = member
		o.mu.Unlock()

		time.Sleep(time.Millisecond) // widen the window an overlap would show in

		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.inHandler, q)
		for _, m := range msgs {
			key, seqStr, _ := strings.Cut(string(m.Body), "/")
			seq, _ := strconv.Atoi(seqStr)
			if o.members[q] == nil {
				o.members[q] = map[string]int{}
			}
			o.members[q][member]++
			if o.seen[string(m.Body)] {
				o.redelivers++
				continue
			}
			o.seen[string(m.Body)] = true
			if want := o.nextSeq[key]; seq != want {
				o.outOfOrder = append(o.outOfOrder, fmt.Sprintf("key %s: got %d, want %d (queue %d, member %s)", key, seq, want, q, member))
			}
			o.nextSeq[key] = seq + 1
		}
		return consumer.ConsumeSuccess, nil
	}
}

// halves returns an allocation strategy that gives the first member queue
// ids 0 and 1 of every topic and the second the others, and one that
// claims every queue.
func halves(first bool) consumer.AllocateStrategy {
	return func(_, _ string, mqAll []*primitive.MessageQueue, _ []string) []*primitive.MessageQueue {
		var out []*primitive.MessageQueue
		for _, mq := range mqAll {
			if (mq.QueueId < 2) == first {
				out = append(out, mq)
			}
		}
		return out
	}
}

func everyQueue(_, _ string, mqAll []*primitive.MessageQueue, _ []string) []*primitive.MessageQueue {
	return mqAll
}

// TestOrderly sends 8 sharding keys × 25 messages, each key to one queue
// (the official hash selector), and consumes them with two orderly official
// push consumers, A and B, each locking its queues (LOCK_BATCH_MQ) before
// consuming them, and a third, C, that claims every queue: each key's
// messages are handled in the order sent, no queue by two members at
// once, and none by C, whose locks the broker refuses while A and B hold
// theirs.
//
// A and B split the queues by a fixed allocation rather than the default
// AllocateByAveragely: the official client does not unlock the queues a
// rebalance takes from it (removeUnnecessaryMessageQueue, "TODO orderly"),
// so a member joining after another has locked every queue waits for the
// broker's lock expiry (60 s) and its next 20 s rebalance tick before it
// can consume its share, as it would with a Java broker.
func TestOrderly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic, group, keys, perKey = "T_orderly", "G_orderly", 8, 25
	e.createTopic(topic, 4)
	p := e.producer(producer.WithQueueSelector(producer.NewHashQueueSelector()))

	o := newOrderTracker()
	e.pushConsumer(group, topic, all, o.handler("A"), consumer.WithConsumerOrder(true), consumer.WithStrategy(halves(true)))
	e.pushConsumer(group, topic, all, o.handler("B"), consumer.WithConsumerOrder(true), consumer.WithStrategy(halves(false)))
	e.waitMembers(group, 2)

	keyQueue := map[string]int{}
	sendKeys := func(seq int) {
		for k := range keys {
			key := fmt.Sprintf("key%d", k)
			m := primitive.NewMessage(topic, fmt.Appendf(nil, "%s/%d", key, seq))
			m.WithShardingKey(key)
			r, err := p.SendSync(t.Context(), m)
			require.NoError(t, err)
			if q, ok := keyQueue[key]; ok {
				require.Equal(t, q, r.MessageQueue.QueueId, "%s went to two queues", key)
			}
			keyQueue[key] = r.MessageQueue.QueueId
		}
	}
	consumed := func(n int) {
		eventually(t, waitShort, "messages consumed", func() (bool, string) {
			o.mu.Lock()
			defer o.mu.Unlock()
			return len(o.seen) == n, fmt.Sprintf("%d of %d, handler calls per queue and member %v", len(o.seen), n, o.members)
		})
	}
	// A first message per key: once they are consumed, A and B hold
	// their locks. Then C joins and tries to lock every queue.
	sendKeys(0)
	consumed(keys)
	e.pushConsumer(group, topic, all, o.handler("C"), consumer.WithConsumerOrder(true), consumer.WithStrategy(everyQueue))
	e.waitMembers(group, 3)

	start := time.Now()
	for seq := 1; seq < perKey; seq++ {
		sendKeys(seq)
	}
	consumed(keys * perKey)

	o.mu.Lock()
	defer o.mu.Unlock()
	t.Logf("%d messages of %d keys consumed in %s; queue of each key %v; handler calls per queue and member %v; %d redeliveries",
		keys*perKey, keys, time.Since(start).Round(time.Millisecond), keyQueue, o.members, o.redelivers)
	assert.Empty(t, o.overlaps, "queues handled by two members at once")
	assert.Empty(t, o.outOfOrder, "messages of a key out of order")
	assert.Zero(t, o.redelivers, "redeliveries")
	for q, ms := range o.members {
		assert.Len(t, ms, 1, "queue %d handled by %v", q, ms)
		want := "B"
		if q < 2 {
			want = "A"
		}
		assert.Contains(t, ms, want, "queue %d", q)
		assert.NotContains(t, ms, "C", "queue %d: C consumed without the lock", q)
	}
}
