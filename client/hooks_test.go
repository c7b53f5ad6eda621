package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// allHooks implements every hook interface and records what it saw.
type allHooks struct {
	mu          sync.Mutex
	sends       []string
	sendDone    []string
	consumes    []string
	consumeDone []ConsumeResult
	states      map[string][]ConnState
}

type hookCtxKey struct{}

func (h *allHooks) OnSend(ctx context.Context, m *Message) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sends = append(h.sends, string(m.Body))
	return context.WithValue(ctx, hookCtxKey{}, "send:"+string(m.Body))
}

func (h *allHooks) OnSendDone(ctx context.Context, m *Message, _ SendResult, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sendDone = append(h.sendDone, ctx.Value(hookCtxKey{}).(string))
}

func (h *allHooks) OnConsume(ctx context.Context, m *MessageExt) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.consumes = append(h.consumes, string(m.Body))
	return context.WithValue(ctx, hookCtxKey{}, "consume:"+string(m.Body))
}

func (h *allHooks) OnConsumeDone(ctx context.Context, m *MessageExt, r ConsumeResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.consumes = append(h.consumes, ctx.Value(hookCtxKey{}).(string)+" done")
	h.consumeDone = append(h.consumeDone, r)
}

func (h *allHooks) OnConnState(addr string, s ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.states == nil {
		h.states = map[string][]ConnState{}
	}
	h.states[addr] = append(h.states[addr], s)
}

func (h *allHooks) statesOf(addr string) []ConnState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ConnState(nil), h.states[addr]...)
}

type onlySendDone struct{}

func (onlySendDone) OnSendDone(context.Context, *Message, SendResult, error) {}

type notAHook struct{}

func TestConfigValidateHooks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hooks []Hook
		err   string
	}{
		{"none", nil, ""},
		{"every kind", []Hook{&allHooks{}}, ""},
		{"one kind", []Hook{onlySendDone{}}, ""},
		{"nil", []Hook{onlySendDone{}, nil}, "Config.Hooks[1] is nil"},
		{"no interface", []Hook{notAHook{}}, "Config.Hooks[0] (client.notAHook) implements none of SendHook, SendDoneHook, ConsumeHook, ConsumeDoneHook, ConnStateHook"},
		{"a function", []Hook{func() {}}, "Config.Hooks[0] (func()) implements none of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{Hooks: tc.hooks}.withDefaults().Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestNewHookSetSortsByInterface(t *testing.T) {
	a, b := &allHooks{}, onlySendDone{}
	s := newHookSet([]Hook{a, b})
	assert.Equal(t, []SendHook{a}, s.send)
	assert.Equal(t, []SendDoneHook{a, b}, s.sendDone, "in the order of Config.Hooks")
	assert.Equal(t, []ConsumeHook{a}, s.consume)
	assert.Equal(t, []ConsumeDoneHook{a}, s.consumeDone)
	assert.Equal(t, []ConnStateHook{a}, s.conn)
}

func TestConnStateString(t *testing.T) {
	for s, want := range map[ConnState]string{ConnIdle: "IDLE", ConnConnecting: "CONNECTING", ConnReady: "READY",
		ConnTransientFailure: "TRANSIENT_FAILURE", ConnShutdown: "SHUTDOWN", ConnState(9): "ConnState(9)"} {
		assert.Equal(t, want, s.String())
	}
}

// nilCtxHook returns a nil context, which the client ignores.
type nilCtxHook struct{}

func (nilCtxHook) OnSend(context.Context, *Message) context.Context       { return nil }
func (nilCtxHook) OnConsume(context.Context, *MessageExt) context.Context { return nil }

func TestSendHooksChainContexts(t *testing.T) {
	a := &allHooks{}
	s := newHookSet([]Hook{nilCtxHook{}, a})
	msgs := []*Message{{Body: []byte("m0")}, nil, {Body: []byte("m1")}} // a nil message is refused, unseen
	ctxs := s.batchStart(t.Context(), msgs)
	res, err := []SendResult{{}, {}, {}}, error(nil)
	s.batchEnd(ctxs, msgs, &res, &err)
	assert.Equal(t, []string{"m0", "m1"}, a.sends)
	assert.Equal(t, []string{"send:m0", "send:m1"}, a.sendDone, "each message's done hook gets the context its send hook returned")
}

func TestConsumeCall(t *testing.T) {
	a := &allHooks{}
	s := newHookSet([]Hook{nilCtxHook{}, a})
	one := []*MessageExt{{Body: []byte("m0")}}
	var c consumeCall
	ctx := c.start(&s, t.Context(), one)
	assert.Equal(t, "consume:m0", ctx.Value(hookCtxKey{}), "a batch of one: the handler gets the hook's context")
	res := ConsumeRetryLater
	c.done(one, &res)

	two := []*MessageExt{{Body: []byte("m1")}, {Body: []byte("m2")}}
	c = consumeCall{}
	ctx = c.start(&s, t.Context(), two)
	assert.Nil(t, ctx.Value(hookCtxKey{}), "a larger batch: the handler gets the consumer's context")
	res = ConsumeSuccess
	c.done(two, &res)

	assert.Equal(t, []string{"m0", "consume:m0 done", "m1", "m2", "consume:m1 done", "consume:m2 done"}, a.consumes)
	assert.Equal(t, []ConsumeResult{ConsumeRetryLater, ConsumeSuccess, ConsumeSuccess}, a.consumeDone)
}

// Without hooks the call sites allocate nothing.
func TestNoHooksAllocateNothing(t *testing.T) {
	var s hookSet
	ctx := t.Context()
	msgs := []*MessageExt{{}, {}}
	sent := []*Message{{}, {}}
	cb := func(*Message, SendResult, error) {}
	allocs := testing.AllocsPerRun(100, func() {
		var c consumeCall
		if c.start(&s, ctx, msgs) != ctx {
			t.Fatal("context changed")
		}
		res := ConsumeSuccess
		c.done(msgs, &res)

		var r SendResult
		var err error
		s.sendEnd(s.sendStart(ctx, sent[0]), sent[0], &r, &err)
		var rs []SendResult
		s.batchEnd(s.batchStart(ctx, sent), sent, &rs, &err)
		s.asyncStart(ctx, sent[0], cb)(sent[0], r, err)
	})
	assert.Zero(t, allocs)
}

// A ConnStateHook sees every connection reach READY and, when the client
// closes, SHUTDOWN last; the watchers end with Close (goleak checks).
func TestConnStateHook(t *testing.T) {
	br := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, br)
	h := &allHooks{}
	cfg := testConfig(t, ns)
	cfg.Hooks = []Hook{h}
	a, err := NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	_, err = a.TopicStatus(t.Context(), "T") // the nameserver, then the broker
	require.NoError(t, err)
	// The watchers report asynchronously: READY reaches the hook while the
	// connections are up (a loaded CI run closed before a watcher ran).
	for _, addr := range []string{ns.addr, br.addr} {
		require.Eventually(t, func() bool { return slices.Contains(h.statesOf(addr), ConnReady) }, 10*time.Second, time.Millisecond, addr)
	}
	require.NoError(t, a.Close())

	for _, addr := range []string{ns.addr, br.addr} {
		states := h.statesOf(addr)
		require.NotEmpty(t, states, addr)
		assert.Contains(t, states, ConnReady, addr)
		assert.Equal(t, ConnShutdown, states[len(states)-1], "%s: %v", addr, states)
		for i := 1; i < len(states); i++ {
			assert.NotEqual(t, states[i-1], states[i], "%s: each change reported once: %v", addr, states)
		}
	}
}

// BenchmarkPushHandlerCall measures one push handler call of one message,
// the per-delivery work around the handler (its context, the consume
// hooks): allocs/op is per message delivered.
//
//	go test -run=^$ -bench=PushHandlerCall -benchmem ./client
func BenchmarkPushHandlerCall(b *testing.B) {
	for _, bc := range []struct {
		name  string
		hooks []Hook
	}{
		{"no hooks", nil},
		{"one hook", []Hook{&countHook{}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br := startBroker(b, "a", 1, "T")
			cfg := testConfig(b, startNameServer(b, br))
			cfg.Hooks = bc.hooks
			p, err := NewPushConsumer(b.Context(), cfg, "g", func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
			require.NoError(b, err)
			b.Cleanup(func() { _ = p.c.close() })
			msgs := []*MessageExt{{Body: []byte("x")}}
			b.ReportAllocs()
			for b.Loop() {
				if res, _, _ := p.call(msgs, time.Now()); res != ConsumeSuccess {
					b.Fatal(res)
				}
			}
		})
	}
}

// countHook counts consume calls without allocating.
type countHook struct{ n atomic.Int64 }

func (h *countHook) OnConsume(ctx context.Context, _ *MessageExt) context.Context {
	h.n.Add(1)
	return ctx
}

func (h *countHook) OnConsumeDone(context.Context, *MessageExt, ConsumeResult) { h.n.Add(1) }

// sendRecorder is a send hook that adds a property and records each
// outcome with whether its context was the one OnSend returned.
type sendRecorder struct {
	mu   sync.Mutex
	done []string
}

func (h *sendRecorder) OnSend(ctx context.Context, m *Message) context.Context {
	m.Properties = map[string]string{"hooked": string(m.Body)}
	return context.WithValue(ctx, hookCtxKey{}, m)
}

func (h *sendRecorder) OnSendDone(ctx context.Context, m *Message, r SendResult, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kind := "<nil>"
	switch {
	case errors.Is(err, ErrInvalidArgument):
		kind = "invalid"
	case err != nil:
		kind = err.Error()
	}
	h.done = append(h.done, fmt.Sprintf("%s attempts=%d err=%s ctx=%v", m.Body, r.Attempts, kind, ctx.Value(hookCtxKey{}) == m))
}

func (h *sendRecorder) outcomes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.done)
}

// Each message's SendDoneHooks run once, with the final outcome after
// retries, and what the SendHooks added to its properties is stored.
func TestSendHooksOncePerMessage(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.setFault(func(n int64, _ *gantryv1.SendRequest) *sendFault {
		if n%2 == 1 { // every send's first attempt fails
			return &sendFault{code: codes.DeadlineExceeded, msg: "flush timeout", indeterminate: true}
		}
		return nil
	})
	h := &sendRecorder{}
	cfg := testConfig(t, startNameServer(t, a))
	cfg.Hooks = []Hook{h}
	p := newTestProducer(t, cfg, WithRetryIndeterminate(true))

	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("send")})
	require.NoError(t, err)
	_, err = p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte("batch0")}, {Topic: "T", Body: []byte("batch1")}})
	require.NoError(t, err)
	done := make(chan string, 1)
	p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("async")}, func(m *Message, _ SendResult, err error) {
		assert.NoError(t, err)
		out := h.outcomes()
		done <- out[len(out)-1] // the hook ran before the callback
	})
	assert.Equal(t, "async attempts=2 err=<nil> ctx=true", <-done)
	a.setFault(nil)
	require.NoError(t, p.SendOneway(t.Context(), &Message{Topic: "T", Body: []byte("oneway")}))
	_, err = p.Send(t.Context(), &Message{Topic: "T"})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, p.Close(t.Context()))
	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("closed")})
	require.ErrorIs(t, err, ErrClosed)

	assert.Equal(t, []string{
		"send attempts=2 err=<nil> ctx=true",
		"batch0 attempts=2 err=<nil> ctx=true", "batch1 attempts=2 err=<nil> ctx=true",
		"async attempts=2 err=<nil> ctx=true",
		"oneway attempts=0 err=<nil> ctx=true",
		" attempts=0 err=invalid ctx=true",
		"closed attempts=0 err=client: closed ctx=true",
	}, h.outcomes())
	require.Eventually(t, func() bool { return len(a.records("T", 0)) == 5 }, 5*time.Second, time.Millisecond, "oneway stored")
	var hooked []string
	for _, rec := range a.records("T", 0) {
		m, _, err := message.Decode(rec)
		require.NoError(t, err)
		v, _ := m.Properties.Get("hooked")
		hooked = append(hooked, v)
	}
	assert.Equal(t, []string{"send", "batch0", "batch1", "async", "oneway"}, hooked, "what OnSend added is stored")
}

// The ConsumeDoneHooks get the call's final result: a panic or a call
// past the consume timeout is ConsumeRetryLater whatever the handler said.
func TestConsumeHooksSeeTheFinalResult(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	h := &allHooks{}
	cfg := testConfig(t, startNameServer(t, b))
	cfg.Hooks = []Hook{h}
	p, err := NewPushConsumer(t.Context(), cfg, "g", func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		switch string(msgs[0].Body) {
		case "panic":
			panic("boom")
		case "suspend":
			return ConsumeSuspend
		}
		return ConsumeSuccess
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.c.close() })

	for _, body := range []string{"ok", "panic", "suspend"} {
		p.call([]*MessageExt{{Body: []byte(body)}}, time.Now())
	}
	p.call([]*MessageExt{{Body: []byte("late")}}, time.Now().Add(-DefaultConsumeTimeout-time.Second))
	assert.Equal(t, []ConsumeResult{ConsumeSuccess, ConsumeRetryLater, ConsumeSuspend, ConsumeRetryLater}, h.consumeDone)
	assert.Equal(t, []string{"ok", "consume:ok done", "panic", "consume:panic done", "suspend", "consume:suspend done", "late", "consume:late done"}, h.consumes)
}
