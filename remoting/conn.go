package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// connIDs numbers every connection of the process, server and client side.
var connIDs atomic.Uint64

// Conn is one remoting connection, accepted by a Server or dialed by a
// Client. It reads frames in one goroutine, runs each request's handler on
// a worker goroutine (at most Config.MaxConcurrentPerConn at once; an idle
// worker takes the next request, so that a busy connection does not start
// a goroutine, and grow its stack, per request), writes every frame whole,
// and matches responses to the requests this side sent with Invoke. Frames
// written while another write is in progress are gathered and go out
// together in the next write: under load one write system call carries
// many frames. Its methods are safe for concurrent use.
type Conn struct {
	id    uint64
	nc    net.Conn
	cfg   Config
	h     Handler
	log   *slog.Logger
	stats *counters

	ctx    context.Context // canceled, with the reason, when the connection closes
	cancel context.CancelCauseFunc

	sem      chan struct{} // a slot per running handler
	jobs     chan request  // requests for idle workers
	handlers sync.WaitGroup

	held  atomic.Int64  // bytes of frames being read and of requests being handled
	freed chan struct{} // capacity 1: held went down

	wmu      sync.Mutex // guards wbuf, wspare and flushing
	wbuf     []byte     // frames waiting for the next write
	wspare   []byte     // the buffer of the last write, for reuse
	flushing bool       // a writer is writing; frames added meanwhile go out with its next write

	mu       sync.Mutex
	pending  map[int32]chan *Command // Invoke's waiters, by opaque
	onClose  []func()
	finished bool // the close hooks ran

	nextOpaque atomic.Int32
	done       chan struct{}
}

func newConn(parent context.Context, nc net.Conn, cfg Config, h Handler, stats *counters) *Conn {
	c := &Conn{
		id:      connIDs.Add(1),
		nc:      nc,
		cfg:     cfg,
		h:       h,
		stats:   stats,
		sem:     make(chan struct{}, cfg.MaxConcurrentPerConn),
		jobs:    make(chan request),
		freed:   make(chan struct{}, 1),
		pending: make(map[int32]chan *Command),
		done:    make(chan struct{}),
	}
	c.log = cfg.Logger.With("component", "remoting", "conn", c.id, "remote", nc.RemoteAddr().String())
	c.ctx, c.cancel = context.WithCancelCause(parent)
	return c
}

// closeWith starts closing the connection for cause (the first cause
// sticks): handlers' context is canceled, and the socket is closed, which
// ends the read loop.
func (c *Conn) closeWith(cause error) {
	c.cancel(cause)
	c.nc.Close()
}

// ID is the connection's number, unique in the process.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is this side's address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// String names the connection for logs and registries: "remoting-ID-ADDR".
func (c *Conn) String() string {
	return "remoting-" + strconv.FormatUint(c.id, 10) + "-" + c.nc.RemoteAddr().String()
}

// Context is canceled when the connection starts closing; handlers get it
// (or a context derived from it).
func (c *Conn) Context() context.Context { return c.ctx }

// Done is closed once the connection is closed, every handler of it has
// returned, and its OnClose functions have run.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection closed (ErrClosed when this side closed it,
// io.EOF when the peer did), or nil while it is open.
func (c *Conn) Err() error { return context.Cause(c.ctx) }

// Close starts closing the connection and returns at once (a handler may
// call it); Done reports the end.
func (c *Conn) Close() error {
	c.closeWith(ErrClosed)
	return nil
}

// OnClose arranges for f to run once the connection is closed and all its
// handlers have returned, so nothing a handler registers can outlive it.
// On a connection already closed, f runs at once, in the caller.
func (c *Conn) OnClose(f func()) {
	c.mu.Lock()
	if !c.finished {
		c.onClose = append(c.onClose, f)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	f()
}

// run serves the connection until it closes, then joins its handlers and
// runs its close hooks. The connection's owner runs it in a goroutine.
func (c *Conn) run() {
	c.stats.connsOpen.Add(1)
	defer c.stats.connsOpen.Add(-1)
	c.log.Debug("connection open")
	err := c.readLoop()
	byThisSide := c.ctx.Err() != nil
	c.closeWith(err)
	c.logEnd(err, byThisSide)
	c.handlers.Wait()
	c.mu.Lock()
	hooks := c.onClose
	c.onClose, c.finished = nil, true
	c.mu.Unlock()
	for _, f := range hooks {
		c.runHook(f)
	}
	close(c.done)
}

func (c *Conn) runHook(f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("OnClose function panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// logEnd logs why the connection ended: a malformed frame at Warn, the
// usual ends (EOF, idle, closed by this side) at Debug.
func (c *Conn) logEnd(readErr error, byThisSide bool) {
	var ne net.Error
	switch {
	case errors.Is(readErr, ErrMalformed), errors.Is(readErr, ErrFrameTooLarge):
		c.stats.malformed.Add(1)
		c.log.Warn("closing connection: malformed frame", "err", readErr)
	case errors.Is(readErr, ErrBusy):
		c.log.Warn("closing connection: a frame was refused and cannot be answered", "err", readErr)
	case byThisSide:
		c.log.Debug("connection closed", "reason", context.Cause(c.ctx))
	case errors.Is(readErr, io.EOF):
		c.log.Debug("connection closed by peer")
	case errors.As(readErr, &ne) && ne.Timeout():
		c.log.Debug("closing idle connection", "idle", c.cfg.IdleTimeout)
	default:
		c.log.Debug("connection closed", "reason", readErr)
	}
}

// request is a request read, and the bytes its frame holds (given back
// once it was answered).
type request struct {
	cmd  *Command
	held int64
}

// readLoop reads frames until the connection fails or closes, delivering
// responses and starting a handler per request. The bytes a frame holds
// are bounded per connection and per server (Config.MaxBufferedBytesPerConn,
// MaxBufferedBytes).
func (c *Conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 16<<10)
	for {
		if err := c.setIdleDeadline(); err != nil {
			return err
		}
		r, err := c.readRequest(br)
		if err != nil {
			return err
		}
		if r.cmd == nil { // refused, or a response delivered
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			c.give(r.held)
			return context.Cause(c.ctx)
		}
		select {
		case c.jobs <- r: // an idle worker took it
		default:
			c.handlers.Go(func() { c.worker(r) })
		}
	}
}

func (c *Conn) setIdleDeadline() error {
	if c.cfg.IdleTimeout > 0 {
		return c.nc.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
	}
	return nil
}

// readRequest reads the next frame once the connection has room for it.
// A response is delivered and a frame the server has no room for is
// refused: both leave r.cmd nil.
func (c *Conn) readRequest(br *bufio.Reader) (r request, err error) {
	h, err := readFrameHead(br, c.cfg.MaxFrameBytes)
	if err != nil {
		return r, err
	}
	if waited, err := c.waitRoom(int64(h.rest())); err != nil {
		return r, err
	} else if waited {
		if err := c.setIdleDeadline(); err != nil {
			return r, err
		}
	}
	buf, err := readFrameRest(br, h, func(n int, first bool) bool {
		ok := c.take(int64(n), first)
		if ok {
			r.held += int64(n)
		}
		return ok
	})
	if errors.Is(err, errNoRoom) {
		return request{}, c.refuse(br, h, buf, r.held)
	}
	if err == nil {
		r.cmd, err = h.decode(buf)
	}
	if err != nil || r.cmd.IsResponse() {
		c.give(r.held)
		if err == nil {
			c.deliver(r.cmd)
		}
		return request{}, err
	}
	return r, nil
}

// workerIdle is how long a handler worker waits for another request
// before it ends.
const workerIdle = 30 * time.Second

// worker serves req, then the requests handed to it while it is idle,
// until it was idle for workerIdle or the connection closes. Each request
// holds a slot of c.sem, and its bytes, until it was answered.
func (c *Conn) worker(req request) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		c.serve(req.cmd)
		c.give(req.held)
		<-c.sem
		idle.Reset(workerIdle)
		select {
		case req = <-c.jobs:
		case <-idle.C:
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// deliver hands a response to the Invoke waiting for it, if any.
func (c *Conn) deliver(resp *Command) {
	c.mu.Lock()
	ch, ok := c.pending[resp.Opaque]
	delete(c.pending, resp.Opaque)
	c.mu.Unlock()
	if !ok {
		c.stats.unmatched.Add(1)
		c.log.Debug("dropping a response that matches no request", "code", resp.ResponseCode(), "opaque", resp.Opaque)
		return
	}
	ch <- resp // buffered: never blocks
}

// serve handles one request and writes its response, if any.
func (c *Conn) serve(req *Command) {
	c.stats.requests.Add(1)
	c.stats.inFlight.Add(1)
	defer c.stats.inFlight.Add(-1)
	if c.log.Enabled(c.ctx, slog.LevelDebug) {
		c.log.Debug("request", "code", req.RequestCode(), "opaque", req.Opaque)
	}
	resp := c.call(req)
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	err := c.write(c.ctx, resp)
	if errors.Is(err, errUnwritable) {
		c.log.Error("response cannot be encoded", "code", req.RequestCode(), "err", err)
		err = c.write(c.ctx, ErrorResponse(req, ResSystemError, "Gantry could not encode the response to %s: %v", req.RequestCode(), err))
	}
	if err != nil {
		c.log.Debug("response not sent", "code", req.RequestCode(), "opaque", req.Opaque, "err", err)
	}
}

// call runs the handler; a panic is logged and answered with SYSTEM_ERROR.
func (c *Conn) call(req *Command) (resp *Command) {
	defer func() {
		if p := recover(); p != nil {
			c.stats.panics.Add(1)
			c.log.Error("handler panicked", "code", req.RequestCode(), "opaque", req.Opaque, "panic", p, "stack", string(debug.Stack()))
			resp = ErrorResponse(req, ResSystemError, "Gantry failed serving %s: panic: %v", req.RequestCode(), p)
		}
	}()
	return c.h.ServeRemoting(c.ctx, c, req)
}

// errUnwritable marks a command that cannot be encoded or is over the
// frame limit; the connection is still usable.
var errUnwritable = errors.New("remoting: command cannot be written")

// maxWriteBuf is the largest write buffer kept for reuse.
const maxWriteBuf = 256 << 10

// write sends cmd as one frame. The frame joins the frames waiting to be
// written; if no other write is in progress, this call writes them all
// (and whatever is added meanwhile) before it returns, else the write in
// progress takes it along and write returns at once. The writing call's
// ctx deadline, if earlier than WriteTimeout's, bounds its writes. A
// failed write closes the connection (part of a frame may have gone
// out), which fails every Invoke waiting on it.
func (c *Conn) write(ctx context.Context, cmd *Command) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.ctx.Err() != nil {
		return c.closedErr()
	}
	c.wmu.Lock()
	start := len(c.wbuf)
	buf, err := cmd.appendFrameHead(c.wbuf)
	if err != nil {
		c.wbuf = buf[:start]
		c.wmu.Unlock()
		return fmt.Errorf("%w: %w", errUnwritable, err)
	}
	if size := int64(len(buf) - start + len(cmd.Body)); size > c.cfg.MaxFrameBytes {
		c.wbuf = buf[:start]
		c.wmu.Unlock()
		return fmt.Errorf("%w: %w: %d bytes, limit %d", errUnwritable, ErrFrameTooLarge, size, c.cfg.MaxFrameBytes)
	}
	c.wbuf = append(buf, cmd.Body...)
	if c.flushing {
		c.wmu.Unlock()
		return nil
	}
	c.flushing = true
	for len(c.wbuf) > 0 && err == nil {
		out := c.wbuf
		c.wbuf = c.wspare[:0]
		c.wmu.Unlock()
		if err = c.nc.SetWriteDeadline(c.writeDeadline(ctx)); err == nil {
			_, err = c.nc.Write(out)
		}
		c.wmu.Lock()
		c.wspare = nil
		if cap(out) <= maxWriteBuf {
			c.wspare = out[:0]
		}
	}
	c.flushing = false
	if err != nil {
		c.wbuf = c.wbuf[:0]
	}
	c.wmu.Unlock()
	if err != nil {
		err = fmt.Errorf("remoting: write to %s: %w", c.nc.RemoteAddr(), err)
		c.closeWith(err)
		return err
	}
	return nil
}

func (c *Conn) writeDeadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if c.cfg.WriteTimeout > 0 {
		if t := time.Now().Add(c.cfg.WriteTimeout); !ok || t.Before(d) {
			return t
		}
	}
	return d // zero when neither bounds the write
}

func (c *Conn) closedErr() error {
	cause := context.Cause(c.ctx)
	if errors.Is(cause, ErrClosed) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrClosed, cause)
}

// Invoke sends req as a request and waits for its response, until ctx ends
// or the connection closes. It sets req's Opaque and clears its response
// and oneway flags; req must not be used by others meanwhile.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	if c.ctx.Err() != nil {
		return nil, c.closedErr()
	}
	req.Opaque = c.nextOpaque.Add(1)
	req.Flag &^= FlagResponse | FlagOneway
	ch := make(chan *Command, 1)
	c.mu.Lock()
	c.pending[req.Opaque] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, req.Opaque)
		c.mu.Unlock()
	}()
	if err := c.write(ctx, req); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("remoting: %s to %s: %w", req.RequestCode(), c.nc.RemoteAddr(), context.Cause(ctx))
	case <-c.ctx.Done():
		return nil, c.closedErr()
	}
}

// Oneway sends req as a oneway request (FlagOneway set: the peer must not
// answer) and returns once it is written. It sets req's Opaque and Flag.
func (c *Conn) Oneway(ctx context.Context, req *Command) error {
	req.Opaque = c.nextOpaque.Add(1)
	req.Flag = req.Flag&^FlagResponse | FlagOneway
	return c.write(ctx, req)
}
