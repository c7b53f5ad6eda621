package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// countingHooks counts every hook call and records connection states.
type countingHooks struct {
	send, sendDone, sendFailed, consume, consumeDone atomic.Int64

	mu     sync.Mutex
	states map[string][]client.ConnState
}

type hookCtxKey struct{}

func (h *countingHooks) OnSend(ctx context.Context, m *client.Message) context.Context {
	h.send.Add(1)
	return context.WithValue(ctx, hookCtxKey{}, m)
}

func (h *countingHooks) OnSendDone(ctx context.Context, m *client.Message, _ client.SendResult, err error) {
	if ctx.Value(hookCtxKey{}) != m {
		panic("OnSendDone without the context OnSend returned for the message")
	}
	h.sendDone.Add(1)
	if err != nil {
		h.sendFailed.Add(1)
	}
}

func (h *countingHooks) OnConsume(ctx context.Context, m *client.MessageExt) context.Context {
	h.consume.Add(1)
	return context.WithValue(ctx, hookCtxKey{}, m)
}

func (h *countingHooks) OnConsumeDone(ctx context.Context, m *client.MessageExt, _ client.ConsumeResult) {
	if ctx.Value(hookCtxKey{}) != m {
		panic("OnConsumeDone without the context OnConsume returned for the message")
	}
	h.consumeDone.Add(1)
}

func (h *countingHooks) OnConnState(addr string, s client.ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.states == nil {
		h.states = map[string][]client.ConnState{}
	}
	h.states[addr] = append(h.states[addr], s)
}

func (h *countingHooks) statesOf(addr string) []client.ConnState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]client.ConnState(nil), h.states[addr]...)
}

// Hooks see every message sent, by every kind of send, and every message
// handed to a push consumer's handler, exactly once each; the handler's
// context is the one OnConsume returned; connection-state hooks see the
// connections become ready and, on close, shut down.
func TestHooksSeeEverySendAndConsume(t *testing.T) {
	const topic, each = "Hooked", 20
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })

	ph := &countingHooks{}
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}, Hooks: []client.Hook{ph}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)

	body := func(kind string, i int) []byte { return fmt.Appendf(nil, "%s-%d", kind, i) }
	for i := range each {
		_, err := p.Send(t.Context(), &client.Message{Topic: topic, Body: body("send", i)})
		require.NoError(t, err)
	}
	batch := make([]*client.Message, each)
	for i := range batch {
		batch[i] = &client.Message{Topic: topic, Body: body("batch", i)}
	}
	_, err = p.SendBatch(t.Context(), batch)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var asyncFailed atomic.Int64
	for i := range each {
		wg.Add(1)
		p.SendAsync(t.Context(), &client.Message{Topic: topic, Body: body("async", i)}, func(_ *client.Message, _ client.SendResult, err error) {
			if err != nil {
				asyncFailed.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	require.Zero(t, asyncFailed.Load())
	for i := range each {
		require.NoError(t, p.SendOneway(t.Context(), &client.Message{Topic: topic, Body: body("oneway", i)}))
	}
	// An invalid message is seen too: its send ends at once, failed.
	_, err = p.Send(t.Context(), &client.Message{Topic: topic})
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	const sent = 4*each + 1
	assert.EqualValues(t, sent, ph.send.Load(), "OnSend per message")
	assert.EqualValues(t, sent, ph.sendDone.Load(), "OnSendDone per message")
	assert.EqualValues(t, 1, ph.sendFailed.Load())

	ch := &countingHooks{}
	ccfg := client.Config{NameServers: []string{c.NameServerAddr()}, Hooks: []client.Hook{ch}}
	var handled atomic.Int64
	var wrongCtx atomic.Int64
	seen := sync.Map{}
	pc, err := client.NewPushConsumer(t.Context(), ccfg, "HookedGroup", func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		if ctx.Value(hookCtxKey{}) != msgs[0] { // batch size 1
			wrongCtx.Add(1)
		}
		seen.Store(string(msgs[0].Body), true)
		handled.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	}, client.WithConsumeFrom(client.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, "*"))
	require.NoError(t, pc.Start(t.Context()))
	stored := int64(sent - 1)
	require.Eventually(t, func() bool { return handled.Load() >= stored }, 20*time.Second, 10*time.Millisecond,
		"handled %d of %d", handled.Load(), stored)
	require.NoError(t, pc.Shutdown(t.Context()))

	distinct := 0
	seen.Range(func(any, any) bool { distinct++; return true })
	assert.EqualValues(t, stored, distinct, "every message stored was handled")
	assert.Equal(t, handled.Load(), ch.consume.Load(), "OnConsume per message handed to the handler")
	assert.Equal(t, handled.Load(), ch.consumeDone.Load(), "OnConsumeDone per message handed to the handler")
	assert.Zero(t, wrongCtx.Load(), "the handler's context is OnConsume's")
	assert.Zero(t, ph.consume.Load()+ch.send.Load(), "each client calls its own hooks")

	require.NoError(t, p.Close(t.Context()))
	for _, h := range []*countingHooks{ph, ch} {
		for _, addr := range []string{c.NameServerAddr(), c.BrokerAddr()} {
			states := h.statesOf(addr)
			require.NotEmpty(t, states, addr)
			assert.Contains(t, states, client.ConnReady, "%s: %v", addr, states)
			assert.Equal(t, client.ConnShutdown, states[len(states)-1], "%s: %v", addr, states)
		}
	}
}
