package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/auth/grpcauth"
)

// RegistrarConfig configures a Registrar.
type RegistrarConfig struct {
	// NameServers are the nameservers' gRPC addresses. Each is registered
	// with independently.
	NameServers []string
	// Interval is how often the registration is repeated (RocketMQ's
	// registerNameServerPeriod). Default 30 s.
	Interval time.Duration
	// Registration returns the broker's current registration: addresses
	// and every topic. Required.
	Registration func() *gantryv1.RegisterBrokerRequest
	// OnResponse, if set, is called with each nameserver's answer (a
	// slave learns its master's addresses from it). It runs on the
	// registration goroutine and must not block for long.
	OnResponse func(*gantryv1.RegisterBrokerResponse)
	// DialOptions are added to the nameserver connections (insecure by default).
	DialOptions []grpc.DialOption
	// Signer, if set, signs every call (registrations, unregistration)
	// with the broker's inner credentials, as nameservers with
	// authentication on require (docs/SECURITY.md, "Cluster").
	Signer *auth.Signer
	// Logger receives registration failures. Default: discard.
	Logger *slog.Logger
}

// Registrar keeps a broker registered with every nameserver: one
// RegisterBroker stream per nameserver, the registration sent when the
// stream opens, every Interval and at once after Changed. A broken stream
// is reopened with backoff; the nameserver drops the broker when its stream
// ends, so a dead broker disappears at once and a silent one after 120 s.
//
// The back-off between attempts is at most half the Interval (and 10 s),
// and each attempt reconnects at once: the connection's own reconnect
// back-off, which gRPC grows to two minutes, is reset first and bounded
// the same way. So a nameserver back from an outage, however long, has
// the broker registered again within one Interval.
type Registrar struct {
	cfg        RegistrarConfig
	log        *slog.Logger
	maxBackoff time.Duration // the longest wait between attempts (maxRetryDelay)
	conns      []*grpc.ClientConn
	kicks      []chan struct{}
	stop       context.CancelFunc
	wg         sync.WaitGroup
	once       sync.Once

	// Sync's state: gen counts Changed calls, acked[i] is the gen of the
	// last registration nameserver i acknowledged, and ackCh is closed
	// (and replaced) at each acknowledgement.
	mu    sync.Mutex
	gen   uint64
	acked []uint64
	ackCh chan struct{}
}

// NewRegistrar connects (lazily) to the nameservers and starts registering.
func NewRegistrar(cfg RegistrarConfig) (*Registrar, error) {
	if cfg.Interval == 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.Registration == nil:
		return nil, errors.New("grpcapi: RegistrarConfig.Registration is required")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("grpcapi: registration interval must be positive, got %s", cfg.Interval)
	}
	r := &Registrar{cfg: cfg, log: cfg.Logger.With("component", "registrar"), maxBackoff: maxRetryDelay(cfg.Interval),
		acked: make([]uint64, len(cfg.NameServers)), ackCh: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: minRetryDelay, Multiplier: backoff.DefaultConfig.Multiplier,
			Jitter: backoff.DefaultConfig.Jitter, MaxDelay: r.maxBackoff,
		}}),
	}, cfg.DialOptions...)
	if cfg.Signer != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(grpcauth.Credentials(cfg.Signer)))
	}
	for i, addr := range cfg.NameServers {
		cc, err := grpc.NewClient(addr, opts...)
		if err != nil {
			r.Close(context.Background())
			return nil, fmt.Errorf("grpcapi: nameserver %q: %w", addr, err)
		}
		kick := make(chan struct{}, 1)
		r.conns, r.kicks = append(r.conns, cc), append(r.kicks, kick)
		r.wg.Go(func() { r.run(ctx, i, addr, cc, kick) })
	}
	return r, nil
}

// Retry delays of a broken registration.
const (
	minRetryDelay = 100 * time.Millisecond
	maxRetryCap   = 10 * time.Second
)

// maxRetryDelay is the longest wait between two registration attempts:
// half the registration interval, at most maxRetryCap.
func maxRetryDelay(interval time.Duration) time.Duration {
	return max(min(interval/2, maxRetryCap), minRetryDelay)
}

// Changed makes every nameserver get the registration now (topic changes).
func (r *Registrar) Changed() {
	r.mu.Lock()
	r.gen++
	r.mu.Unlock()
	for _, k := range r.kicks {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// Sync waits until every nameserver has acknowledged a registration sent
// after the last Changed, or ctx ends (a nameserver down): an admin's
// topic change is answered once the routes hold it, as RocketMQ's broker
// registers before it answers.
func (r *Registrar) Sync(ctx context.Context) error {
	r.mu.Lock()
	want := r.gen
	for {
		if !slices.ContainsFunc(r.acked, func(g uint64) bool { return g < want }) {
			r.mu.Unlock()
			return nil
		}
		ch := r.ackCh
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
		r.mu.Lock()
	}
}

// ack records that nameserver i acknowledged a registration of gen g.
func (r *Registrar) ack(i int, g uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked[i] = max(r.acked[i], g)
	close(r.ackCh)
	r.ackCh = make(chan struct{})
}

// run keeps one nameserver's stream registered until ctx ends.
func (r *Registrar) run(ctx context.Context, i int, addr string, cc *grpc.ClientConn, kick chan struct{}) {
	ns := gantryv1.NewNameServerClient(cc)
	delay := minRetryDelay
	for ctx.Err() == nil {
		start := time.Now()
		err := r.session(ctx, i, ns, kick)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			delay = minRetryDelay
		}
		r.log.Warn("nameserver registration failed; retrying", "nameserver", addr, "err", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, r.maxBackoff)
		// Dial now: an RPC on a connection waiting out its reconnect
		// back-off fails at once, whether the nameserver is back or not.
		cc.ResetConnectBackoff()
	}
}

// session registers over one stream until it breaks or ctx ends.
func (r *Registrar) session(ctx context.Context, i int, ns gantryv1.NameServerClient, kick chan struct{}) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := ns.RegisterBroker(sctx)
	if err != nil {
		return err
	}
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		r.mu.Lock()
		g := r.gen // before the registration is built: it holds every change up to g
		r.mu.Unlock()
		if err := stream.Send(r.cfg.Registration()); err != nil {
			return err
		}
		res, err := stream.Recv()
		if err != nil {
			return err
		}
		if r.cfg.OnResponse != nil {
			r.cfg.OnResponse(res)
		}
		r.ack(i, g)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-kick:
		}
	}
}

// Abandon stops registering and closes the connections without
// unregistering: to the nameservers the broker looks dead (its streams
// break), as after a crash.
func (r *Registrar) Abandon() {
	r.once.Do(func() {
		r.stop()
		r.wg.Wait()
		for _, cc := range r.conns {
			_ = cc.Close()
		}
	})
}

// Close stops registering, unregisters from every nameserver (best
// effort, within ctx: failures are logged) and closes the connections.
func (r *Registrar) Close(ctx context.Context) error {
	var errs []error
	r.once.Do(func() {
		r.stop()
		r.wg.Wait()
		reg := r.cfg.Registration()
		un := &gantryv1.UnregisterBrokerRequest{Cluster: reg.Cluster, BrokerName: reg.BrokerName, BrokerId: reg.BrokerId, Addr: reg.Addr}
		for i, cc := range r.conns {
			// A nameserver that cannot be told drops the broker anyway when
			// its registration stream ends: log, do not fail the shutdown.
			if _, err := gantryv1.NewNameServerClient(cc).UnregisterBroker(ctx, proto.Clone(un).(*gantryv1.UnregisterBrokerRequest)); err != nil {
				r.log.Warn("unregister failed", "nameserver", r.cfg.NameServers[i], "err", err)
			}
			errs = append(errs, cc.Close())
		}
	})
	return errors.Join(errs...)
}
