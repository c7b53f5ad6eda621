package muxlisten

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxPending = 1024
)

// Config configures a Mux. The zero value of every field, or a negative
// one, means its default: nothing in it can be invalid, so it has no
// Validate.
type Config struct {
	// Timeout bounds how long an accepted connection may take to send its
	// first PeekLen bytes; a slower one is closed. Default 10 s.
	Timeout time.Duration
	// MaxPending bounds the connections waiting for their first bytes at
	// once; beyond it the Mux stops accepting (the kernel's backlog holds
	// the next ones) until one is classified or times out. Default 1024.
	MaxPending int
	// Name names the port in logs ("broker remoting"). Default the
	// listener's address.
	Name string
	// Logger receives a line for each connection closed because its
	// protocol has no listener here, or that sent nothing in time (Debug).
	// Default: discard.
	Logger *slog.Logger

	// TLS, when set, terminates TLS on the port (docs/SECURITY.md, "TLS"):
	// a connection whose first bytes are a TLS ClientHello is handshaken
	// (the handshake and the first bytes inside it within Timeout too),
	// then routed by the first bytes it sends inside TLS, so that every
	// protocol of the port is served over TLS as well. The listeners'
	// connections of TLS clients have a ConnectionState method. A
	// GetConfigForClient in it is kept (certificates reloaded on change);
	// NextProtos is replaced by the field below. Default nil: a TLS
	// client is closed.
	TLS *tls.Config
	// RequireTLS, with TLS, refuses plaintext connections (tls.server.mode
	// enforcing): each goes to the Refused listener of its protocol, whose
	// server tells the client in its protocol, else is closed with a
	// Warn line. Default false: plaintext and TLS are both served.
	RequireTLS bool
	// NextProtos are the ALPN protocols offered to TLS clients. Default
	// "h2" (gRPC clients require it) and "http/1.1".
	NextProtos []string
	// WrapTLS, if set, wraps a connection's socket before TLS runs over it
	// (the broker's internal/inlinenet.Wrap); a plaintext connection is
	// handed on unwrapped.
	WrapTLS func(net.Conn) net.Conn
}

func (c Config) withDefaults(lis net.Listener) Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Name == "" {
		c.Name = lis.Addr().String()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{"h2", "http/1.1"}
	}
	return c
}

// serverTLS is c with protos offered, also in the configs its
// GetConfigForClient returns.
func serverTLS(c *tls.Config, protos []string) *tls.Config {
	if c == nil {
		return nil
	}
	conf := c.Clone()
	conf.NextProtos = protos
	if get := c.GetConfigForClient; get != nil {
		conf.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := get(h)
			if cc == nil || err != nil {
				return cc, err
			}
			cc = cc.Clone()
			cc.NextProtos = protos
			return cc, nil
		}
	}
	return conf
}

// Mux routes the connections of one net.Listener to per-protocol
// listeners. Make it with New, take the listeners with Listener, then run
// Serve; Close stops it.
type Mux struct {
	lis     net.Listener
	cfg     Config
	tls     *tls.Config // cfg.TLS offering cfg.NextProtos; nil: no TLS
	log     *slog.Logger
	pending chan struct{} // a slot per connection being classified
	done    chan struct{} // closed by Close

	mu      sync.Mutex
	routes  [numProtocols]*listener
	refused [numProtocols]*listener // plaintext connections refused by RequireTLS
	conns   map[net.Conn]struct{}   // being classified or handed over

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New returns a Mux of lis's connections. It owns lis: Close (or a
// failure of lis) closes it.
func New(lis net.Listener, cfg Config) *Mux {
	cfg = cfg.withDefaults(lis)
	return &Mux{
		lis:     lis,
		cfg:     cfg,
		tls:     serverTLS(cfg.TLS, cfg.NextProtos),
		log:     cfg.Logger.With("component", "muxlisten", "port", cfg.Name),
		pending: make(chan struct{}, cfg.MaxPending),
		done:    make(chan struct{}),
		conns:   make(map[net.Conn]struct{}),
	}
}

// Listener returns a listener of the connections whose first bytes
// announce one of ps. A protocol already routed elsewhere moves to the
// new listener. Connections of a protocol without a listener are closed.
// Closing the listener stops its deliveries (its protocols' connections
// are then closed) but not the Mux.
func (m *Mux) Listener(ps ...Protocol) net.Listener { return m.listen(&m.routes, ps) }

// Refused returns a listener of the plaintext connections that a port
// with RequireTLS refuses, whose first bytes announce one of ps: serve on
// it a server that answers every request, in its protocol, that the port
// requires TLS. Without one, such a connection is closed (and logged).
func (m *Mux) Refused(ps ...Protocol) net.Listener { return m.listen(&m.refused, ps) }

func (m *Mux) listen(routes *[numProtocols]*listener, ps []Protocol) net.Listener {
	l := &listener{m: m, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		if p < numProtocols {
			routes[p] = l
		}
	}
	return l
}

// AllProtocols are every Protocol, for a port of one protocol that Detect
// does not know (Listener(AllProtocols()...)): the Mux then only
// terminates TLS.
func AllProtocols() []Protocol {
	ps := make([]Protocol, numProtocols)
	for i := range ps {
		ps[i] = Protocol(i)
	}
	return ps
}

// Addr is the address of the listener the Mux accepts on.
func (m *Mux) Addr() net.Addr { return m.lis.Addr() }

// Serve accepts connections until Close, then returns nil, or until the
// listener fails, then returns its error. Either way every per-protocol
// listener is closed when it returns, so their servers' Serve return
// too (with net.ErrClosed).
func (m *Mux) Serve() error {
	defer m.closeRoutes()
	var backoff time.Duration
	for {
		select {
		case m.pending <- struct{}{}:
		case <-m.done:
			return nil
		}
		c, err := m.lis.Accept()
		if err != nil {
			<-m.pending
			select {
			case <-m.done:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, an aborted handshake: wait and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			m.log.Warn("accept failed; retrying", "err", err, "in", backoff)
			if !m.sleep(backoff) {
				return nil
			}
			continue
		}
		backoff = 0
		if !m.start(c) {
			<-m.pending
			c.Close()
			return nil
		}
	}
}

func (m *Mux) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-m.done:
		return false
	}
}

// start records c as in the Mux's hands and routes it in a goroutine of
// the Mux; false after Close. The goroutine starts under mu, which Close
// holds to close done: it is counted before Close waits, never after.
func (m *Mux) start(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return false
	default:
	}
	m.conns[c] = struct{}{}
	m.wg.Go(func() { m.route(c) })
	return true
}

func (m *Mux) untrack(c net.Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}

// route classifies c and hands it over (or closes it).
func (m *Mux) route(raw net.Conn) {
	var first [PeekLen]byte
	deadline := time.Now().Add(m.cfg.Timeout)
	_ = raw.SetReadDeadline(deadline)
	c, n, err := peek(raw, first[:])
	p, secure := Detect(first[:]), false
	if err == nil && p == TLS && m.tls != nil {
		c, p, err = m.handshake(c, deadline)
		secure = true
	}
	m.untrack(raw) // from here on, c is closed here or handed over
	switch {
	case err == nil && secure:
		err = c.SetDeadline(time.Time{})
	case err == nil:
		err = c.SetReadDeadline(time.Time{})
	}
	if err != nil {
		if herr := (*handshakeError)(nil); errors.As(err, &herr) {
			m.log.Info("closing connection: TLS handshake failed", "remote", c.RemoteAddr().String(), "err", herr.err)
		} else {
			m.log.Debug("closing connection: no first bytes", "remote", c.RemoteAddr().String(), "tls", secure, "got", n, "err", err)
		}
		c.Close()
		<-m.pending // after the close: a slot frees once its connection is gone
		return
	}
	<-m.pending
	m.deliver(c, p, first[:], secure)
}

// deliver hands c, of protocol p, to its listener, or closes it.
func (m *Mux) deliver(c net.Conn, p Protocol, first []byte, secure bool) {
	refuse := !secure && m.tls != nil && m.cfg.RequireTLS
	m.mu.Lock()
	l := m.routes[p]
	if refuse {
		l = m.refused[p]
	}
	m.mu.Unlock()
	if l != nil {
		if refuse {
			m.log.Info("plaintext connection on a port that requires TLS: telling the client so", "remote", c.RemoteAddr().String(),
				"protocol", p.String())
		}
		l.deliver(c)
		return
	}
	remote := c.RemoteAddr().String()
	switch {
	case refuse:
		m.log.Warn("closing plaintext connection: this port requires TLS", "remote", remote, "protocol", p.String())
	case p == TLS && m.tls == nil:
		m.log.Warn("closing connection: a TLS client, and this port serves no TLS", "remote", remote)
	default:
		m.log.Warn("closing connection: this port does not serve its protocol", "remote", remote,
			"protocol", p.String(), "tls", secure, "first_bytes", fmt.Sprintf("% x", first))
	}
	c.Close()
}

// handshakeError is a failed TLS handshake.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "muxlisten: TLS handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// handshake runs the server's TLS handshake on c and reads the first
// bytes inside it, both before deadline, and returns the connection to
// hand on and the protocol its bytes announce.
func (m *Mux) handshake(c net.Conn, deadline time.Time) (net.Conn, Protocol, error) {
	if m.cfg.WrapTLS != nil {
		c = m.cfg.WrapTLS(c)
	}
	if err := c.SetDeadline(deadline); err != nil { // the handshake writes too
		return c, Unknown, err
	}
	tc := tls.Server(c, m.tls)
	if err := tc.Handshake(); err != nil {
		return c, Unknown, &handshakeError{err}
	}
	tcn := &tlsConn{Conn: tc}
	if _, err := io.ReadFull(tc, tcn.first[:]); err != nil {
		return tc, Unknown, err
	}
	tcn.head = tcn.first[:]
	return tcn, Detect(tcn.first[:]), nil
}

// tlsConn is a TLS connection whose first bytes, read to classify it, are
// read again before the rest.
type tlsConn struct {
	*tls.Conn
	first [PeekLen]byte
	head  []byte // what is left of first to read
}

func (c *tlsConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// Close stops accepting, closes the listener, every per-protocol listener
// and the connections not handed over yet, and waits for the Mux's
// goroutines. Later calls return net.ErrClosed.
func (m *Mux) Close() error {
	err := net.ErrClosed
	m.closeOnce.Do(func() {
		m.mu.Lock()
		close(m.done)
		for c := range m.conns {
			c.Close()
		}
		m.mu.Unlock()
		if err = m.lis.Close(); errors.Is(err, net.ErrClosed) {
			err = nil // it failed before: Serve returned that
		}
		m.closeRoutes()
		m.wg.Wait()
	})
	return err
}

func (m *Mux) closeRoutes() {
	m.mu.Lock()
	routes := append(m.routes[:], m.refused[:]...)
	m.mu.Unlock()
	for _, l := range routes {
		if l != nil {
			l.Close()
		}
	}
}

// listener is a per-protocol listener: Accept takes the connections the
// Mux hands over.
type listener struct {
	m         *Mux
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// deliver waits until Accept takes c, or closes c when the listener or
// the Mux closes first.
func (l *listener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	case <-l.m.done:
		c.Close()
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
	}
}

// Close stops the listener's deliveries; the Mux goes on.
func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *listener) Addr() net.Addr { return l.m.lis.Addr() }

// MisdirectedHTTP returns an HTTP/1 server that answers every request
// with 400 Bad Request and msg: serve it on the HTTP1 listener of a port
// that serves other protocols, so that a curl pointed at it learns where
// to go. Stop it with Close.
func MisdirectedHTTP(msg string) *http.Server {
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
			http.Error(w, msg, http.StatusBadRequest)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}
