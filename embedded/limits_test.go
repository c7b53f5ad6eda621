package embedded_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/message"
)

// bigBody is a body of n bytes whose every byte depends on its position
// and on tag, so that a body read back is checked whole.
func bigBody(n int, tag byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ tag
	}
	return b
}

// A message at the largest body the broker accepts (4,194,304 bytes) is
// read by Gantry's pull and push consumers, and so are the messages after
// it in its queue: it does not block the queue. Pulls that ask for more
// bytes than a client can receive are bounded by the broker.
func TestMaxBodyMessageIsReadable(t *testing.T) {
	const topic = "Big"
	pc := newPushCluster(t, topic, 1)
	want := [][]byte{bigBody(message.MaxBodyBytes, 7), []byte("after")}
	for i := range 3 { // a pull of all three would be 6 MiB
		want = append(want, bigBody(2<<20, byte(i)))
	}
	for _, b := range want {
		_, err := pc.p.Send(t.Context(), &client.Message{Topic: topic, Body: b})
		require.NoError(t, err, "a body of up to maxMessageSize is accepted")
	}
	_, err := pc.p.Send(t.Context(), &client.Message{Topic: topic, Body: make([]byte, message.MaxBodyBytes+1)})
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.ErrorContains(t, err, "body of 4194305 bytes, want 1 to 4194304")

	// The pull consumer, with its defaults and with a byte budget beyond
	// what a client can receive.
	for i, opts := range [][]client.PullConsumerOption{nil, {client.WithPullMaxBytes(1 << 30)}} {
		pull, err := client.NewPullConsumer(t.Context(), pc.cfg, fmt.Sprintf("big-pull-%d", i), opts...)
		require.NoError(t, err)
		got := drain(t, pull, topic, "")
		require.NoError(t, pull.Close(context.Background()))
		require.Len(t, got, len(want))
		for i, m := range got {
			assert.True(t, bytes.Equal(want[i], m.Body), "message %d reads back whole", i)
		}
	}

	// The push consumer (its byte budget is its 64 MiB threshold).
	var mu sync.Mutex
	got := map[string]bool{}
	c := pc.consumer(t, "big-push", "big-push", topic, "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
		return client.ConsumeSuccess
	})
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	}, 30*time.Second, 10*time.Millisecond)
	for i, b := range want {
		assert.True(t, got[string(b)], "message %d", i)
	}
	n, last := c.PullErrors()
	assert.Zero(t, n, "%v", last)
}

// Sends are bounded as a whole: a Send whose records exceed what one
// request may carry is refused before it goes, naming the limit, and
// concurrent sends coalesced into one request never exceed it, however
// large WithMaxBatch allows.
func TestSendRequestLimits(t *testing.T) {
	const topic = "Batches"
	pc := newPushCluster(t, topic, 1)
	two := []*client.Message{{Topic: topic, Body: bigBody(3<<20, 1)}, {Topic: topic, Body: bigBody(3<<20, 2)}}
	_, err := pc.p.SendBatch(t.Context(), two)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
	assert.ErrorContains(t, err, "more than the 4227313 one Send may carry")

	p, err := client.NewProducer(t.Context(), pc.cfg, client.WithMaxBatch(1024, 1<<30))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := p.Send(t.Context(), &client.Message{Topic: topic, Body: bigBody(1<<20+i, byte(i))})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	pull, err := client.NewPullConsumer(t.Context(), pc.cfg, "batches")
	require.NoError(t, err)
	t.Cleanup(func() { pull.Close(context.Background()) })
	assert.Len(t, drain(t, pull, topic, ""), 8)
}

// A push consumer that cannot fetch says so: every failed pull is logged
// at Warn and counted, per queue and in all. Here the group's consumption
// is disabled, so the broker refuses every pull.
func TestPushConsumerReportsPullFailures(t *testing.T) {
	const topic, group = "Refused", "disabled"
	pc := newPushCluster(t, topic, 2)
	require.NoError(t, pc.admin.CreateGroup(t.Context(), client.GroupConfig{Name: group, Disabled: true}))
	pc.send(t, topic, "m", 0, 4, nil, nil)

	var logs syncLog
	cfg := pc.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.NewPushConsumer(t.Context(), cfg, group, func(context.Context, []*client.MessageExt) client.ConsumeResult {
		return client.ConsumeSuccess
	}, client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithFetchHold(time.Second))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, "*"))
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })

	require.Eventually(t, func() bool {
		n, _ := c.PullErrors()
		return n >= 4
	}, 20*time.Second, 10*time.Millisecond)
	_, last := c.PullErrors()
	require.ErrorIs(t, last, client.ErrNoPermission)
	assert.ErrorContains(t, last, `group "disabled" has consumption disabled`)
	stats := c.Stats()
	require.Len(t, stats, 3, "the topic's two queues and the group's retry queue")
	for _, s := range stats {
		assert.Positive(t, s.PullErrors, "queue %v", s.Queue)
		assert.ErrorIs(t, s.LastPullError, client.ErrNoPermission)
	}
	assert.Contains(t, logs.String(), "level=WARN msg=\"pull failed\"")
	assert.Contains(t, logs.String(), "consumption disabled")
}

// syncLog is a log destination safe for concurrent writers.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
