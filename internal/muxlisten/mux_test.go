package muxlisten_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/internal/muxlisten"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// remotingFrame is a small remoting frame's first bytes.
var remotingFrame = []byte{0, 0, 0, 0x1c, 0, 0, 0, 0x18}

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want muxlisten.Protocol
	}{
		{"HTTP/2 preface", []byte(h2Preface), muxlisten.HTTP2},
		{"remoting frame", remotingFrame, muxlisten.Remoting},
		{"remoting at the 16 MiB limit", []byte{1, 0, 0, 0}, muxlisten.Remoting},
		{"HTTP/1 GET", []byte("GET /metrics HTTP/1.1\r\n"), muxlisten.HTTP1},
		{"HTTP/1 POST", []byte("POST / HTTP/1.1\r\n"), muxlisten.HTTP1},
		{"HTTP/1 DELETE", []byte("DELETE /x HTTP/1.1\r\n"), muxlisten.HTTP1},
		{"TLS client hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00}, muxlisten.TLS},
		{"text", []byte("hello"), muxlisten.Unknown},
		{"too short", []byte("PRI"), muxlisten.Unknown},
		{"empty", nil, muxlisten.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, muxlisten.Detect(tt.b))
		})
	}
	assert.Equal(t, "RocketMQ remoting", muxlisten.Remoting.String())
	assert.Equal(t, "Protocol(99)", muxlisten.Protocol(99).String())
}

// Detect never panics and looks at the first PeekLen bytes only.
func FuzzDetect(f *testing.F) {
	for _, seed := range [][]byte{[]byte(h2Preface), remotingFrame, []byte("GET / HTTP/1.1"), {0x16, 3, 1}, {}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := muxlisten.Detect(b)
		if len(b) >= muxlisten.PeekLen {
			assert.Equal(t, p, muxlisten.Detect(append(b[:muxlisten.PeekLen:muxlisten.PeekLen], 'x')))
		} else {
			assert.Equal(t, muxlisten.Unknown, p)
		}
	})
}

// startMux serves a Mux on a loopback listener with an HTTP/2 and a
// remoting listener; Close runs at cleanup.
func startMux(t *testing.T, cfg muxlisten.Config) (m *muxlisten.Mux, h2, rem net.Listener) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serveMux(t, lis, cfg)
}

func serveMux(t *testing.T, lis net.Listener, cfg muxlisten.Config) (m *muxlisten.Mux, h2, rem net.Listener) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	m = muxlisten.New(lis, cfg)
	h2, rem = m.Listener(muxlisten.HTTP2), m.Listener(muxlisten.Remoting, muxlisten.Unknown)
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, m.Close())
		require.NoError(t, <-served)
	})
	return m, h2, rem
}

// accept accepts one connection from l within 10 s.
func accept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	select {
	case c, ok := <-got:
		require.True(t, ok, "accept failed")
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("nothing accepted")
		return nil
	}
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// readN reads n bytes within 10 s.
func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	require.NoError(t, err)
	return b
}

// Each connection goes to its protocol's listener with every byte it sent,
// also when its first bytes trickle in one at a time.
func TestRoutesByFirstBytes(t *testing.T) {
	m, h2, rem := startMux(t, muxlisten.Config{})

	c := dial(t, m.Addr())
	_, err := c.Write([]byte(h2Preface))
	require.NoError(t, err)
	assert.Equal(t, h2Preface, string(readN(t, accept(t, h2), len(h2Preface))))

	c = dial(t, m.Addr())
	for _, b := range remotingFrame {
		_, err := c.Write([]byte{b})
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // separate segments
	}
	s := accept(t, rem)
	assert.Equal(t, remotingFrame, readN(t, s, len(remotingFrame)))
	_, err = s.Write([]byte("pong")) // the connection works both ways
	require.NoError(t, err)
	assert.Equal(t, "pong", string(readN(t, c, 4)))

	c = dial(t, m.Addr())
	_, err = c.Write([]byte("garbage"))
	require.NoError(t, err)
	assert.Equal(t, "garbage", string(readN(t, accept(t, rem), 7)), "Unknown goes where it is routed")
}

// A protocol without a listener, and a peer that sends nothing in time,
// are closed.
func TestClosesUnroutedAndSilent(t *testing.T) {
	m, _, _ := startMux(t, muxlisten.Config{Timeout: 50 * time.Millisecond})
	for _, first := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), nil, {0}} {
		c := dial(t, m.Addr())
		if first != nil {
			_, err := c.Write(first)
			require.NoError(t, err)
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err := c.Read(make([]byte, 1))
		assertClosed(t, err)
	}
}

// assertClosed checks that a read ended because the peer closed (EOF, or
// a reset when the peer left bytes unread), not by a deadline.
func assertClosed(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	require.Error(t, err)
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "closed by the peer, not by the read deadline: %v", err)
}

// recordingListener records, in order, each connection its Accept returns
// ("accept 1", "accept 2", ...) and each close of one ("close 1"). The
// connections stay *net.TCPConn underneath (syscall.Conn), so the Mux
// peeks at them as at any other.
type recordingListener struct {
	net.Listener
	mu     sync.Mutex
	n      int
	events []string
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	l.events = append(l.events, fmt.Sprint("accept ", l.n))
	return &recordedConn{TCPConn: c.(*net.TCPConn), l: l, n: l.n}, nil
}

func (l *recordingListener) record(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *recordingListener) Events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// waitAccepted waits until the Mux has accepted n connections.
func (l *recordingListener) waitAccepted(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.n >= n
	}, 10*time.Second, time.Millisecond)
}

type recordedConn struct {
	*net.TCPConn
	l    *recordingListener
	n    int
	once sync.Once
}

func (c *recordedConn) Close() error {
	c.once.Do(func() { c.l.record(fmt.Sprint("close ", c.n)) })
	return c.TCPConn.Close()
}

func recordingMux(t *testing.T, cfg muxlisten.Config) (*recordingListener, *muxlisten.Mux, net.Listener, net.Listener) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rl := &recordingListener{Listener: lis}
	m, h2, rem := serveMux(t, rl, cfg)
	return rl, m, h2, rem
}

// With MaxPending connections waiting for their first bytes, the Mux
// accepts no more until one of them is done.
func TestMaxPendingPausesAccepting(t *testing.T) {
	rl, m, _, rem := recordingMux(t, muxlisten.Config{Timeout: 300 * time.Millisecond, MaxPending: 1})
	silent := dial(t, m.Addr())
	rl.waitAccepted(t, 1)
	c := dial(t, m.Addr())
	_, err := c.Write(remotingFrame)
	require.NoError(t, err)
	accept(t, rem)
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = silent.Read(make([]byte, 1))
	assertClosed(t, err)
	events := rl.Events()
	require.Contains(t, events, "close 1")
	require.Contains(t, events, "accept 2")
	assert.Less(t, slices.Index(events, "close 1"), slices.Index(events, "accept 2"),
		"the silent connection was closed before the next one was accepted: %q", events)
}

// Closing one protocol's listener closes that protocol's connections;
// the others still flow. Close ends Serve and every listener's Accept.
func TestCloseListenerAndMux(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rl := &recordingListener{Listener: lis}
	m := muxlisten.New(rl, muxlisten.Config{})
	h2, rem := m.Listener(muxlisten.HTTP2), m.Listener(muxlisten.Remoting)
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()

	require.NoError(t, h2.Close())
	_, err = h2.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	c := dial(t, m.Addr())
	_, err = c.Write([]byte(h2Preface))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Read(make([]byte, 1))
	assertClosed(t, err)

	c = dial(t, m.Addr())
	_, err = c.Write(remotingFrame)
	require.NoError(t, err)
	accept(t, rem)

	silent := dial(t, m.Addr()) // waiting for its first bytes when the Mux closes
	rl.waitAccepted(t, 3)
	require.NoError(t, m.Close())
	require.NoError(t, <-served)
	_, err = rem.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = silent.Read(make([]byte, 1))
	assertClosed(t, err)
	assert.ErrorIs(t, m.Close(), net.ErrClosed)
	_, err = net.Dial("tcp", m.Addr().String())
	assert.Error(t, err, "the port is closed")
}

// A listener that fails ends Serve with its error and closes the
// per-protocol listeners.
func TestServeEndsWhenTheListenerFails(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m := muxlisten.New(lis, muxlisten.Config{})
	rem := m.Listener(muxlisten.Remoting)
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	lis.Close()
	assert.ErrorIs(t, <-served, net.ErrClosed)
	_, err = rem.Accept()
	assert.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, m.Close())
}

// pipeListener hands out net.Pipe connections, which have no file
// descriptor: the Mux reads their first bytes and replays them.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func (p *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}
func (p *pipeListener) Close() error   { close(p.done); return nil }
func (p *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func TestReplaysWithoutAFileDescriptor(t *testing.T) {
	pl := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	_, h2, _ := serveMux(t, pl, muxlisten.Config{})
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	pl.conns <- server
	go func() { _, _ = client.Write([]byte(h2Preface)) }()
	assert.Equal(t, h2Preface, string(readN(t, accept(t, h2), len(h2Preface))))
}
