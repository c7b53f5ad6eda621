//go:build linux

package inlinenet_test

// Linux only: the tests name Conn, which Wrap makes on Linux alone.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"

	"github.com/gantrymq/gantry/internal/inlinenet"
)

// pair returns a connection dialed with Dial and the one its listener
// (wrapped by Listen) accepted.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	wl := inlinenet.Listen(l)
	t.Cleanup(func() { wl.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := wl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = inlinenet.Dial(t.Context(), l.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestWrapsTCP(t *testing.T) {
	c, s := pair(t)
	assert.IsType(t, &inlinenet.Conn{}, c)
	assert.IsType(t, &inlinenet.Conn{}, s)
	a, b := net.Pipe() // not TCP: left as it is
	defer a.Close()
	defer b.Close()
	assert.Equal(t, a, inlinenet.Wrap(a))
}

// More than the sockets' buffers hold goes both ways at once: writes
// wait in the poller for room, reads for data, and every byte arrives in
// order.
func TestLargeTransfersBothWays(t *testing.T) {
	c, s := pair(t)
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	echoErr := make(chan error, 1)
	wg.Go(func() { // the server echoes what it reads
		buf := make([]byte, 100_000)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				if _, werr := s.Write(buf[:n]); werr != nil {
					echoErr <- werr
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					echoErr <- err
				}
				s.(interface{ CloseWrite() error }).CloseWrite()
				return
			}
		}
	})
	got := make(chan []byte, 1)
	wg.Go(func() {
		b, _ := io.ReadAll(c)
		got <- b
	})
	for off := 0; off < len(data); off += 3 << 20 { // writes larger than a socket buffer
		n, err := c.Write(data[off:min(len(data), off+3<<20)])
		require.NoError(t, err)
		require.Equal(t, min(len(data)-off, 3<<20), n)
	}
	require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
	wg.Wait()
	select {
	case err := <-echoErr:
		t.Fatal(err)
	default:
	}
	assert.True(t, bytes.Equal(data, <-got), "the echo differs from what was sent")
}

func TestReadDeadlineAndEOF(t *testing.T) {
	c, s := pair(t)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	assert.Equal(t, "read", op.Op)

	require.NoError(t, c.SetReadDeadline(time.Time{}))
	_, err = s.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	b, err := io.ReadAll(c)
	require.NoError(t, err, "an orderly close is io.EOF, which ReadAll ends on")
	assert.Equal(t, "hello", string(b))
	n, err := c.Read(make([]byte, 10))
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err)
}

func TestWriteToClosedPeerFails(t *testing.T) {
	c, s := pair(t)
	s.(*inlinenet.Conn).SetLinger(0) // a reset, not a FIN
	require.NoError(t, s.Close())
	buf := make([]byte, 64<<10)
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the first write may land before the reset is seen
		_, err = c.Write(buf)
		time.Sleep(time.Millisecond)
	}
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	assert.Equal(t, "write", op.Op)
}

func TestClosedConnFails(t *testing.T) {
	c, _ := pair(t)
	require.NoError(t, c.Close())
	_, err := c.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
}

// countingPool is a gRPC buffer pool that counts what is out.
type countingPool struct {
	mu  sync.Mutex
	out int
}

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	p.out++
	p.mu.Unlock()
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) {
	p.mu.Lock()
	p.out--
	p.mu.Unlock()
}

var _ mem.BufferPool = (*countingPool)(nil)

// ReadOnReady takes a buffer only once data is there: a wait holds none.
func TestReadOnReady(t *testing.T) {
	c, s := pair(t)
	rr := c.(interface {
		ReadOnReady(int, mem.BufferPool) (*[]byte, int, error)
	})
	var pool countingPool
	type read struct {
		buf *[]byte
		n   int
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, n, err := rr.ReadOnReady(1024, &pool)
		done <- read{b, n, err}
	}()
	time.Sleep(20 * time.Millisecond) // waiting in the poller
	pool.mu.Lock()
	assert.Zero(t, pool.out, "no buffer is held while waiting")
	pool.mu.Unlock()
	_, err := s.Write([]byte("abc"))
	require.NoError(t, err)
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, "abc", string((*r.buf)[:r.n]))
	assert.Equal(t, 1, pool.out)
	pool.Put(r.buf)

	require.NoError(t, s.Close())
	b, n, err := rr.ReadOnReady(1024, &pool)
	assert.Nil(t, b)
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err)
	assert.Zero(t, pool.out, "the buffer of a read that got nothing went back")
}

func TestDialFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	_, err = inlinenet.Dial(context.Background(), addr)
	require.Error(t, err)
}

func TestConcurrentWritesKeepEachWhole(t *testing.T) {
	c, s := pair(t)
	const writers, each, size = 8, 200, 4096
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			msg := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range each {
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, writers*each*size)
		_, err := io.ReadFull(s, b)
		assert.NoError(t, err)
		got <- b
	}()
	wg.Wait()
	b := <-got
	for i := 0; i < len(b); i += size {
		assert.Equal(t, bytes.Repeat(b[i:i+1], size), b[i:i+size], "write at %d interleaved", i)
	}
}
