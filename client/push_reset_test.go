package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pull answered OFFSET_ILLEGAL with a next offset behind the one pulled
// from (the broker reset the group's offsets, and this consumer missed
// the notification) moves the queue back: it is read again from there by a
// new state, and the old one is dropped (it commits nothing more).
func TestPushQueueMovedBack(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, b)
	cfg := testConfig(t, ns)
	p := newTestProducer(t, cfg)
	for _, body := range []string{"0", "1", "2"} {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte(body)})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var got []string
	c, err := NewPushConsumer(t.Context(), cfg, "g", func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
		return ConsumeSuccess
	}, WithConsumeModel(Broadcasting), WithFetchHold(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.c.close() })
	// Its parts, by hand: started, one worker, the queue held from offset 5,
	// beyond the queue's end (3), so the broker answers "illegal, 3".
	c.state = pushStarted
	c.life, c.stopLife = context.WithCancel(c.c.life)
	c.handlerCtx, c.stopHandle = context.WithCancel(c.c.life)
	c.tasks.goFunc(c.worker)
	q := Queue{Topic: "T", BrokerName: "a", Broker: b.addr, ID: 0}
	old := c.newAssigned(q, "", 5)
	c.mu.Lock()
	c.queues[keyOf(q)] = old
	c.mu.Unlock()
	c.startLoops(old)

	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.queues[keyOf(q)] != old }, 5*time.Second, time.Millisecond,
		"the queue moved to a new state")
	// The new state's start drops the old one, on a goroutine of its own.
	require.Eventually(t, old.dropped.Load, 5*time.Second, time.Millisecond, "the old state is dropped")
	assert.NoError(t, c.commit(t.Context(), old))
	committed := func() (off int64, found bool) {
		b.configure(func(b *fakeBroker) { off, found = b.offsets[offsetKey("g", "T", 0)] })
		return off, found
	}
	_, found := committed()
	assert.False(t, found, "a dropped state commits nothing")
	c.mu.Lock()
	nu := c.queues[keyOf(q)]
	c.mu.Unlock()
	assert.Equal(t, int64(3), nu.pq.commitOffset(), "read from the offset the broker gave")

	c.stopLife()
	c.mu.Lock()
	c.state = pushShut
	c.mu.Unlock()
	c.release(nu)
	off, _ := committed()
	assert.Equal(t, int64(3), off, "the new state commits the offset it moved to")
	close(c.work)
	c.tasks.wait()
	mu.Lock()
	assert.Empty(t, got, "nothing past the end was handed out")
	mu.Unlock()
}
