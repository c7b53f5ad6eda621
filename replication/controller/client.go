package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/auth/grpcauth"
)

// maxLearned bounds the leader addresses learned from answers (beyond
// ClientConfig.Addrs) the client keeps connections to.
const maxLearned = 8

// ClientConfig configures a Client.
type ClientConfig struct {
	// Addrs are the controller members' gRPC addresses; required. A leader
	// another member names is dialled too.
	Addrs []string
	// Attempts bounds the tries of one call, each at one member; default 8.
	Attempts int
	// Backoff is the first wait after an attempt that found no leader; it
	// doubles up to MaxBackoff. Defaults 50ms and 1s.
	Backoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt (a member that does not answer);
	// default 5s.
	AttemptTimeout time.Duration
	// DialOptions are added to the connections' (insecure credentials by
	// default).
	DialOptions []grpc.DialOption
	// Signer, if set, signs every call with a user's keys, as controllers
	// with authentication on require (docs/SECURITY.md, "Cluster"): a
	// broker's cluster user (innerClientAuthenticationCredentials), an
	// admin's for elections.
	Signer *auth.Signer
}

func (c *ClientConfig) setDefaults() {
	if c.Attempts == 0 {
		c.Attempts = 8
	}
	if c.Backoff == 0 {
		c.Backoff = 50 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = time.Second
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 5 * time.Second
	}
}

// Validate reports the first problem of the configuration, after defaults.
func (c ClientConfig) Validate() error {
	c.setDefaults()
	return c.validate()
}

func (c *ClientConfig) validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("controller: client config: no controller addresses")
	}
	for _, a := range c.Addrs {
		if a == "" {
			return fmt.Errorf("controller: client config: an empty controller address in %q", c.Addrs)
		}
	}
	switch {
	case c.Attempts < 1:
		return fmt.Errorf("controller: client config: Attempts %d, want ≥ 1", c.Attempts)
	case c.Backoff < 0 || c.MaxBackoff < c.Backoff:
		return fmt.Errorf("controller: client config: Backoff %v, MaxBackoff %v: want 0 ≤ Backoff ≤ MaxBackoff", c.Backoff, c.MaxBackoff)
	case c.AttemptTimeout < 0:
		return fmt.Errorf("controller: client config: AttemptTimeout %v is negative", c.AttemptTimeout)
	}
	return nil
}

// ErrClientClosed is returned by calls on a closed Client.
var ErrClientClosed = errors.New("controller: client closed")

// Client is the client of the controller's gRPC service, for brokers and
// admin tools: it sends each call to the controller group's leader,
// following the members' not-leader answers (docs/REPLICATION.md,
// "Controller service"). It is safe for concurrent use; connections are
// made on first use.
type Client struct {
	cfg ClientConfig

	mu      sync.Mutex
	closed  bool
	conns   map[string]*grpc.ClientConn
	learned []string // leader addresses not in cfg.Addrs, oldest first
	leader  string   // the member that answered last, "" when unknown
	next    int      // the member of cfg.Addrs to try when no leader is known
}

// NewClient returns a client of the controllers at cfg.Addrs.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Addrs = slices.Clone(cfg.Addrs)
	return &Client{cfg: cfg, conns: make(map[string]*grpc.ClientConn), next: rand.IntN(len(cfg.Addrs))}, nil
}

// Close closes the connections; calls in progress fail. Safe to call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	c.conns = nil
	return errors.Join(errs...)
}

// Leader returns the gRPC address of the member that answered last ("" if
// none yet).
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// stub returns the service stub of addr, connecting on first use.
func (c *Client) stub(addr string) (gantryv1.ControllerClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return gantryv1.NewControllerClient(cc), nil
	}
	if !slices.Contains(c.cfg.Addrs, addr) {
		if len(c.learned) >= maxLearned {
			old := c.learned[0]
			c.learned = c.learned[1:]
			if cc := c.conns[old]; cc != nil {
				_ = cc.Close()
				delete(c.conns, old)
			}
		}
		c.learned = append(c.learned, addr)
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, c.cfg.DialOptions...)
	if c.cfg.Signer != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(grpcauth.Credentials(c.cfg.Signer)))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("controller: client: %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return gantryv1.NewControllerClient(cc), nil
}

// target is the member to try: the known leader, else the next address.
func (c *Client) target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != "" {
		return c.leader
	}
	a := c.cfg.Addrs[c.next%len(c.cfg.Addrs)]
	c.next++
	return a
}

// unasked returns the first of the given addresses not in asked.
func (c *Client) unasked(asked map[string]bool) (string, bool) {
	for _, a := range c.cfg.Addrs {
		if !asked[a] {
			return a, true
		}
	}
	return "", false
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	c.leader = addr
	c.mu.Unlock()
}

// invoke runs call at the leader: a member's not-leader answer naming the
// leader sends the next attempt there (at once, unless the previous
// attempt was sent the same way: members naming each other during an
// election are not hammered); no leader known, or a member unreachable,
// sends it to the next address after a back-off. It gives up after
// Attempts tries, or when ctx ends, with the last error.
func invoke[T any](ctx context.Context, c *Client, call func(context.Context, gantryv1.ControllerClient) (T, error)) (T, error) {
	var zero T
	var last error
	backoff := c.cfg.Backoff
	next := c.target()
	wait, redirected := false, false
	asked := map[string]bool{} // members that answered not-leader or not at all
	for range c.cfg.Attempts {
		if wait {
			t := time.NewTimer(backoff + rand.N(backoff/2+1))
			select {
			case <-ctx.Done():
				t.Stop()
				return zero, fmt.Errorf("controller: client: %w (last: %w)", ctx.Err(), last)
			case <-t.C:
			}
			backoff = min(2*backoff, c.cfg.MaxBackoff)
		}
		addr := next
		if addr == "" {
			addr = c.target()
		}
		stub, err := c.stub(addr)
		if err != nil {
			return zero, err
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
		res, err := call(actx, stub)
		cancel()
		if err == nil {
			c.setLeader(addr)
			return res, nil
		}
		err = FromStatus(err)
		last = fmt.Errorf("%s: %w", addr, err)
		if ctx.Err() != nil {
			return zero, last
		}
		asked[addr] = true
		var nl *NotLeaderError
		switch {
		case errors.As(err, &nl):
			c.setLeader("")
			h := nl.LeaderAddr
			if h == "" || h == addr {
				break
			}
			// The leader's own address is not one the client was given:
			// behind a proxy or NAT the given ones are those that reach
			// the members, so each is asked before the named address.
			if a, ok := c.unasked(asked); ok && !slices.Contains(c.cfg.Addrs, h) {
				next, wait, redirected = a, false, false
				continue
			}
			next, wait, redirected = h, redirected, true
			continue
		case retryable(err):
			c.setLeader("")
		default:
			return zero, last
		}
		next, wait, redirected = "", true, false
	}
	return zero, fmt.Errorf("controller: client: no leader answered after %d attempts: %w", c.cfg.Attempts, last)
}

// retryable: the member could not be reached or did not answer in time,
// or it is closing.
func retryable(err error) bool {
	if errors.Is(err, ErrClosed) {
		return true
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return false // the controller's answer
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
