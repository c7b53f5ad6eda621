package remoting

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
)

// DialOptions configures Dial.
type DialOptions struct {
	// Config has the same meaning as a server's, for this one connection.
	Config
	// Handler answers the requests the server sends (NOTIFY_CONSUMER_IDS_CHANGED,
	// CHECK_TRANSACTION_STATE...). Default: a Mux with no handlers, which
	// answers REQUEST_CODE_NOT_SUPPORTED.
	Handler Handler
	// TLS, if set, runs TLS over the connection (docs/SECURITY.md, "TLS"),
	// its handshake bounded by Dial's ctx. Its ServerName defaults to
	// addr's host. Default nil: plaintext.
	TLS *tls.Config
}

// Client is one dialed remoting connection: concurrent requests matched to
// their responses by opaque, and a handler for the requests the server
// sends. It does not reconnect. Its methods are safe for concurrent use.
type Client struct {
	conn      *Conn
	stats     counters
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Dial connects to addr (host:port) over TCP, and TLS with opts.TLS; ctx
// bounds the dial and the handshake only.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Client, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	cfg := opts.Config.withDefaults()
	h := opts.Handler
	if h == nil {
		h = NewMux()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
	}
	if opts.TLS != nil {
		if nc, err = clientTLS(ctx, nc, addr, opts.TLS); err != nil {
			return nil, err
		}
	}
	cl := &Client{}
	cl.conn = newConn(context.Background(), nc, cfg, h, &cl.stats)
	cl.stats.connsAccepted.Add(1)
	cl.wg.Go(cl.conn.run)
	return cl, nil
}

// Conn returns the client's connection.
func (cl *Client) Conn() *Conn { return cl.conn }

// Invoke sends req and waits for its response (see Conn.Invoke).
func (cl *Client) Invoke(ctx context.Context, req *Command) (*Command, error) {
	return cl.conn.Invoke(ctx, req)
}

// Oneway sends req without waiting for an answer (see Conn.Oneway).
func (cl *Client) Oneway(ctx context.Context, req *Command) error {
	return cl.conn.Oneway(ctx, req)
}

// Stats returns the client's counters (requests are the server's).
func (cl *Client) Stats() Stats { return cl.stats.snapshot() }

// Close closes the connection and waits for its goroutines, handlers
// included. Later calls return ErrClosed.
func (cl *Client) Close() error {
	err := ErrClosed
	cl.closeOnce.Do(func() {
		err = nil
		cl.conn.closeWith(ErrClosed)
		cl.wg.Wait()
	})
	return err
}

// clientTLS runs conf's client handshake on nc, a connection to addr, and
// closes nc if it fails.
func clientTLS(ctx context.Context, nc net.Conn, addr string, conf *tls.Config) (net.Conn, error) {
	if conf.ServerName == "" {
		conf = conf.Clone()
		conf.ServerName = addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			conf.ServerName = h
		}
	}
	tc := tls.Client(nc, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("remoting: TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}
