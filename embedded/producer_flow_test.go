package embedded_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

func startCluster(t *testing.T, opts embedded.Options) *embedded.Cluster {
	t.Helper()
	c, err := embedded.Start(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	return c
}

// A producer over its buffer bound blocks, and resumes when the broker
// answers again: with the broker down the accepted sends wait in their
// retries, the next SendAsync waits for room, and all complete once the
// broker is back.
func TestProducerBufferBlocksAndResumes(t *testing.T) {
	c := startCluster(t, embedded.Options{})
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}, RouteRefresh: time.Hour}
	p, err := client.NewProducer(t.Context(), cfg, client.WithMaxBuffered(8, 1<<20),
		client.WithRetries(1000), client.WithBackoff(20*time.Millisecond, 100*time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	_, err = p.Send(t.Context(), &client.Message{Topic: "Flow", Body: []byte("route")})
	require.NoError(t, err)
	require.NoError(t, c.KillBroker())

	const n = 20
	var accepted, ok atomic.Int64
	var wg sync.WaitGroup
	wg.Add(n)
	go func() {
		for i := range n {
			p.SendAsync(t.Context(), &client.Message{Topic: "Flow", Body: fmt.Appendf(nil, "m%d", i)}, func(_ *client.Message, _ client.SendResult, err error) {
				if assert.NoError(t, err) {
					ok.Add(1)
				}
				wg.Done()
			})
			accepted.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return accepted.Load() == 8 }, 10*time.Second, time.Millisecond)
	require.Never(t, func() bool { return accepted.Load() > 8 }, 300*time.Millisecond, 10*time.Millisecond,
		"over the bound SendAsync blocks")
	require.NoError(t, c.StartBroker(t.Context()))
	wg.Wait()
	assert.Equal(t, int64(n), ok.Load())
	require.NoError(t, p.Flush(t.Context()))
}

// Warm-up connects before NewProducer returns for an existing topic, and
// fails it at once, naming the topic, for a missing one.
func TestProducerWarmUp(t *testing.T) {
	c := startCluster(t, embedded.Options{NoAutoCreateTopics: true})
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: "Warm", ReadQueueNums: 2, WriteQueueNums: 2}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), "Warm"); return err == nil }, 10*time.Second, 10*time.Millisecond)

	p, err := client.NewProducer(t.Context(), cfg, client.WithWarmUp("Warm"))
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &client.Message{Topic: "Warm", Body: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = client.NewProducer(ctx, cfg, client.WithWarmUp("Warm", "NoSuchTopic"))
	require.ErrorIs(t, err, client.ErrTopicNotFound)
	assert.Contains(t, err.Error(), `"NoSuchTopic"`)
	assert.NoError(t, ctx.Err(), "failed at once, not at the deadline")
}

// Flush waits for the SendAsyncs before it; Close with a context already
// cancelled still completes the sends in flight (its grace) and leaves no
// goroutine behind.
func TestProducerFlushAndClose(t *testing.T) {
	c := startCluster(t, embedded.Options{})
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	before := runtime.NumGoroutine()
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)

	const n = 200
	var done atomic.Int64
	cb := func(_ *client.Message, _ client.SendResult, err error) {
		assert.NoError(t, err)
		done.Add(1)
	}
	for i := range n {
		p.SendAsync(t.Context(), &client.Message{Topic: "Flushed", Body: fmt.Appendf(nil, "%d", i)}, cb)
	}
	require.NoError(t, p.Flush(t.Context()))
	assert.Equal(t, int64(n), done.Load(), "Flush returned after every callback")

	for i := range n {
		p.SendAsync(t.Context(), &client.Message{Topic: "Flushed", Body: fmt.Appendf(nil, "%d", i)}, cb)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, p.Close(ctx))
	assert.Equal(t, int64(2*n), done.Load(), "Close completed the sends in flight")
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines after Close")
}
