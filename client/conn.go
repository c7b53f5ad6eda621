package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/grpcbuf"
	"github.com/gantrymq/gantry/internal/inlinenet"
	"github.com/gantrymq/gantry/message"
)

// connPool holds one *grpc.ClientConn per address (brokers and
// nameservers), created on first use. Connections connect lazily and
// reconnect by themselves, with reconnectBackoff between attempts.
type connPool struct {
	opts  []grpc.DialOption
	hooks *hookSet // ConnStateHooks get a watcher goroutine per connection

	watchers sync.WaitGroup // joined by close

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// reconnectBackoff paces the attempts to reconnect to an address that
// went away: 50 ms after the first failure, doubling up to 1 s (Kafka's
// reconnect.backoff.ms and reconnect.backoff.max.ms). gRPC's default
// starts at 1 s and grows to 2 min, so a broker back after a restart of
// a few seconds was not used again for seconds more: the calls meanwhile
// fail at once with the last connection error (a push consumer then
// retried its failed messages itself instead of sending them back).
var reconnectBackoff = backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxDelay: time.Second}

func newConnPool(tlsConf *tls.Config, opts []grpc.DialOption, hooks *hookSet) *connPool {
	creds := insecure.NewCredentials()
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf) // over the inline TCP connection below
	}
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 20 * time.Second}),
		experimental.WithBufferPool(grpcbuf.Shared), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcbuf.Codec{}),
			grpc.MaxCallRecvMsgSize(message.MaxEnvelopeBytes), grpc.MaxCallSendMsgSize(message.MaxEnvelopeBytes)),
		grpc.WithInitialWindowSize(grpcbuf.FlowWindow), grpc.WithInitialConnWindowSize(grpcbuf.FlowWindow),
		grpc.WithContextDialer(inlinenet.Dial),
	}, opts...) // buffers not zeroed for every message, a fixed flow-control window (internal/grpcbuf), socket calls inline (internal/inlinenet),
	// messages up to the largest a broker sends or takes: a pull of one
	// record of the largest body (docs/BROKER.md, "Size limits")
	return &connPool{opts: all, hooks: hooks, conns: map[string]*grpc.ClientConn{}}
}

// get returns the connection to addr.
func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("client: connect %s: %w: %w", addr, ErrInvalidArgument, err)
	}
	p.conns[addr] = cc
	if len(p.hooks.conn) > 0 {
		p.watchers.Go(func() { p.hooks.watchConn(addr, cc) })
	}
	return cc, nil
}

// close closes every connection and waits for their state watchers, which
// end with the Shutdown it causes; later gets fail with ErrClosed.
func (p *connPool) close() error {
	defer p.watchers.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for addr, cc := range p.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("client: close connection to %s: %w", addr, err))
		}
	}
	p.conns = nil
	return errors.Join(errs...)
}

// group runs goroutines and waits for them. Unlike a bare WaitGroup it
// refuses new goroutines once wait has begun, so a late start can never
// race with the wait.
type group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// goFunc runs f in a new goroutine and reports true, or reports false once
// wait was called.
func (g *group) goFunc(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// add counts one piece of work that will call done, like goFunc without a
// goroutine; it reports false once wait was called.
func (g *group) add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// done ends a piece of work counted by add.
func (g *group) done() { g.wg.Done() }

// wait refuses new goroutines and waits for the running ones.
func (g *group) wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// core is what Producer, PullConsumer and Admin share: the connections, the
// nameservers, the route cache and its refresh goroutine.
type core struct {
	cfg    Config
	hooks  hookSet // cfg.Hooks by interface
	log    *slog.Logger
	pool   *connPool
	ns     *nameServers
	routes *routeCache
	life   context.Context // ends with close
	stop   context.CancelFunc
	tasks  group
}

// newCore checks cfg and starts the route refresher.
func newCore(ctx context.Context, cfg Config, component string) (*core, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &core{cfg: cfg, hooks: newHookSet(cfg.Hooks)}
	opts := cfg.DialOptions
	if o, err := cfg.Credentials.dialOption(); err != nil {
		return nil, err
	} else if o != nil {
		opts = append([]grpc.DialOption{o}, opts...)
	}
	c.pool = newConnPool(cfg.TLS, opts, &c.hooks)
	c.log = cfg.Logger.With("component", component, "client", cfg.ClientID)
	c.ns = &nameServers{addrs: cfg.NameServers, pool: c.pool, next: mrand.IntN(len(cfg.NameServers))}
	c.routes = newRouteCache(c.ns, c.log)
	c.life, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	c.tasks.goFunc(func() { c.routes.run(c.life, cfg.RouteRefresh) })
	return c, nil
}

// close stops the goroutines and closes the connections.
func (c *core) close() error {
	c.stop()
	c.tasks.wait()
	return c.pool.close()
}

// messaging returns a Messaging client for a broker.
func (c *core) messaging(addr string) (gantryv1.MessagingClient, error) {
	cc, err := c.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return gantryv1.NewMessagingClient(cc), nil
}

// admin returns an Admin client for a broker.
func (c *core) admin(addr string) (gantryv1.AdminClient, error) {
	cc, err := c.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return gantryv1.NewAdminClient(cc), nil
}

// brokerAddr returns the current gRPC address of q's broker: the master of
// its broker name in the cached route, else q.Broker.
func (c *core) brokerAddr(q Queue) (string, error) {
	if rt := c.routes.cached(q.Topic); rt != nil {
		if addr, ok := rt.masters[q.BrokerName]; ok {
			return addr, nil
		}
	}
	if q.Broker == "" {
		return "", fmt.Errorf("client: queue %s has no broker address: %w", q, ErrInvalidArgument)
	}
	return q.Broker, nil
}

// brokerFailed reacts to a failed call to a broker of topic: an unreachable
// broker may have moved, and a slave's refusal means the master moved, so
// the topic's route is refreshed soon.
func (c *core) brokerFailed(topic string, err error) {
	// A broker that does not answer in time may be a master cut off by a
	// failover, which the route names anew.
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotMaster) || errors.Is(err, context.DeadlineExceeded) {
		c.routes.kick(topic)
	}
}

// call runs f against the broker of q and converts its error; it returns
// the broker's address.
func (c *core) call(q Queue, op string, f func(gantryv1.MessagingClient) error) (string, error) {
	addr, err := c.brokerAddr(q)
	if err != nil {
		return "", err
	}
	m, err := c.messaging(addr)
	if err != nil {
		return addr, err
	}
	if err := callError(op, addr, f(m), ErrTopicNotFound); err != nil {
		if c.brokerFailed(q.Topic, err); errors.Is(err, ErrTopicNotFound) {
			c.routes.kick(q.Topic) // the topic may have moved
		}
		return addr, err
	}
	return addr, nil
}

// nameServers calls the nameservers: each in turn, starting from the one
// that answered last (initially a random one), until one answers.
type nameServers struct {
	addrs []string
	pool  *connPool

	mu   sync.Mutex
	next int
}

// call runs f against the nameservers in turn. It returns the first
// success; otherwise NOT_FOUND if any nameserver answered it (a restarted
// nameserver may not know every broker yet, so the others are asked too),
// else the last error.
func (n *nameServers) call(ctx context.Context, op string, f func(context.Context, gantryv1.NameServerClient) error) error {
	n.mu.Lock()
	start := n.next
	n.mu.Unlock()
	var notFound, last error
	for i := range n.addrs {
		idx := (start + i) % len(n.addrs)
		addr := n.addrs[idx]
		cc, err := n.pool.get(addr)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, nameServerCallTimeout)
		err = f(cctx, gantryv1.NewNameServerClient(cc))
		cancel()
		if err == nil {
			n.mu.Lock()
			n.next = idx
			n.mu.Unlock()
			return nil
		}
		err = callError(op, addr, err, ErrTopicNotFound)
		if status.Code(err) == codes.NotFound {
			notFound = err
		} else {
			last = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if notFound != nil {
		return notFound
	}
	return last
}

// clusterInfo asks the nameservers for the cluster info.
func (n *nameServers) clusterInfo(ctx context.Context) (*gantryv1.GetClusterInfoResponse, error) {
	var resp *gantryv1.GetClusterInfoResponse
	err := n.call(ctx, "cluster info", func(ctx context.Context, c gantryv1.NameServerClient) error {
		var err error
		resp, err = c.GetClusterInfo(ctx, &gantryv1.GetClusterInfoRequest{})
		return err
	})
	return resp, err
}

// masterAddrs returns the master gRPC address of every broker of the
// cluster info, sorted by broker name.
func masterAddrs(ci *gantryv1.GetClusterInfoResponse) []string {
	names := make([]string, 0, len(ci.GetBrokers()))
	for name := range ci.GetBrokers() {
		names = append(names, name)
	}
	sort.Strings(names)
	var addrs []string
	for _, name := range names {
		if addr, ok := ci.GetBrokers()[name].GetBrokerAddrs()[0]; ok && addr != "" {
			addrs = append(addrs, addr)
		}
	}
	return addrs
}
