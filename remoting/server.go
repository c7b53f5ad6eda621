package remoting

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Server accepts remoting connections and serves their requests with one
// Handler. Its methods are safe for concurrent use.
type Server struct {
	cfg   Config
	h     Handler
	log   *slog.Logger
	stats counters

	ctx    context.Context // parent of every connection's; canceled by Close
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
	wg        sync.WaitGroup // every connection's run
	closeOnce sync.Once
}

// NewServer returns a server that answers with h. Serve it on listeners;
// Close stops it.
func NewServer(cfg Config, h Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("remoting: NewServer needs a Handler")
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:       cfg,
		h:         h,
		log:       cfg.Logger.With("component", "remoting"),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*Conn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	return s, nil
}

// Serve accepts connections on lis until Close, then returns nil; it
// closes lis. It returns the accept error that stops it otherwise, and
// ErrClosed when called after Close.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lis.Close()
		return ErrClosed
	}
	s.listeners[lis] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, lis)
		s.mu.Unlock()
		lis.Close()
	}()
	s.log.Info("serving", "addr", lis.Addr().String())
	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, an aborted handshake: wait and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
			if !s.sleep(backoff) {
				return nil
			}
			continue
		}
		backoff = 0
		s.start(nc)
	}
}

// sleep waits for d, or until Close (then false).
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// start serves nc in a goroutine the server owns.
func (s *Server) start(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return
	}
	c := newConn(s.ctx, nc, s.cfg, s.h, &s.stats)
	s.conns[c] = struct{}{}
	s.stats.connsAccepted.Add(1)
	s.wg.Go(func() {
		c.run()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	})
}

// Close stops the listeners, closes every connection (handlers see their
// context canceled) and waits for every goroutine the server started,
// handlers included. Later calls return ErrClosed.
func (s *Server) Close() error {
	err := ErrClosed
	s.closeOnce.Do(func() {
		err = nil
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel(ErrClosed)
		s.mu.Lock()
		for lis := range s.listeners {
			lis.Close()
		}
		for c := range s.conns {
			c.closeWith(ErrClosed)
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.log.Info("closed")
	})
	return err
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// Stats counts a server's (or client's) connections and requests, for
// metrics.
type Stats struct {
	// ConnsAccepted counts connections accepted since the server started.
	ConnsAccepted uint64
	// ConnsOpen is the number of connections open now.
	ConnsOpen int64
	// Requests counts requests received and handed to the handler.
	Requests uint64
	// InFlight is the number of handlers running now.
	InFlight int64
	// Panics counts handler panics (each answered with SYSTEM_ERROR).
	Panics uint64
	// Malformed counts connections closed for a malformed or oversized frame.
	Malformed uint64
	// UnmatchedResponses counts responses that matched no pending request.
	UnmatchedResponses uint64
	// BufferedBytes is the bytes held now in frames being read and in
	// requests being handled (Config.MaxBufferedBytes bounds it).
	BufferedBytes int64
	// Refused counts frames refused because MaxBufferedBytes was reached.
	Refused uint64
}

// counters are a server's (or a dialed connection's) statistics, and the
// bytes its connections buffer against Config.MaxBufferedBytes.
type counters struct {
	connsAccepted, requests, panics, malformed, unmatched, refused atomic.Uint64
	connsOpen, inFlight, buffered                                  atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		ConnsAccepted:      c.connsAccepted.Load(),
		ConnsOpen:          c.connsOpen.Load(),
		Requests:           c.requests.Load(),
		InFlight:           c.inFlight.Load(),
		Panics:             c.panics.Load(),
		Malformed:          c.malformed.Load(),
		UnmatchedResponses: c.unmatched.Load(),
		BufferedBytes:      c.buffered.Load(),
		Refused:            c.refused.Load(),
	}
}
