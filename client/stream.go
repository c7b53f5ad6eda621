package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// errStreamUnimplemented: the broker does not implement SendStream; the
// request was not processed and goes by unary Send instead.
var errStreamUnimplemented = fmt.Errorf("client: SendStream: %w", ErrUnimplemented)

// streamCloseGrace is how long Close waits for a broker to answer what was
// sent on a stream (one-way sends included) after closing its send side.
const streamCloseGrace = 2 * time.Second

// brokerSender sends SendRequests to one broker. By default it pipelines
// them on one SendStream: requests carry a request_id, responses are
// matched by it, and any number of requests (from the queue senders of
// every queue of the broker) may be in flight. The stream is opened on
// first use and again after it breaks; a break fails the requests in
// flight as indeterminate. A broker that does not implement SendStream, or
// WithUnarySend, makes it use unary Send calls instead.
type brokerSender struct {
	addr   string
	client gantryv1.MessagingClient
	life   context.Context // ends when the producer closes
	tasks  *group          // runs the streams' receive loops
	log    *slog.Logger
	ids    *atomic.Uint64

	unary atomic.Bool
	sem   chan struct{} // a lock that waits with a context: held to read or replace cur
	cur   *sendStream
}

func newBrokerSender(addr string, client gantryv1.MessagingClient, p *Producer) *brokerSender {
	b := &brokerSender{
		addr: addr, client: client, life: p.c.life, tasks: &p.c.tasks,
		log: p.log.With("broker", addr), ids: &p.ids, sem: make(chan struct{}, 1),
	}
	b.unary.Store(p.opts.unary)
	return b
}

// streamResult is the answer to one request on a stream.
type streamResult struct {
	results []*gantryv1.SendResult
	err     error
}

// largeRequestBytes is the request size (bodies and properties) from which
// a request goes by unary Send even when the stream works: a request the
// broker refuses as too large for its gRPC limit (4 MiB by default) ends
// the stream it came on, which would fail every other request in flight.
const largeRequestBytes = 3 << 20

// roundTrip sends req and waits for its results until ctx ends. Errors are
// definite (*StatusError and others) or *IndeterminateError. size is the
// request's approximate size.
func (b *brokerSender) roundTrip(ctx context.Context, o *outgoing, size int64) ([]*gantryv1.SendResult, error) {
	if !b.unary.Load() && size < largeRequestBytes {
		res, err := b.viaStream(ctx, o)
		if !errors.Is(err, errStreamUnimplemented) {
			return res, err
		}
		b.log.Info("broker does not implement SendStream; using unary Send")
	}
	return b.viaUnary(ctx, o.request())
}

// oneway writes req without waiting for an answer.
func (b *brokerSender) oneway(ctx context.Context, req *gantryv1.SendRequest, size int64) error {
	if !b.unary.Load() && size < largeRequestBytes {
		s, err := b.stream(ctx)
		if err == nil {
			req.RequestId = b.ids.Add(1)
			_, err = s.send(ctx, req.RequestId, req, false)
		}
		if !errors.Is(err, errStreamUnimplemented) {
			return err
		}
	}
	_, err := b.viaUnary(ctx, req)
	return err
}

func (b *brokerSender) viaUnary(ctx context.Context, req *gantryv1.SendRequest) ([]*gantryv1.SendResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // not sent
	}
	req.RequestId = 0
	resp, err := b.client.Send(ctx, req)
	if err != nil {
		return nil, unarySendError(b.addr, err)
	}
	return resp.GetResults(), nil
}

func (b *brokerSender) viaStream(ctx context.Context, o *outgoing) ([]*gantryv1.SendResult, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	o.req.RequestId = b.ids.Add(1)
	ch, err := s.send(ctx, o.req.RequestId, o, true)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.results, r.err
	case <-ctx.Done():
		if s.forget(o.req.RequestId) {
			return nil, &IndeterminateError{Broker: b.addr, Err: ctx.Err()}
		}
		r := <-ch // answered meanwhile
		return r.results, r.err
	}
}

// stream returns the working stream, opening one if there is none.
func (b *brokerSender) stream(ctx context.Context) (*sendStream, error) {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.sem }()
	if b.cur != nil && b.cur.working() {
		return b.cur, nil
	}
	s, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	b.cur = s
	return s, nil
}

// open opens a stream that lives until it breaks or the producer closes;
// ctx bounds only the opening. Nothing has been written when it fails.
func (b *brokerSender) open(ctx context.Context) (*sendStream, error) {
	sctx, cancel := context.WithCancel(b.life)
	stop := context.AfterFunc(ctx, cancel)
	st, err := b.client.SendStream(sctx)
	if !stop() {
		cancel()
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			b.unary.Store(true)
			return nil, errStreamUnimplemented
		}
		return nil, callError("send", b.addr, err, ErrTopicNotFound)
	}
	s := &sendStream{b: b, st: st, cancel: cancel, recvDone: make(chan struct{}), pending: map[uint64]chan streamResult{}}
	if !b.tasks.goFunc(s.recvLoop) {
		cancel()
		return nil, ErrClosed
	}
	return s, nil
}

// close closes the send side of the current stream, waits up to grace for
// the broker to answer what it has, then ends the stream.
func (b *brokerSender) close(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case b.sem <- struct{}{}:
	case <-t.C:
		return // an opener holds it; the producer's context ends the stream
	}
	s := b.cur
	<-b.sem
	if s == nil {
		return
	}
	if s.sendMu.TryLock() { // else a Send is stuck; cancel ends it
		_ = s.st.CloseSend()
		s.sendMu.Unlock()
	}
	select {
	case <-s.recvDone:
	case <-t.C:
	}
	s.cancel()
}

// sendStream is one SendStream and the requests waiting for its answers.
type sendStream struct {
	b        *brokerSender
	st       gantryv1.Messaging_SendStreamClient
	cancel   context.CancelFunc
	recvDone chan struct{}

	sendMu sync.Mutex // serializes Send and CloseSend, which gRPC requires

	mu      sync.Mutex
	pending map[uint64]chan streamResult // by request id
	err     error                        // why the stream broke (definite: for requests not yet written); nil while it works
}

// working reports whether the stream has not broken.
func (s *sendStream) working() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil
}

// send writes req, a *gantryv1.SendRequest or an *outgoing whose request
// id is id. With track it returns the channel its answer comes on;
// without, the answer is dropped. An error means req was not written.
func (s *sendStream) send(ctx context.Context, id uint64, req any, track bool) (<-chan streamResult, error) {
	var ch chan streamResult
	s.mu.Lock()
	if s.err != nil {
		defer s.mu.Unlock()
		return nil, s.err
	}
	if track {
		ch = make(chan streamResult, 1)
		s.pending[id] = ch
	}
	s.mu.Unlock()

	// gRPC's Send blocks while the broker does not take data (flow
	// control), and only the stream's end unblocks it: when ctx ends first,
	// the stream is ended, failing its requests in flight as indeterminate.
	s.sendMu.Lock()
	if err := ctx.Err(); err != nil {
		s.sendMu.Unlock()
		s.forget(id)
		return nil, err // not written
	}
	stop := context.AfterFunc(ctx, s.cancel)
	err := s.st.SendMsg(req)
	stop()
	s.sendMu.Unlock()
	if err == nil {
		return ch, nil
	}
	s.forget(id)
	if errors.Is(err, io.EOF) { // the stream ended; Recv has its status
		select {
		case <-s.recvDone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.err
	}
	return nil, s.definite(err)
}

// forget drops the wait for request id and reports whether it was still
// waiting (no answer was or will be delivered).
func (s *sendStream) forget(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[id]
	delete(s.pending, id)
	return ok
}

// recvLoop delivers answers until the stream ends.
func (s *sendStream) recvLoop() {
	defer close(s.recvDone)
	for {
		resp, err := s.st.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.deliver(resp)
	}
}

func (s *sendStream) deliver(resp *gantryv1.SendResponse) {
	s.mu.Lock()
	ch, ok := s.pending[resp.GetRequestId()]
	delete(s.pending, resp.GetRequestId())
	s.mu.Unlock()
	switch {
	case !ok:
		if e := resp.GetError(); e != nil {
			s.b.log.Debug("one-way send failed", "err", streamError(s.b.addr, e))
		}
	case resp.GetError() != nil:
		ch <- streamResult{err: streamError(s.b.addr, resp.GetError())}
	default:
		ch <- streamResult{results: resp.GetResults()}
	}
}

// definite converts the error that ended the stream to the error of a
// request that was not written.
func (s *sendStream) definite(err error) error {
	if errors.Is(err, io.EOF) {
		return newStatusError("send", s.b.addr, status.New(codes.Unavailable, "send stream closed by the broker"), ErrTopicNotFound)
	}
	if status.Code(err) == codes.Unimplemented {
		return errStreamUnimplemented
	}
	return callError("send", s.b.addr, err, ErrTopicNotFound)
}

// fail marks the stream broken and fails the requests in flight: they were
// written, so they are indeterminate, unless the broker does not implement
// the stream at all.
func (s *sendStream) fail(err error) {
	s.cancel()
	def := s.definite(err)
	inflight := error(&IndeterminateError{Broker: s.b.addr, Err: def})
	if errors.Is(def, errStreamUnimplemented) {
		s.b.unary.Store(true)
		inflight = def
	}
	s.mu.Lock()
	s.err = def
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, ch := range pending {
		ch <- streamResult{err: inflight}
	}
}
