package client

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Hook observes a client (Config.Hooks). It is any value that implements
// one or more of SendHook, SendDoneHook, ConsumeHook, ConsumeDoneHook and
// ConnStateHook; Config.Validate refuses one that implements none. Hooks
// are called in the order of Config.Hooks: send and consume hooks on the
// goroutine of the call they observe, connection-state hooks on one
// goroutine per connection. They must be safe for concurrent use and
// return quickly. The contrib/otel module (package otelgantry) is a Hook
// for OpenTelemetry.
type Hook any

// SendHook is called once for every message given to Producer.Send,
// SendBatch, SendAsync or SendOneway, when the call begins: before the
// message is validated and encoded, so that properties it adds to
// m.Properties (a trace context, say) are sent. It must not change the
// message otherwise. The context it returns, derived from ctx, is the
// one the message's SendDoneHooks get; the send itself runs under the
// caller's context.
type SendHook interface {
	OnSend(ctx context.Context, m *Message) context.Context
}

// SendDoneHook is called exactly once for every message given to a send
// (see SendHook), when it has its final outcome (after retries): the result
// and nil, or the zero SendResult and the error. ctx is what the SendHooks
// returned for the message. For SendAsync it runs just before the callback;
// for SendOneway err is nil once the message was written (its result is
// never known, so r is zero).
type SendDoneHook interface {
	OnSendDone(ctx context.Context, m *Message, r SendResult, err error)
}

// ConsumeHook is called by a PushConsumer (concurrent or ordered) for every
// message it hands to the handler, before the handler call (again for every
// redelivery). With a consume batch size of 1 (the default) the handler's
// context is the one the ConsumeHooks returned, so work the handler traces
// nests under the hook's span. With larger batches each message's context
// goes to its ConsumeDoneHooks only, and the handler gets the consumer's
// own context. PullConsumer does not call consume hooks: the application
// decides what consuming a pulled message means.
type ConsumeHook interface {
	OnConsume(ctx context.Context, m *MessageExt) context.Context
}

// ConsumeDoneHook is called once for every message handed to the handler
// (see ConsumeHook), when the call ends, with the message's settlement:
// ConsumeRetryLater after its RetryAfter, ConsumeDeadLetter after its
// DeadLetter, else the batch's result (a panic or a call past the consume
// timeout counts as ConsumeRetryLater). ctx is
// what the ConsumeHooks returned for the message; it may be done by then.
type ConsumeDoneHook interface {
	OnConsumeDone(ctx context.Context, m *MessageExt, r ConsumeResult)
}

// ConnStateHook is told the state of every connection the client makes (to
// a nameserver or a broker, by gRPC address): first the state the
// connection is in as it is made (Idle or Connecting), then every change,
// and Shutdown last, before the client's Close returns. Changes in quick
// succession may be seen as one (the latest state): gRPC reports states,
// not every transition. Calls for one address come from one goroutine, in
// order.
type ConnStateHook interface {
	OnConnState(addr string, s ConnState)
}

// ConnState is the state of a connection (gRPC's connectivity states).
type ConnState int

const (
	// ConnIdle: not connected, and not trying to until a call needs it.
	ConnIdle ConnState = iota
	// ConnConnecting: connecting.
	ConnConnecting
	// ConnReady: connected.
	ConnReady
	// ConnTransientFailure: the last attempt failed; the connection retries
	// with backoff.
	ConnTransientFailure
	// ConnShutdown: closed; the last state reported.
	ConnShutdown
)

// String returns the state's name, as gRPC spells it.
func (s ConnState) String() string {
	switch s {
	case ConnIdle:
		return "IDLE"
	case ConnConnecting:
		return "CONNECTING"
	case ConnReady:
		return "READY"
	case ConnTransientFailure:
		return "TRANSIENT_FAILURE"
	case ConnShutdown:
		return "SHUTDOWN"
	}
	return fmt.Sprintf("ConnState(%d)", int(s))
}

func connStateOf(s connectivity.State) ConnState {
	switch s {
	case connectivity.Connecting:
		return ConnConnecting
	case connectivity.Ready:
		return ConnReady
	case connectivity.TransientFailure:
		return ConnTransientFailure
	case connectivity.Shutdown:
		return ConnShutdown
	}
	return ConnIdle
}

// hookSet is Config.Hooks sorted by interface once per client, so that a
// send or a delivery asks no type assertions and, without hooks, costs a
// length check.
type hookSet struct {
	send        []SendHook
	sendDone    []SendDoneHook
	consume     []ConsumeHook
	consumeDone []ConsumeDoneHook
	conn        []ConnStateHook
}

// newHookSet sorts hooks (checked by Config.Validate).
func newHookSet(hooks []Hook) hookSet {
	var s hookSet
	for _, h := range hooks {
		if v, ok := h.(SendHook); ok {
			s.send = append(s.send, v)
		}
		if v, ok := h.(SendDoneHook); ok {
			s.sendDone = append(s.sendDone, v)
		}
		if v, ok := h.(ConsumeHook); ok {
			s.consume = append(s.consume, v)
		}
		if v, ok := h.(ConsumeDoneHook); ok {
			s.consumeDone = append(s.consumeDone, v)
		}
		if v, ok := h.(ConnStateHook); ok {
			s.conn = append(s.conn, v)
		}
	}
	return s
}

// validateHook says what is wrong with Config.Hooks[i], if anything.
func validateHook(i int, h Hook) error {
	switch h.(type) {
	case nil:
		return fmt.Errorf("client: Config.Hooks[%d] is nil: %w", i, ErrInvalidArgument)
	case SendHook, SendDoneHook, ConsumeHook, ConsumeDoneHook, ConnStateHook:
		return nil
	}
	names := []string{"SendHook", "SendDoneHook", "ConsumeHook", "ConsumeDoneHook", "ConnStateHook"}
	return fmt.Errorf("client: Config.Hooks[%d] (%T) implements none of %s: %w", i, h, strings.Join(names, ", "), ErrInvalidArgument)
}

// The producer's call sites: Send, SendBatch and SendOneway defer the
// end with what the start returns, SendAsync wraps its callback. Without
// hooks they allocate nothing: the named results reach the deferred end
// by pointer, which it does not keep.

// sendStart runs the SendHooks for m and returns the context for its
// SendDoneHooks. A nil message, which the send refuses, is not shown to
// hooks.
func (s *hookSet) sendStart(ctx context.Context, m *Message) context.Context {
	if m == nil {
		return ctx
	}
	for _, h := range s.send {
		if next := h.OnSend(ctx, m); next != nil {
			ctx = next
		}
	}
	return ctx
}

// sendEnd runs the SendDoneHooks for m with the outcome *r (nil: none, as
// for SendOneway) and *err.
func (s *hookSet) sendEnd(ctx context.Context, m *Message, r *SendResult, err *error) {
	if len(s.sendDone) == 0 || m == nil {
		return
	}
	var res SendResult
	if r != nil && *err == nil {
		res = *r
	}
	for _, h := range s.sendDone {
		h.OnSendDone(ctx, m, res, *err)
	}
}

// batchStart runs the SendHooks for every message of a SendBatch and
// returns the contexts for their SendDoneHooks (nil without hooks).
func (s *hookSet) batchStart(ctx context.Context, msgs []*Message) []context.Context {
	if len(s.send) == 0 && len(s.sendDone) == 0 {
		return nil
	}
	ctxs := make([]context.Context, len(msgs))
	for i, m := range msgs {
		ctxs[i] = s.sendStart(ctx, m)
	}
	return ctxs
}

// batchEnd runs the SendDoneHooks for every message of a SendBatch with
// the batch's outcome: *res, one result per message, unless *err.
func (s *hookSet) batchEnd(ctxs []context.Context, msgs []*Message, res *[]SendResult, err *error) {
	if len(s.sendDone) == 0 {
		return
	}
	for i, m := range msgs {
		var r SendResult
		if *err == nil && i < len(*res) {
			r = (*res)[i]
		}
		s.sendEnd(ctxs[i], m, &r, err)
	}
}

// asyncStart runs the SendHooks for a SendAsync of m and returns cb
// wrapped to run the SendDoneHooks before it (cb itself without hooks).
func (s *hookSet) asyncStart(ctx context.Context, m *Message, cb SendCallback) SendCallback {
	if len(s.send) == 0 && len(s.sendDone) == 0 {
		return cb
	}
	hctx := s.sendStart(ctx, m)
	return func(m *Message, r SendResult, err error) {
		s.sendEnd(hctx, m, &r, &err)
		cb(m, r, err)
	}
}

// consumeCall runs the consume hooks around one handler call. Its zero
// value, and the value of a consumer without consume hooks, does nothing
// and allocates nothing.
type consumeCall struct {
	s    *hookSet
	one  context.Context   // the context of a batch of one
	ctxs []context.Context // the contexts of a larger batch
}

// start runs the ConsumeHooks for msgs and returns the handler's context:
// for a batch of one, the context the hooks returned; else ctx.
func (c *consumeCall) start(s *hookSet, ctx context.Context, msgs []*MessageExt) context.Context {
	if len(s.consume) == 0 && len(s.consumeDone) == 0 {
		return ctx
	}
	c.s = s
	if len(msgs) == 1 {
		c.one = s.onConsume(ctx, msgs[0])
		return c.one
	}
	c.ctxs = make([]context.Context, len(msgs))
	for i, m := range msgs {
		c.ctxs[i] = s.onConsume(ctx, m)
	}
	return ctx
}

// done runs the ConsumeDoneHooks for msgs with the call's final result
// (*res: a deferred done sees what the call's own recovery made of it).
func (c *consumeCall) done(msgs []*MessageExt, res *ConsumeResult) {
	if c.s == nil {
		return
	}
	for i, m := range msgs {
		ctx := c.one
		if c.ctxs != nil {
			ctx = c.ctxs[i]
		}
		r := m.settledAs(*res) // a message settled apart reports its own settlement
		for _, h := range c.s.consumeDone {
			h.OnConsumeDone(ctx, m, r)
		}
	}
}

func (s *hookSet) onConsume(ctx context.Context, m *MessageExt) context.Context {
	for _, h := range s.consume {
		if next := h.OnConsume(ctx, m); next != nil {
			ctx = next
		}
	}
	return ctx
}

// watchConn reports cc's states to the ConnStateHooks until it is shut
// down (see ConnStateHook); the caller owns the goroutine it runs on.
func (s *hookSet) watchConn(addr string, cc *grpc.ClientConn) {
	last := ConnState(-1)
	for {
		st := cc.GetState()
		if cs := connStateOf(st); cs != last {
			last = cs
			for _, h := range s.conn {
				h.OnConnState(addr, cs)
			}
		}
		if st == connectivity.Shutdown {
			return
		}
		// Returns once the state moves from st: Close moves it to Shutdown.
		cc.WaitForStateChange(context.Background(), st)
	}
}
