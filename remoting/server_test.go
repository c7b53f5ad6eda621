package remoting_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// startServer serves h on a loopback port until the test ends.
func startServer(t *testing.T, cfg remoting.Config, h remoting.Handler) (*remoting.Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := remoting.NewServer(cfg, h)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	t.Cleanup(func() {
		_ = s.Close()
		assert.NoError(t, <-served)
	})
	return s, lis.Addr().String()
}

func dial(t *testing.T, addr string, opts remoting.DialOptions) *remoting.Client {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	cl, err := remoting.Dial(t.Context(), addr, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// rawConn is a bare TCP connection for writing and reading exact frames.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(c *remoting.Command) {
	r.t.Helper()
	frame, err := c.AppendFrame(nil)
	require.NoError(r.t, err)
	_, err = r.nc.Write(frame)
	require.NoError(r.t, err)
}

func (r *rawConn) recv() (*remoting.Command, error) {
	require.NoError(r.t, r.nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	return remoting.ReadFrame(r.br, 0)
}

func (r *rawConn) mustRecv() *remoting.Command {
	r.t.Helper()
	c, err := r.recv()
	require.NoError(r.t, err)
	return c
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

func echo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp
}

// A handler held on one request (a long poll) does not delay another
// request of the same connection.
func TestServerHandlesRequestsOfAConnConcurrently(t *testing.T) {
	release := make(chan struct{})
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		select {
		case <-release:
			return remoting.NewResponse(req, remoting.ResPullNotFound, "")
		case <-ctx.Done():
			return nil
		}
	})
	mux.HandleFunc(remoting.ReqHeartBeat, echo)
	_, addr := startServer(t, remoting.Config{}, mux)
	cl := dial(t, addr, remoting.DialOptions{})

	pulled := make(chan *remoting.Command, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqPullMessage, nil))
		assert.NoError(t, err)
		pulled <- resp
	})
	for i := range 20 {
		resp, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, map[string]string{"i": strconv.Itoa(i)}))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i), resp.Ext("i"))
	}
	select {
	case <-pulled:
		t.Fatal("the pull returned before it was released")
	default:
	}
	close(release)
	wg.Wait()
	assert.Equal(t, int16(remoting.ResPullNotFound), (<-pulled).Code)
}

// Responses go out as their handlers finish, each echoing its request's
// opaque with the response flag.
func TestServerAnswersOutOfOrder(t *testing.T) {
	gates := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqSendMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		<-gates[req.Ext("name")]
		return echo(nil, nil, req)
	})
	_, addr := startServer(t, remoting.Config{}, mux)
	raw := dialRaw(t, addr)
	raw.send(&remoting.Command{Code: 10, Opaque: 100, ExtFields: map[string]string{"name": "first"}})
	raw.send(&remoting.Command{Code: 10, Opaque: 200, ExtFields: map[string]string{"name": "second"}})

	close(gates["second"])
	resp := raw.mustRecv()
	assert.Equal(t, int32(200), resp.Opaque)
	assert.Equal(t, "second", resp.Ext("name"))
	assert.True(t, resp.IsResponse())

	close(gates["first"])
	resp = raw.mustRecv()
	assert.Equal(t, int32(100), resp.Opaque)
	assert.Equal(t, "first", resp.Ext("name"))
	assert.Equal(t, remoting.FlagResponse, resp.Flag)
}

// Many concurrent invocations on one client connection each get their own
// response.
func TestClientMatchesConcurrentResponses(t *testing.T) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqSendMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		n, _ := strconv.Atoi(req.Ext("n"))
		time.Sleep(time.Duration(n%7) * time.Millisecond) // finish in a scrambled order
		return echo(nil, nil, req)
	})
	_, addr := startServer(t, remoting.Config{}, mux)
	cl := dial(t, addr, remoting.DialOptions{})
	var wg sync.WaitGroup
	for n := range 200 {
		wg.Go(func() {
			body := []byte("body-" + strconv.Itoa(n))
			req := remoting.NewRequest(remoting.ReqSendMessage, map[string]string{"n": strconv.Itoa(n)})
			req.Body = body
			resp, err := cl.Invoke(t.Context(), req)
			if assert.NoError(t, err) {
				assert.Equal(t, strconv.Itoa(n), resp.Ext("n"))
				assert.Equal(t, body, resp.Body)
			}
		})
	}
	wg.Wait()
}

func TestServerUnknownCodeIsNotSupported(t *testing.T) {
	_, addr := startServer(t, remoting.Config{}, remoting.NewMux())
	cl := dial(t, addr, remoting.DialOptions{})
	for _, code := range []remoting.RequestCode{remoting.ReqQueryMessage, 9999} {
		resp, err := cl.Invoke(t.Context(), remoting.NewRequest(code, nil))
		require.NoError(t, err)
		assert.Equal(t, int16(remoting.ResRequestCodeNotSupported), resp.Code)
		name := code.Name()
		if name == "" {
			name = "unknown"
		}
		assert.Equal(t, "request code "+strconv.Itoa(int(code))+" ("+name+") is not supported by Gantry", resp.Remark)
	}
}

// A panicking handler is answered SYSTEM_ERROR; the connection and the
// process carry on.
func TestServerRecoversHandlerPanic(t *testing.T) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqSendMessage, func(context.Context, *remoting.Conn, *remoting.Command) *remoting.Command {
		panic("store exploded")
	})
	mux.HandleFunc(remoting.ReqHeartBeat, echo)
	s, addr := startServer(t, remoting.Config{}, mux)
	cl := dial(t, addr, remoting.DialOptions{})

	resp, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqSendMessage, nil))
	require.NoError(t, err)
	assert.Equal(t, int16(remoting.ResSystemError), resp.Code)
	assert.Contains(t, resp.Remark, "SEND_MESSAGE(10)")
	assert.Contains(t, resp.Remark, "panic: store exploded")

	resp, err = cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil))
	require.NoError(t, err)
	assert.Equal(t, int16(remoting.ResSuccess), resp.Code)
	assert.Equal(t, uint64(1), s.Stats().Panics)
}

// A malformed frame closes its connection, answered with nothing; other
// connections are not affected.
func TestServerClosesOnlyTheConnWithAMalformedFrame(t *testing.T) {
	garbage := map[string][]byte{
		"negative length":  prefix(-5, 0),
		"2 GiB claim":      prefix(1<<31-1, 0),
		"header too long":  prefix(8, 100),
		"bad JSON":         append(prefix(8, 4), "{{{{"...),
		"unknown type":     append(prefix(6, 9<<24|2), "{}"...),
		"over frame limit": prefix(64<<10, 0),
	}
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqHeartBeat, echo)
	s, addr := startServer(t, remoting.Config{MaxFrameBytes: 32 << 10}, mux)
	good := dial(t, addr, remoting.DialOptions{})
	var sent uint64
	for name, frame := range garbage {
		t.Run(name, func(t *testing.T) {
			sent++
			bad := dialRaw(t, addr)
			_, err := bad.nc.Write(frame)
			require.NoError(t, err)
			_, err = bad.recv()
			require.ErrorIs(t, err, io.EOF, "closed without an answer")

			resp, err := good.Invoke(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil))
			require.NoError(t, err)
			assert.Equal(t, int16(remoting.ResSuccess), resp.Code)
		})
	}
	waitFor(t, "malformed count", func() bool { return s.Stats().Malformed == sent })
}

// A request with the oneway flag gets no response.
func TestServerDoesNotAnswerOneway(t *testing.T) {
	var handled atomic.Int32
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqUpdateConsumerOffset, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		handled.Add(1)
		return echo(nil, nil, req)
	})
	mux.HandleFunc(remoting.ReqHeartBeat, echo)
	_, addr := startServer(t, remoting.Config{}, mux)
	raw := dialRaw(t, addr)
	raw.send(&remoting.Command{Code: 15, Opaque: 1, Flag: remoting.FlagOneway})
	waitFor(t, "oneway handled", func() bool { return handled.Load() == 1 })
	raw.send(&remoting.Command{Code: 34, Opaque: 2})
	assert.Equal(t, int32(2), raw.mustRecv().Opaque, "the first answer is the heartbeat's")

	// The Go client's "oneway" (flag 0) is answered; the client drops it.
	raw.send(&remoting.Command{Code: 15, Opaque: 3})
	assert.Equal(t, int32(3), raw.mustRecv().Opaque)
}

// The server calls its client: Invoke waits for the client's answer,
// Oneway sends NOTIFY_CONSUMER_IDS_CHANGED with the oneway flag.
func TestServerInitiatedRequests(t *testing.T) {
	conns := make(chan *remoting.Conn, 1)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqHeartBeat, func(_ context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		conns <- c
		return remoting.NewResponse(req, remoting.ResSuccess, "")
	})
	s, addr := startServer(t, remoting.Config{}, mux)

	notified := make(chan *remoting.Command, 1)
	clientMux := remoting.NewMux()
	clientMux.HandleFunc(remoting.ReqGetConsumerStatusFromClient, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.ResSuccess, "")
		resp.Body = []byte(`{"group":"` + req.Ext("group") + `"}`)
		return resp
	})
	clientMux.HandleFunc(remoting.ReqNotifyConsumerIDsChanged, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		notified <- req
		return remoting.NewResponse(req, remoting.ResSuccess, "") // dropped: the request is oneway
	})
	cl := dial(t, addr, remoting.DialOptions{Handler: clientMux})
	_, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil))
	require.NoError(t, err)
	sc := <-conns
	assert.Equal(t, cl.Conn().LocalAddr().String(), sc.RemoteAddr().String())

	resp, err := sc.Invoke(t.Context(), remoting.NewRequest(remoting.ReqGetConsumerStatusFromClient, map[string]string{"group": "CG"}))
	require.NoError(t, err)
	assert.True(t, resp.IsResponse())
	assert.JSONEq(t, `{"group":"CG"}`, string(resp.Body))

	unknown, err := sc.Invoke(t.Context(), remoting.NewRequest(remoting.ReqGetConsumerRunningInfo, nil))
	require.NoError(t, err)
	assert.Equal(t, int16(remoting.ResRequestCodeNotSupported), unknown.Code)

	require.NoError(t, sc.Oneway(t.Context(), remoting.NewRequest(remoting.ReqNotifyConsumerIDsChanged, map[string]string{"consumerGroup": "CG"})))
	req := <-notified
	assert.True(t, req.IsOneway())
	assert.Equal(t, "CG", req.Ext("consumerGroup"))

	// Nothing came back for the oneway: the next exchange is clean.
	_, err = sc.Invoke(t.Context(), remoting.NewRequest(remoting.ReqGetConsumerStatusFromClient, nil))
	require.NoError(t, err)
	assert.Zero(t, s.Stats().UnmatchedResponses)
}

// Invoke gives up when its context ends; a late response is dropped.
func TestInvokeContextAndClose(t *testing.T) {
	release := make(chan struct{})
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		<-release
		return remoting.NewResponse(req, remoting.ResPullNotFound, "")
	})
	mux.HandleFunc(remoting.ReqHeartBeat, echo)
	_, addr := startServer(t, remoting.Config{}, mux)
	cl := dial(t, addr, remoting.DialOptions{})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ReqPullMessage, nil))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	waitFor(t, "late response dropped", func() bool { return cl.Stats().UnmatchedResponses == 1 })
	_, err = cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil))
	require.NoError(t, err)

	require.NoError(t, cl.Close())
	require.ErrorIs(t, cl.Close(), remoting.ErrClosed)
	_, err = cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil))
	require.ErrorIs(t, err, remoting.ErrClosed)
	require.ErrorIs(t, cl.Oneway(t.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil)), remoting.ErrClosed)
}

// A pending Invoke fails when the peer closes the connection.
func TestInvokeFailsWhenThePeerCloses(t *testing.T) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(_ context.Context, c *remoting.Conn, _ *remoting.Command) *remoting.Command {
		c.Close()
		return nil
	})
	_, addr := startServer(t, remoting.Config{}, mux)
	cl := dial(t, addr, remoting.DialOptions{})
	_, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqPullMessage, nil))
	require.ErrorIs(t, err, remoting.ErrClosed)
	require.ErrorIs(t, err, io.EOF)
	<-cl.Conn().Done()
}

// OnClose runs once the connection is closed and its handlers returned;
// registered after that, it runs at once.
func TestConnOnClose(t *testing.T) {
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	conns := make(chan *remoting.Conn, 1)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		c.OnClose(func() { note("closed") })
		conns <- c
		<-ctx.Done()
		note("handler done")
		return nil
	})
	_, addr := startServer(t, remoting.Config{}, mux)
	raw := dialRaw(t, addr)
	raw.send(&remoting.Command{Code: 11, Opaque: 1})
	c := <-conns
	require.NoError(t, c.Err())
	assert.NotZero(t, c.ID())
	raw.nc.Close()
	<-c.Done()
	assert.Equal(t, []string{"handler done", "closed"}, order)
	require.ErrorIs(t, c.Err(), io.EOF)

	ran := false
	c.OnClose(func() { ran = true })
	assert.True(t, ran)
}

// Close stops Serve, cancels handlers' contexts, closes connections and
// returns once every goroutine is gone (goleak checks the rest).
func TestServerCloseJoinsEverything(t *testing.T) {
	started := make(chan struct{}, 10)
	var canceled atomic.Int32
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(ctx context.Context, _ *remoting.Conn, _ *remoting.Command) *remoting.Command {
		started <- struct{}{}
		<-ctx.Done()
		canceled.Add(1)
		return nil
	})
	s, err := remoting.NewServer(remoting.Config{Logger: testLogger(t)}, mux)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()

	var clients []*remoting.Client
	for range 3 {
		cl, err := remoting.Dial(t.Context(), lis.Addr().String(), remoting.DialOptions{})
		require.NoError(t, err)
		clients = append(clients, cl)
		for range 2 {
			go func() { _, _ = cl.Invoke(context.Background(), remoting.NewRequest(remoting.ReqPullMessage, nil)) }()
		}
	}
	for range 6 {
		<-started
	}
	assert.Equal(t, int64(3), s.Stats().ConnsOpen)
	assert.Equal(t, int64(6), s.Stats().InFlight)

	require.NoError(t, s.Close())
	assert.Equal(t, int32(6), canceled.Load(), "every handler returned before Close did")
	require.NoError(t, <-served)
	assert.Equal(t, int64(0), s.Stats().ConnsOpen)
	require.ErrorIs(t, s.Close(), remoting.ErrClosed)
	lis2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.ErrorIs(t, s.Serve(lis2), remoting.ErrClosed)

	for _, cl := range clients {
		<-cl.Conn().Done()
		require.NoError(t, cl.Close())
	}
}

func TestServerClosesIdleConns(t *testing.T) {
	_, addr := startServer(t, remoting.Config{IdleTimeout: 50 * time.Millisecond}, remoting.NewMux())
	raw := dialRaw(t, addr)
	_, err := raw.recv()
	require.ErrorIs(t, err, io.EOF)
}

// At most MaxConcurrentPerConn handlers of a connection run at once; the
// next request waits for a free slot.
func TestServerBoundsConcurrencyPerConn(t *testing.T) {
	release := make(chan struct{})
	var running, peak atomic.Int32
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		running.Add(-1)
		return remoting.NewResponse(req, remoting.ResSuccess, "")
	})
	s, addr := startServer(t, remoting.Config{MaxConcurrentPerConn: 2}, mux)
	raw := dialRaw(t, addr)
	for i := range 5 {
		raw.send(&remoting.Command{Code: 11, Opaque: int32(i)})
	}
	waitFor(t, "two handlers running", func() bool { return running.Load() == 2 })
	time.Sleep(20 * time.Millisecond) // a third would start now if allowed
	assert.Equal(t, int64(2), s.Stats().InFlight)
	close(release)
	for range 5 {
		raw.mustRecv()
	}
	assert.Equal(t, int32(2), peak.Load())
}

// A response over the frame limit is replaced by SYSTEM_ERROR.
func TestServerOversizedResponse(t *testing.T) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqPullMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.ResSuccess, "")
		resp.Body = make([]byte, 8<<10)
		return resp
	})
	_, addr := startServer(t, remoting.Config{MaxFrameBytes: 4 << 10}, mux)
	cl := dial(t, addr, remoting.DialOptions{})
	resp, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqPullMessage, nil))
	require.NoError(t, err)
	assert.Equal(t, int16(remoting.ResSystemError), resp.Code)
	assert.Contains(t, resp.Remark, "frame too large")
}

// Large bodies go out uncopied (writev) and arrive intact.
func TestLargeBodies(t *testing.T) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqSendMessage, echo)
	_, addr := startServer(t, remoting.Config{}, mux)
	cl := dial(t, addr, remoting.DialOptions{})
	for _, size := range []int{0, 1, 32 << 10, 32<<10 + 1, 4 << 20} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i * 7)
		}
		req := remoting.NewRequest(remoting.ReqSendMessage, nil)
		req.Body = body
		resp, err := cl.Invoke(t.Context(), req)
		require.NoError(t, err)
		if size == 0 {
			assert.Empty(t, resp.Body)
		} else {
			assert.Equal(t, body, resp.Body, "size %d", size)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, remoting.Config{}.Validate())
	err := remoting.Config{MaxFrameBytes: 10, MaxConcurrentPerConn: -1}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MaxFrameBytes")
	assert.Contains(t, err.Error(), "MaxConcurrentPerConn")
	_, err = remoting.NewServer(remoting.Config{MaxFrameBytes: 1}, remoting.NewMux())
	require.Error(t, err)
	_, err = remoting.NewServer(remoting.Config{}, nil)
	require.Error(t, err)
	_, err = remoting.Dial(t.Context(), "127.0.0.1:1", remoting.DialOptions{Config: remoting.Config{MaxConcurrentPerConn: -1}})
	require.Error(t, err)
}

func TestMuxRegistrationErrors(t *testing.T) {
	m := remoting.NewMux()
	m.HandleFunc(remoting.ReqHeartBeat, echo)
	assert.Panics(t, func() { m.HandleFunc(remoting.ReqHeartBeat, echo) })
	assert.Panics(t, func() { m.Handle(remoting.ReqSendMessage, nil) })
}

func TestDialFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())
	_, err = remoting.Dial(t.Context(), addr, remoting.DialOptions{})
	require.Error(t, err)
	var opErr *net.OpError
	assert.True(t, errors.As(err, &opErr))
}
