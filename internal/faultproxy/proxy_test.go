package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a line server: it greets each connection with "hello\n",
// answers every line with "echo: <line>\n" and records the lines it got.
type server struct {
	lis   net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	lines []string
	conns []net.Conn
}

func newServer(t *testing.T) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &server{lis: lis}
	s.wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		lis.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *server) serve(c net.Conn) {
	defer c.Close()
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		return
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		s.mu.Unlock()
		if _, err := io.WriteString(c, "echo: "+sc.Text()+"\n"); err != nil {
			return
		}
	}
}

func (s *server) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func startProxy(t *testing.T, s *server) *Proxy {
	t.Helper()
	p, err := Start(Config{Target: s.lis.Addr().String()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

// client is a connection through the proxy with a line reader.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, r: bufio.NewReader(c)}
}

// readLine reads a line within d; "" and the error on failure.
func (c *client) readLine(d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return line[:len(line)-1], nil
}

// dialAndRead connects through p and reads a line: the error of whichever
// fails (a reset can come before connect returns).
func dialAndRead(p *Proxy) error {
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = (&client{Conn: c, r: bufio.NewReader(c)}).readLine(time.Second)
	return err
}

func (c *client) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(c, line+"\n")
	require.NoError(t, err)
}

func TestPass(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	line, err := c.readLine(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "hello", line)
	c.send(t, "a")
	line, err = c.readLine(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "echo: a", line)
	// A pump counts bytes after its write returns, which can be after the
	// peer already read them and answered.
	want := Stats{Accepted: 1, BytesUp: 2, BytesDown: int64(len("hello\necho: a\n"))}
	assert.Eventually(t, func() bool { return p.Stats() == want }, 2*time.Second, time.Millisecond,
		"stats: %+v", p.Stats())
}

func TestLatency(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	_, err := c.readLine(time.Second)
	require.NoError(t, err)
	p.Set(Fault{Latency: 50 * time.Millisecond})
	start := time.Now()
	c.send(t, "slow")
	line, err := c.readLine(2 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, "echo: slow", line)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "one delay each way")
}

// A blackhole holds bytes both ways without closing anything; healing
// delivers them.
func TestBlackholeHoldsThenHeals(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	_, err := c.readLine(time.Second)
	require.NoError(t, err)
	p.Set(Fault{Mode: Blackhole})
	c.send(t, "held")
	_, err = c.readLine(100 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Empty(t, s.got(), "the request must not reach the server")
	p.Set(Fault{})
	line, err := c.readLine(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "echo: held", line)
}

// Dropping responses lets requests through: the server acts, the client
// hears nothing until the fault heals.
func TestDropResponses(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	_, err := c.readLine(time.Second)
	require.NoError(t, err)
	p.Set(Fault{Mode: DropResponses})
	c.send(t, "acted")
	require.Eventually(t, func() bool { return len(s.got()) == 1 }, time.Second, time.Millisecond)
	_, err = c.readLine(100 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	p.Set(Fault{})
	line, err := c.readLine(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "echo: acted", line)
}

// Dropping requests is the other one-way partition: what the server sends
// arrives, what the client sends waits.
func TestDropRequests(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	p.Set(Fault{Mode: DropRequests})
	c := dial(t, p)
	line, err := c.readLine(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "hello", line)
	c.send(t, "waits")
	_, err = c.readLine(100 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Empty(t, s.got())
}

func TestDropClosesConnections(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	_, err := c.readLine(time.Second)
	require.NoError(t, err)
	p.Set(Fault{Mode: Drop})
	_, err = c.readLine(time.Second)
	require.ErrorIs(t, err, io.EOF)
	c2 := dial(t, p)
	_, err = c2.readLine(time.Second)
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, int64(1), p.Stats().Refused)
}

func TestResetResetsConnections(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	_, err := c.readLine(time.Second)
	require.NoError(t, err)
	p.Set(Fault{Mode: Reset})
	_, err = c.readLine(time.Second)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	err = dialAndRead(p)
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "%v", err)

	p.Set(Fault{}) // new connections work again
	c3 := dial(t, p)
	line, err := c3.readLine(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "hello", line)
}

// A client closing its side half-closes the server's; the server's answer
// to the last request still arrives.
func TestHalfClose(t *testing.T) {
	s := newServer(t)
	p := startProxy(t, s)
	c := dial(t, p)
	c.send(t, "last")
	require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
	rest, err := io.ReadAll(c.r)
	require.NoError(t, err)
	assert.Equal(t, "hello\necho: last\n", string(rest))
}

func TestTargetDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	p, err := Start(Config{Target: addr})
	require.NoError(t, err)
	defer p.Close()
	require.Error(t, dialAndRead(p))
	require.Eventually(t, func() bool { return p.Stats().Refused == 1 }, time.Second, time.Millisecond)
}

func TestConfigAndNames(t *testing.T) {
	_, err := Start(Config{})
	require.ErrorContains(t, err, "Target")
	assert.Equal(t, "drop-responses+10ms", Fault{Mode: DropResponses, Latency: 10 * time.Millisecond}.String())
	assert.Equal(t, "Mode(9)", Mode(9).String())
}

// Close ends held connections too (goleak checks the goroutines).
func TestCloseWithHeldConnections(t *testing.T) {
	s := newServer(t)
	p, err := Start(Config{Target: s.lis.Addr().String()})
	require.NoError(t, err)
	c := dial(t, p)
	_, err = c.readLine(time.Second)
	require.NoError(t, err)
	p.Set(Fault{Mode: Blackhole})
	c.send(t, "x")
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = c.readLine(time.Second)
	require.Error(t, err)
}
