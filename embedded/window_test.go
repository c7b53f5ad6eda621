package embedded_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// One send at a time must not cost PING frames: gRPC's flow-control
// estimator, on unless a window is set, sends one with the first DATA
// frame after each acknowledged one, so every request and every answer
// carried an extra round of frames (internal/grpcbuf.FlowWindow).
func TestOneAtATimeSendsNoPings(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	defer c.Close(context.Background())
	var fromBroker, toBroker frameCounter
	toBroker.skip = len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") // the client's preface
	brokerAddr := c.BrokerAddr()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil || addr != brokerAddr {
			return conn, err
		}
		return &countingConn{Conn: conn, in: &fromBroker, out: &toBroker}, nil
	}
	p, err := client.NewProducer(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)}})
	require.NoError(t, err)
	defer p.Close(context.Background())
	body := make([]byte, 1024)
	const sends = 200
	for range sends {
		_, err := p.Send(t.Context(), &client.Message{Topic: "Pings", Body: body})
		require.NoError(t, err)
	}
	require.NoError(t, p.Close(context.Background()))
	in, out := fromBroker.snapshot(), toBroker.snapshot()
	assert.GreaterOrEqual(t, in.data, sends, "DATA frames from the broker")
	assert.GreaterOrEqual(t, out.data, sends, "DATA frames to the broker")
	assert.Zero(t, in.pings, "PING frames from the broker")
	assert.Zero(t, out.pings, "PING frames from the client")
}

// countingConn counts the HTTP/2 frames read and written.
type countingConn struct {
	net.Conn
	in, out *frameCounter
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n])
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.feed(p[:n])
	return n, err
}

// frameCounter parses one direction of an HTTP/2 connection as it passes
// and counts its DATA frames and its PING frames that are not
// acknowledgements.
type frameCounter struct {
	mu    sync.Mutex
	skip  int    // bytes still to skip: a preface, or the rest of a frame's payload
	hdr   []byte // a frame header read in part
	count frameCounts
}

type frameCounts struct{ data, pings int }

const (
	frameData = 0x0
	framePing = 0x6
	flagAck   = 0x1
)

func (f *frameCounter) feed(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(p) > 0 {
		if f.skip > 0 {
			n := min(f.skip, len(p))
			f.skip -= n
			p = p[n:]
			continue
		}
		n := min(9-len(f.hdr), len(p))
		f.hdr = append(f.hdr, p[:n]...)
		p = p[n:]
		if len(f.hdr) < 9 {
			return
		}
		length := int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2]) // 24 bits
		switch typ, flags := f.hdr[3], f.hdr[4]; {
		case typ == frameData:
			f.count.data++
		case typ == framePing && flags&flagAck == 0:
			f.count.pings++
		}
		f.hdr, f.skip = f.hdr[:0], length
	}
}

func (f *frameCounter) snapshot() frameCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}
