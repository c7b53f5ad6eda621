package compat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPushClustering runs two official push consumers of one group in
// clustering mode: every message is consumed once, by one of them, each
// taking its own queues; their offsets are committed (at shutdown) and a
// restarted group resumes from them without consuming anything again;
// and after the broker restarts (same remoting address) the running
// consumers go on where they were.
func TestPushClustering(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic, group, n = "T_push", "G_push", 100
	e.createTopic(topic, 4)
	p := e.producer()
	rec := newRecorder()
	phase := func(name string) []*primitive.Message {
		msgs := make([]*primitive.Message, n)
		for i := range msgs {
			msgs[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "%s-%d", name, i))
		}
		return msgs
	}

	// 1. Two members share the queues; each message is consumed once.
	a := e.pushConsumer(group, topic, all, rec.handler("A1"))
	b := e.pushConsumer(group, topic, all, rec.handler("B1"))
	e.waitMembers(group, 2)
	first := phase("first")
	sendAll(t, p, first)
	start := time.Now()
	rec.waitBodies(t, bodiesOf(first), waitShort)
	dups, members := rec.duplicates(bodiesOf(first))
	queues := rec.queuesOf(bodiesOf(first))
	t.Logf("phase 1: %d messages consumed in %s by %v, queues %v, %d duplicates", n, time.Since(start).Round(time.Millisecond), members, queues, dups)
	assert.Zero(t, dups, "phase 1 duplicates")
	assert.Len(t, members, 2, "both members consume")
	checkDisjoint(t, queues)

	// 2. Their offsets are committed (every 5 s, the first 10 s after the
	// client started, and at shutdown); a restarted group resumes from
	// them. Shut down once the periodic commit has them all: the client
	// updates a queue's offset only after the handler returned, and not
	// once Shutdown has dropped the queue, so a shutdown right after the
	// last handler call may leave the last offsets behind (and the
	// restarted group consumes those messages again: at least once).
	start = time.Now()
	e.waitCommitted(group, topic)
	t.Logf("phase 1: offsets committed %s after the last message was consumed", time.Since(start).Round(time.Millisecond))
	require.NoError(t, a.Shutdown())
	require.NoError(t, b.Shutdown())
	e.waitCommitted(group, topic)
	a2 := e.pushConsumer(group, topic, all, rec.handler("A2"))
	_ = e.pushConsumer(group, topic, all, rec.handler("B2"))
	e.waitMembers(group, 2)
	second := phase("second")
	sendAll(t, p, second)
	start = time.Now()
	rec.waitBodies(t, bodiesOf(second), waitShort)
	dups, members = rec.duplicates(bodiesOf(second))
	again, _ := rec.duplicates(bodiesOf(first))
	t.Logf("phase 2 (consumers restarted): %d messages consumed in %s by %v, %d duplicates, %d phase-1 messages consumed again",
		n, time.Since(start).Round(time.Millisecond), members, dups, again)
	assert.Zero(t, again, "phase-1 messages consumed again after the consumers restarted")
	assert.Zero(t, dups, "phase 2 duplicates")
	assert.Len(t, members, 2, "both members consume")

	// 3. Restart the broker under the running consumers.
	remoting := e.c.BrokerRemotingAddr()
	start = time.Now()
	require.NoError(t, e.c.RestartBroker(t.Context()))
	require.Equal(t, remoting, e.c.BrokerRemotingAddr(), "the broker's remoting address survives a restart")
	failed := 0
	require.Eventually(t, func() bool {
		_, err := p.SendSync(t.Context(), primitive.NewMessage(topic, []byte("probe")))
		if err != nil {
			failed++
		}
		return err == nil
	}, waitShort, 100*time.Millisecond, "send after the broker restarted")
	t.Logf("broker restarted; the producer's sends failed %d times before one succeeded %s after the restart began", failed, time.Since(start).Round(time.Millisecond))
	third := phase("third")
	sendAll(t, p, third)
	sentAt := time.Now()
	rec.waitBodies(t, bodiesOf(third), waitLong)
	dups, members = rec.duplicates(bodiesOf(third))
	again, _ = rec.duplicates(bodiesOf(second))
	t.Logf("phase 3 (broker restarted): %d messages consumed %s after sending by %v, %d duplicates, %d phase-2 messages consumed again",
		n, time.Since(sentAt).Round(time.Millisecond), members, dups, again)
	assert.Zero(t, again, "phase-2 messages consumed again after the broker restarted")
	assert.Zero(t, dups, "phase 3 duplicates")

	require.NoError(t, a2.Shutdown())
}

// checkDisjoint checks that no queue was consumed by two members.
func checkDisjoint(t *testing.T, queues map[string]map[int]bool) {
	t.Helper()
	owner := map[int]string{}
	for _, m := range slices.Sorted(maps.Keys(queues)) {
		for q := range queues[m] {
			if o, ok := owner[q]; ok {
				t.Errorf("queue %d consumed by both %s and %s", q, o, m)
			}
			owner[q] = m
		}
	}
}

// waitCommitted waits until group's committed offset of every queue of
// topic is the queue's max offset, as Gantry's admin reports them.
func (e *env) waitCommitted(group, topic string) {
	e.t.Helper()
	eventually(e.t, waitShort, "committed offsets of "+group, func() (bool, string) {
		ps, err := e.admin.ConsumerProgress(context.Background(), group, topic)
		if err != nil {
			return false, err.Error()
		}
		done := len(ps) > 0
		for _, p := range ps {
			if p.ConsumerOffset != p.BrokerOffset {
				done = false
			}
		}
		return done, fmt.Sprint(ps)
	})
	ps, _ := e.admin.ConsumerProgress(context.Background(), group, topic)
	for _, p := range ps {
		e.t.Logf("committed: %s queue %d offset %d of %d", group, p.Queue.ID, p.ConsumerOffset, p.BrokerOffset)
	}
}
