package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is the kind of fault.
type Mode int

const (
	Pass          Mode = iota // forward both ways
	Blackhole                 // hold both directions
	DropResponses             // forward client→server only; hold server→client
	DropRequests              // forward server→client only; hold client→server
	Drop                      // close connections (FIN), refuse new ones
	Reset                     // reset connections (RST), refuse new ones
)

var modeNames = [...]string{"pass", "blackhole", "drop-responses", "drop-requests", "drop", "reset"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Fault is what the proxy does to traffic.
type Fault struct {
	Mode Mode
	// Latency delays every chunk forwarded, in both directions.
	Latency time.Duration
}

func (f Fault) String() string {
	if f.Latency > 0 {
		return fmt.Sprintf("%s+%s", f.Mode, f.Latency)
	}
	return f.Mode.String()
}

// holds reports whether f holds the bytes going in direction up
// (client→server) or down.
func (f Fault) holds(up bool) bool {
	switch f.Mode {
	case Blackhole:
		return true
	case DropResponses:
		return !up
	case DropRequests:
		return up
	}
	return false
}

// Config configures a Proxy.
type Config struct {
	// Listen is the address to accept on. Default "127.0.0.1:0".
	Listen string
	// Target is the address connections are forwarded to. Required.
	Target string
	// DialTimeout bounds the connection to Target. Default 5 s.
	DialTimeout time.Duration
	// Logger receives connection logs at Debug. Default: discard.
	Logger *slog.Logger
}

// Stats counts what the proxy did since it started.
type Stats struct {
	Accepted  int64 // connections accepted
	Refused   int64 // closed or reset at accept (Drop, Reset, dial failures)
	BytesUp   int64 // forwarded client→server
	BytesDown int64 // forwarded server→client
}

// Proxy is a running fault proxy.
type Proxy struct {
	cfg Config
	lis net.Listener
	log *slog.Logger
	wg  sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	fault   Fault
	changed chan struct{} // closed and replaced by every Set
	links   map[*link]struct{}
	closed  bool

	accepted, refused, up, down atomic.Int64
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
	ends           atomic.Int32 // pumps finished
}

// Start listens and forwards until Close.
func Start(cfg Config) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("faultproxy: Target is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{cfg: cfg, lis: lis, log: cfg.Logger.With("component", "faultproxy", "target", cfg.Target),
		changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Fault returns the current fault.
func (p *Proxy) Fault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// Set changes the fault, for open connections and new ones. Drop and Reset
// close every open connection at once.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	close(p.changed)
	p.changed = make(chan struct{})
	if f.Mode == Drop || f.Mode == Reset {
		for l := range p.links {
			l.close(f.Mode == Reset)
		}
	}
	p.log.Debug("fault set", "fault", f)
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), BytesUp: p.up.Load(), BytesDown: p.down.Load()}
}

// Close stops accepting, closes every connection and waits for the
// goroutines. Later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.lis.Close()
	for l := range p.links {
		l.close(false)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve dials the target for an accepted connection and starts its pumps.
func (p *Proxy) serve(c net.Conn) {
	if f := p.Fault(); f.Mode == Drop || f.Mode == Reset {
		p.refused.Add(1)
		closeConn(c, f.Mode == Reset)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	s, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.cfg.Target)
	cancel()
	if err != nil {
		p.refused.Add(1)
		p.log.Debug("dial target failed", "err", err)
		closeConn(c, true)
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.fault.Mode == Drop || p.fault.Mode == Reset {
		reset := p.fault.Mode == Reset
		p.mu.Unlock()
		p.refused.Add(1)
		closeConn(c, reset)
		closeConn(s, false)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.wg.Go(func() { p.pump(l, true) })
	p.pump(l, false)
}

// pump copies one direction of l until either side fails, holding bytes
// while the fault says so.
func (p *Proxy) pump(l *link, up bool) {
	src, dst, count := l.server, l.client, &p.down
	if up {
		src, dst, count = l.client, l.server, &p.up
	}
	defer p.pumpDone(l, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.await(l, up) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close(false)
				return
			}
			count.Add(int64(n))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.close(isReset(err))
			}
			return
		}
	}
}

// await blocks while the fault holds this direction, then sleeps the
// latency. It reports false when the link closed meanwhile.
func (p *Proxy) await(l *link, up bool) bool {
	for {
		p.mu.Lock()
		f, changed := p.fault, p.changed
		p.mu.Unlock()
		if !f.holds(up) {
			if f.Latency <= 0 {
				return true
			}
			t := time.NewTimer(f.Latency)
			select {
			case <-t.C:
				return true
			case <-l.done:
				t.Stop()
				return false
			}
		}
		select {
		case <-changed:
		case <-l.done:
			return false
		}
	}
}

// pumpDone half-closes dst after a clean end of its source, and forgets
// the link once both pumps ended.
func (p *Proxy) pumpDone(l *link, dst net.Conn) {
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	if l.ends.Add(1) == 2 {
		l.close(false)
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}
}

// close ends both connections, with RST when reset.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		close(l.done)
		closeConn(l.client, reset)
		closeConn(l.server, reset)
	})
}

func closeConn(c net.Conn, reset bool) {
	if tc, ok := c.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0) // close sends RST
	}
	_ = c.Close()
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !errors.Is(err, net.ErrClosed)
}
