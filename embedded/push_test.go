package embedded_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/testutil"
)

// pushCluster is a cluster with a topic, a producer and an admin.
type pushCluster struct {
	c     *embedded.Cluster
	cfg   client.Config
	p     *client.Producer
	admin *client.Admin
}

func newPushCluster(t *testing.T, topic string, queues int32) *pushCluster {
	t.Helper()
	return startPushCluster(t, embedded.Options{NoAutoCreateTopics: true}, topic, queues)
}

// startPushCluster starts a cluster with opts, a producer (sharding-key
// selector, round robin without a key) and an admin, and creates topic
// with queues queues.
func startPushCluster(t *testing.T, opts embedded.Options, topic string, queues int32) *pushCluster {
	t.Helper()
	c, err := embedded.Start(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg, client.WithQueueSelector(&client.ByShardingKey{}))
	require.NoError(t, err)
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()); a.Close() })
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), topic); return err == nil }, 5*time.Second, 10*time.Millisecond)
	return &pushCluster{c: c, cfg: cfg, p: p, admin: a}
}

// consumer starts a push consumer with its own client id.
func (pc *pushCluster) consumer(t *testing.T, id, group, topic, expr string, h client.MessageHandler, opts ...client.PushConsumerOption) *client.PushConsumer {
	t.Helper()
	cfg := pc.cfg
	cfg.ClientID = id
	opts = append([]client.PushConsumerOption{client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithFetchHold(time.Second)}, opts...)
	c, err := client.NewPushConsumer(t.Context(), cfg, group, h, opts...)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, expr))
	require.NoError(t, c.Start(t.Context()))
	return c
}

// send sends n messages "<prefix>-<i>" asynchronously and waits for them.
func (pc *pushCluster) send(t *testing.T, topic, prefix string, from, n int, key func(i int) string, tags func(i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	var failed atomic.Int64
	window := make(chan struct{}, 512)
	for i := from; i < from+n; i++ {
		m := &client.Message{Topic: topic, Body: fmt.Appendf(nil, "%s-%d", prefix, i)}
		if key != nil {
			m.ShardingKey = key(i)
		}
		if tags != nil {
			m.Tags = tags(i)
		}
		window <- struct{}{}
		wg.Add(1)
		pc.p.SendAsync(t.Context(), m, func(_ *client.Message, _ client.SendResult, err error) {
			if err != nil {
				failed.Add(1)
			}
			<-window
			wg.Done()
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "sends failed")
}

// record counts what handlers got, by body.
type record struct {
	mu   sync.Mutex
	seen map[string]int
	n    atomic.Int64
}

func newRecord() *record { return &record{seen: map[string]int{}} }

func (r *record) handler(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
	r.mu.Lock()
	for _, m := range msgs {
		r.seen[string(m.Body)]++
	}
	r.mu.Unlock()
	r.n.Add(int64(len(msgs)))
	return client.ConsumeSuccess
}

// waitFor waits until the record holds n distinct bodies and then a little
// more, to catch late duplicates.
func (r *record) waitFor(t *testing.T, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.seen) >= n
	}, within, 10*time.Millisecond, "handled %d of %d", r.n.Load(), n)
	time.Sleep(300 * time.Millisecond)
}

func (r *record) counts() (distinct, dups int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.seen {
		if k > 1 {
			dups += k - 1
		}
	}
	return len(r.seen), dups
}

// settled waits until the consumers hold every one of the topic's queues
// (their group's retry queue aside)
// exactly once between them, each holding some when there are enough, and
// returns how long that took.
func settled(t *testing.T, queues int, cs ...*client.PushConsumer) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool {
		held := map[client.Queue]int{}
		for _, c := range cs {
			a := slices.DeleteFunc(c.Assigned(), func(q client.Queue) bool { return strings.HasPrefix(q.Topic, "%RETRY%") })
			if len(a) == 0 && queues >= len(cs) {
				return false
			}
			for _, q := range a {
				held[q]++
			}
		}
		if len(held) != queues {
			return false
		}
		for _, k := range held {
			if k != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
	return time.Since(start)
}

// pushMessages is the size of the group runs: 100,000 messages
// (GANTRY_PUSH_MESSAGES overrides).
func pushMessages(t *testing.T) int {
	return testutil.EnvInt(t, "GANTRY_PUSH_MESSAGES", 100_000)
}

// Three members of one group over 8 queues share the queues and handle
// every message exactly once; a member that joins or leaves moves queues
// within 3 s (printed).
func TestPushGroupExactlyOnceAndRebalance(t *testing.T) {
	pc := newPushCluster(t, "Orders", 8)
	rec := newRecord()
	var cs []*client.PushConsumer
	for i := range 3 {
		cs = append(cs, pc.consumer(t, fmt.Sprintf("member-%d", i), "billing", "Orders", "*", rec.handler))
	}
	t.Logf("3 members settled in %s", settled(t, 8, cs...))
	for _, c := range cs {
		assert.NotEmpty(t, c.Assigned())
	}

	n := pushMessages(t)
	start := time.Now()
	pc.send(t, "Orders", "m", 0, n, nil, nil)
	rec.waitFor(t, n, 2*time.Minute)
	distinct, dups := rec.counts()
	t.Logf("%d messages: %d handled, %d duplicates, in %s", n, distinct, dups, time.Since(start))
	require.Equal(t, n, distinct)
	require.Zero(t, dups, "steady state: exactly once")

	// A fourth member joins: the queues move at once, not at the next
	// 20 s rebalance.
	joined := time.Now()
	d := pc.consumer(t, "member-3", "billing", "Orders", "*", rec.handler)
	took := settled(t, 8, append(cs, d)...)
	fmt.Printf("push consumer: a member joining moved the queues in %s\n", time.Since(joined).Round(time.Millisecond))
	assert.Less(t, took, 3*time.Second)

	// One leaves (Shutdown): the others take its queues at once.
	left := time.Now()
	require.NoError(t, cs[0].Shutdown(t.Context()))
	took = settled(t, 8, append(cs[1:], d)...)
	fmt.Printf("push consumer: a member leaving moved the queues in %s\n", time.Since(left).Round(time.Millisecond))
	assert.Less(t, took, 3*time.Second)

	pc.send(t, "Orders", "after", 0, 1000, nil, nil)
	rec.waitFor(t, n+1000, time.Minute)
	distinct, dups = rec.counts()
	require.Equal(t, n+1000, distinct)
	require.Zero(t, dups, "graceful moves commit before releasing")
	for _, c := range append(cs[1:], d) {
		require.NoError(t, c.Shutdown(t.Context()))
	}
}

// Ordered consumption: messages sent by sharding key are handled in
// per-key order by a group of 3 while members join and leave.
func TestPushOrdered(t *testing.T) {
	keys, perKey := 1000, 100
	if raceEnabled {
		keys, perKey = 200, 50
	}
	pc := newPushCluster(t, "Ledger", 8)
	var mu sync.Mutex
	last := map[int]int{} // key -> last sequence handled
	var errs []string
	var handled atomic.Int64
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			var k, seq int
			_, err := fmt.Sscanf(string(m.Body), "k%d-s%d", &k, &seq)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if prev, ok := last[k]; (ok && seq != prev+1) || (!ok && seq != 0) {
				errs = append(errs, fmt.Sprintf("key %d: %d after %d", k, seq, prev))
			}
			last[k] = seq
		}
		handled.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	}
	opts := []client.PushConsumerOption{client.WithOrdered(), client.WithConsumeBatchSize(4)}
	a := pc.consumer(t, "ord-a", "ledger", "Ledger", "*", h, opts...)
	b := pc.consumer(t, "ord-b", "ledger", "Ledger", "*", h, opts...)
	settled(t, 8, a, b)

	// Send in rounds: each key's messages in order, keys interleaved.
	total := keys * perKey
	sendRound := func(from, to int) {
		var batch []*client.Message
		for s := from; s < to; s++ {
			for k := range keys {
				batch = append(batch, &client.Message{Topic: "Ledger", Body: fmt.Appendf(nil, "k%d-s%d", k, s), ShardingKey: strconv.Itoa(k)})
			}
		}
		// One message per Send keeps each key's order (a key's messages go to
		// one queue, in sending order).
		for _, m := range batch {
			_, err := pc.p.Send(t.Context(), m)
			require.NoError(t, err)
		}
	}
	sendRound(0, perKey/4)
	c := pc.consumer(t, "ord-c", "ledger", "Ledger", "*", h, opts...) // joins
	sendRound(perKey/4, perKey/2)
	require.NoError(t, a.Shutdown(t.Context())) // leaves
	sendRound(perKey/2, 3*perKey/4)
	d := pc.consumer(t, "ord-d", "ledger", "Ledger", "*", h, opts...) // joins
	sendRound(3*perKey/4, perKey)

	require.Eventually(t, func() bool { return handled.Load() >= int64(total) }, 3*time.Minute, 10*time.Millisecond,
		"handled %d of %d", handled.Load(), total)
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	require.Empty(t, errs, "out of order (first 10): %v", errs[:min(len(errs), 10)])
	require.Len(t, last, keys)
	for k, s := range last {
		require.Equal(t, perKey-1, s, "key %d", k)
	}
	mu.Unlock()
	assert.Equal(t, int64(total), handled.Load(), "no message handled twice")
	fmt.Printf("push consumer ordered: %d keys x %d messages handled once each in per-key order while members joined and left\n", keys, perKey)
	for _, x := range []*client.PushConsumer{b, c, d} {
		require.NoError(t, x.Shutdown(t.Context()))
	}
}

// Broadcasting: every member gets every message, and a member restarted
// with the same client id resumes from its own offsets.
func TestPushBroadcast(t *testing.T) {
	pc := newPushCluster(t, "News", 4)
	r1, r2 := newRecord(), newRecord()
	opt := client.WithConsumeModel(client.Broadcasting)
	m1 := pc.consumer(t, "reader-1", "news", "News", "*", r1.handler, opt)
	m2 := pc.consumer(t, "reader-2", "news", "News", "*", r2.handler, opt)
	require.Len(t, m1.Assigned(), 4, "broadcasting: every queue, and no retry topic")
	require.Len(t, m2.Assigned(), 4)
	pc.send(t, "News", "a", 0, 500, nil, nil)
	r1.waitFor(t, 500, 30*time.Second)
	r2.waitFor(t, 500, 30*time.Second)

	require.NoError(t, m2.Shutdown(t.Context()))
	pc.send(t, "News", "b", 0, 300, nil, nil)
	r1.waitFor(t, 800, 30*time.Second)

	r2b := newRecord()
	m2 = pc.consumer(t, "reader-2", "news", "News", "*", r2b.handler, opt)
	r2b.waitFor(t, 300, 30*time.Second)
	distinct, dups := r2b.counts()
	assert.Equal(t, 300, distinct, "the restarted member gets only what it missed")
	assert.Zero(t, dups)
	for k := range r2b.seen {
		assert.True(t, strings.HasPrefix(k, "b-"), k)
	}
	for _, r := range []*record{r1, r2} {
		_, dups := r.counts()
		assert.Zero(t, dups)
	}
	require.NoError(t, m1.Shutdown(t.Context()))
	require.NoError(t, m2.Shutdown(t.Context()))
}

// Flow control: with a slow handler the consumer holds at most the
// configured number of messages per queue, pausing its pulls.
func TestPushFlowControl(t *testing.T) {
	pc := newPushCluster(t, "Slow", 2)
	pc.send(t, "Slow", "s", 0, 2000, nil, nil)
	var handled atomic.Int64
	h := func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		time.Sleep(2 * time.Millisecond)
		handled.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	}
	c := pc.consumer(t, "slow-1", "slow", "Slow", "*", h, client.WithFetchThreshold(50, 1<<20), client.WithConsumeConcurrency(4))
	peak := 0
	require.Eventually(t, func() bool {
		for _, s := range c.Stats() {
			require.LessOrEqual(t, s.CachedMessages, 50, "queue %v", s.Queue)
			peak = max(peak, s.PeakCachedMessages)
		}
		return handled.Load() == 2000
	}, time.Minute, time.Millisecond)
	for _, s := range c.Stats() {
		require.LessOrEqual(t, s.PeakCachedMessages, 50, "queue %v", s.Queue)
	}
	t.Logf("peak cached per queue: %d (limit 50)", peak)
	assert.Positive(t, peak)
	require.NoError(t, c.Shutdown(t.Context()))
}

// Tag expressions filter on the broker, and tags that hash to the same
// code ("Aa" and "BB") are told apart.
func TestPushTagFilter(t *testing.T) {
	pc := newPushCluster(t, "Tagged", 2)
	tags := []string{"Aa", "BB", "C"}
	pc.send(t, "Tagged", "t", 0, 300, nil, func(i int) string { return tags[i%3] })
	var mu sync.Mutex
	got := map[string]int{}
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[m.Tags]++
		}
		return client.ConsumeSuccess
	}
	c := pc.consumer(t, "tags-1", "tags", "Tagged", "Aa || C", h)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return got["Aa"]+got["C"] == 200 }, 30*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	assert.Equal(t, map[string]int{"Aa": 100, "C": 100}, got)
	mu.Unlock()
	require.NoError(t, c.Shutdown(t.Context()))
}

// Start fails clearly for a topic that does not exist; Shutdown leaves no
// goroutine behind; options are checked.
func TestPushLifecycle(t *testing.T) {
	pc := newPushCluster(t, "Life", 2)
	cfg := pc.cfg
	c, err := client.NewPushConsumer(t.Context(), cfg, "life", func(context.Context, []*client.MessageExt) client.ConsumeResult {
		return client.ConsumeSuccess
	})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("NoSuchTopic", "*"))
	err = c.Start(t.Context())
	require.ErrorIs(t, err, client.ErrTopicNotFound)
	require.ErrorContains(t, err, `"NoSuchTopic"`)

	_, err = client.NewPushConsumer(t.Context(), cfg, "bad group!", func(context.Context, []*client.MessageExt) client.ConsumeResult { return 0 })
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	_, err = client.NewPushConsumer(t.Context(), cfg, "g", func(context.Context, []*client.MessageExt) client.ConsumeResult { return 0 },
		client.WithConsumeBatchSize(0))
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	// Everything the consumer starts ends with Shutdown (the producer's
	// goroutines exist before the snapshot).
	pc.send(t, "Life", "l", 0, 100, nil, nil)
	before := goleak.IgnoreCurrent()
	rec := newRecord()
	c2 := pc.consumer(t, "life-1", "life", "Life", "*", rec.handler, client.WithOrdered())
	rec.waitFor(t, 100, 30*time.Second)
	require.NoError(t, c2.Shutdown(t.Context()))
	require.ErrorIs(t, c2.Shutdown(t.Context()), client.ErrClosed)
	goleak.VerifyNone(t, before)
}
