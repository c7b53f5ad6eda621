package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/internal/tlsx"
	"github.com/gantrymq/gantry/remoting"
	"github.com/gantrymq/gantry/replication/epoch"
)

// Config configures a broker server.
type Config struct {
	// Broker is the broker's configuration (broker.conf). Its
	// OnTopicsChanged is set by the server.
	Broker broker.Config
	// GRPCListener and HTTPListener, if set, are used instead of listening
	// on Broker.GRPCListenAddr and Broker.HTTPListenAddr (tests pass
	// 127.0.0.1:0 listeners).
	GRPCListener, HTTPListener net.Listener
	// RemotingListener, if set, is used instead of listening on
	// Broker.BindAddress:Broker.ListenPort (all interfaces, 10911 by
	// default) for RocketMQ remoting clients. Its port becomes
	// Broker.ListenPort, the port stored in every record and offset message
	// id, so a listener on port 0 works. Every listener speaks both gRPC
	// and remoting but the HTTP one (ports.go).
	RemotingListener net.Listener
	// Remoting configures the remoting front end (long polling bound,
	// notifications); its Logger defaults to the broker's.
	Remoting remotingapi.Config
	// GRPCOptions are added to the gRPC server after its defaults
	// (grpcapi.NewServer).
	GRPCOptions []grpc.ServerOption

	// Epochs is the broker's epoch file in controller mode (Member sets
	// it): a master labels the frames it ships with it, a slave checks its
	// history against its master's. nil: no epochs (static roles).
	Epochs *epoch.File
	// WaitFor, when set, names the slaves a SYNC_MASTER waits for before
	// an ack (the controller's in-sync set less the master; Member sets
	// it), instead of any inSyncReplicas-1 connected slaves.
	WaitFor func() []int64
	// ConfirmBy, when set, names the slaves whose acks bound what a
	// master's consumers read (the controller's in-sync set less the
	// master; Member sets it): a message reaches its consume queue once
	// each holds it, so that no failover takes back a message a consumer
	// read. A slave with Epochs reads up to what its master confirms.
	ConfirmBy func() []int64
	// HAListener, if set, is where a master serves its log to its slaves
	// instead of listening on haListenPort (Member lends its listener to
	// each Server it runs). Close closes it.
	HAListener net.Listener
	// HAAdvertiseAddr is the HA address a Member registers with the
	// controller, where its slaves dial it as master, when that is not its
	// HA listener's (a proxy or NAT in front). Default the listener's.
	HAAdvertiseAddr string

	// exposureChecked: the Member checked the listen addresses
	// (checkExposure) once for all its Servers.
	exposureChecked bool
}

// maxRemotingRequestsPerConn bounds the requests a remoting connection has
// in progress, as grpcapi.MaxStreamsPerConn does a gRPC one's. A RocketMQ
// client holds a long-polling pull open per queue it consumes from this
// broker, all on one connection: far above the remoting default of 256.
const maxRemotingRequestsPerConn = grpcapi.MaxStreamsPerConn

// Server is a running broker: the core, its gRPC services (Messaging,
// Admin), its RocketMQ remoting front end, its HTTP endpoints and its
// nameserver registration.
type Server struct {
	b               *broker.Broker
	messaging       *grpcapi.Messaging
	grpcServer      *grpc.Server
	httpServer      *http.Server
	remotingHandler *remotingapi.Handler
	remotingServer  *remoting.Server
	ports           ports
	tls             *tlsx.Server // the ports' TLS (tls.server.*); nil: plaintext only
	dial            *tlsx.Client // the TLS the broker dials with (tls.enable); nil: plaintext
	reg             atomic.Pointer[Registrar]
	ha              haState // replication.go
	regVersion      regVersion
	grpcAddr        string
	httpAddr        string
	remotingAddr    string
	log             *slog.Logger
	wg              sync.WaitGroup
	once            sync.Once
	closeErr        error
}

// Start recovers the broker's store, starts serving and registers with the
// nameservers.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s := &Server{}
	bc := cfg.Broker
	prev := bc.OnTopicsChanged
	bc.OnTopicsChanged = func() {
		if prev != nil {
			prev()
		}
		if r := s.reg.Load(); r != nil {
			r.Changed()
		}
	}
	bc.SyncTopicRoutes = func(ctx context.Context) {
		if r := s.reg.Load(); r != nil {
			_ = r.Sync(ctx) // a nameserver down: answered without it, as the change is stored
		}
	}
	err := bc.Validate() // before listening on what it names
	if err == nil && !cfg.exposureChecked {
		err = checkExposure(cfg, bc)
	}
	var signer *auth.Signer
	if err == nil {
		signer, err = innerSigner(bc)
	}
	if err != nil {
		closeAll([]net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener})
		return nil, err
	}
	if err := s.loadTLS(bc); err != nil {
		closeAll([]net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener})
		return nil, err
	}
	lis, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	grpcLis, httpLis, remotingLis := lis[0], lis[1], lis[2]
	s.grpcAddr, s.httpAddr = advertised(grpcLis.Addr(), bc.BrokerIP1), httpLis.Addr().String()
	s.remotingAddr = advertised(remotingLis.Addr(), bc.BrokerIP1)
	bc.GRPCListenAddr, bc.HTTPListenAddr = s.grpcAddr, s.httpAddr
	bc.ListenPort = remotingLis.Addr().(*net.TCPAddr).Port // the store host in records: the port clients reach
	if s.ha.confirm = newConfirmState(cfg); s.ha.confirm != nil {
		bc.DispatchLimit = s.ha.confirm.limit
	}
	b, err := broker.Open(ctx, bc)
	if err != nil {
		closeAll(lis)
		return nil, err
	}
	s.b, s.log = b, b.Config().Logger.With("component", "server")
	s.ha.signer = signer
	if err := s.startReplication(cfg); err != nil {
		closeAll(lis)
		return nil, errors.Join(err, b.Close(ctx))
	}
	rcfg := cfg.Remoting
	if rcfg.Logger == nil {
		rcfg.Logger = b.Config().Logger
	}
	s.remotingHandler = remotingapi.New(b, rcfg)
	s.remotingServer, err = remoting.NewServer(remoting.Config{Logger: b.Config().Logger, MaxConcurrentPerConn: maxRemotingRequestsPerConn}, s.remotingHandler)
	if err != nil {
		closeAll(lis)
		s.stopSlave()
		return nil, errors.Join(err, s.remotingHandler.Close(), b.Close(ctx), s.closeMaster())
	}
	gopts := cfg.GRPCOptions
	if s.tls != nil { // TLS is terminated by the ports: the credentials only tell which connections had it
		gopts = append([]grpc.ServerOption{grpc.Creds(tlsx.TerminatedCredentials())}, gopts...)
	}
	s.grpcServer, s.messaging = grpcapi.NewServer(b, haReporter{s}, gopts...)
	registered := func() bool { return len(b.Config().NamesrvAddr) == 0 || s.reg.Load() != nil }
	s.httpServer = &http.Server{Handler: httpHandler(b, registered), ReadHeaderTimeout: 5 * time.Second}
	if err := s.servePorts(grpcLis, httpLis, remotingLis); err != nil {
		closeAll(lis)
		s.stopSlave()
		return nil, errors.Join(err, s.remotingServer.Close(), s.remotingHandler.Close(), b.Close(ctx), s.closeMaster())
	}
	if len(b.Config().NamesrvAddr) > 0 {
		r, err := NewRegistrar(RegistrarConfig{
			NameServers: b.Config().NamesrvAddr, Interval: b.Config().RegisterNameServerPeriod,
			Registration: s.registration, OnResponse: s.registered, Logger: b.Config().Logger, Signer: signer,
			DialOptions: s.dialOptions(),
		})
		if err != nil {
			_ = s.Close(ctx)
			return nil, err
		}
		s.reg.Store(r)
	}
	return s, nil
}

// loadTLS loads the TLS of the ports (tls.server.*) and of the broker's
// dials (tls.enable, tls.client.*) (docs/SECURITY.md, "TLS").
func (s *Server) loadTLS(bc broker.Config) (err error) {
	if s.tls, err = bc.ServerTLS(bc.Logger); err != nil {
		return fmt.Errorf("%w: %w", broker.ErrInvalidConfig, err)
	}
	if s.dial, err = bc.ClientTLS(bc.Logger); err != nil {
		return fmt.Errorf("%w: %w", broker.ErrInvalidConfig, err)
	}
	return nil
}

// dialOptions are the gRPC dial options of the broker's own connections
// (nameservers): TLS with tls.enable.
func (s *Server) dialOptions() []grpc.DialOption {
	if s.dial == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(s.dial.Credentials())}
}

// listen returns the gRPC, HTTP and remoting listeners: cfg's, or new ones
// on the configured addresses.
func listen(cfg Config) ([]net.Listener, error) {
	gaddr, haddr, raddr := cfg.Broker.ListenAddrs()
	specs := []struct {
		what string
		lis  net.Listener
		addr string
	}{
		{"gRPC", cfg.GRPCListener, gaddr},
		{"HTTP", cfg.HTTPListener, haddr},
		{"remoting", cfg.RemotingListener, raddr},
	}
	out := make([]net.Listener, 0, len(specs))
	for _, sp := range specs {
		lis := sp.lis
		if lis == nil {
			var err error
			if lis, err = net.Listen("tcp", sp.addr); err != nil {
				closeAll(out)
				closeAll([]net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener})
				return nil, fmt.Errorf("broker %s listen: %w", sp.what, err)
			}
		}
		if _, ok := lis.Addr().(*net.TCPAddr); !ok && sp.what == "remoting" {
			closeAll(append(out, lis))
			return nil, fmt.Errorf("broker remoting listener: want TCP, got %s", lis.Addr().Network())
		}
		out = append(out, lis)
	}
	return out, nil
}

// closeAll closes the listeners that are set.
func closeAll(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// advertised is the address clients dial: brokerIP1 with the listener's
// port when the listener is on a wildcard address.
func advertised(a net.Addr, ip string) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if tcp.IP.IsUnspecified() {
		return net.JoinHostPort(orDefault(ip, broker.DefaultBrokerIP1), strconv.Itoa(tcp.Port))
	}
	return tcp.String()
}

// registration is what the registrar sends: this broker and every topic.
func (s *Server) registration() *gantryv1.RegisterBrokerRequest {
	c := s.b.Config()
	req := &gantryv1.RegisterBrokerRequest{
		Cluster: c.BrokerClusterName, BrokerName: c.BrokerName, BrokerId: c.BrokerID, Addr: s.grpcAddr,
		RemotingAddr: s.remotingAddr, HaAddr: s.ha.addr,
		Topics: map[string]*gantryv1.TopicInfo{},
	}
	v := s.regVersion.next(s.b.TopicsVersion())
	req.DataVersion = &gantryv1.DataVersion{TimestampMs: v.Timestamp, Counter: v.Counter}
	for _, tc := range s.b.Topics() {
		req.Topics[tc.TopicName] = &gantryv1.TopicInfo{ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
			Perm: tc.Perm, TopicSysFlag: tc.TopicSysFlag, Order: tc.Order}
	}
	return req
}

// Broker returns the broker core.
func (s *Server) Broker() *broker.Broker { return s.b }

// GRPCAddr returns the address clients dial (registered with the nameservers).
func (s *Server) GRPCAddr() string { return s.grpcAddr }

// HTTPAddr returns the metrics and health address.
func (s *Server) HTTPAddr() string { return s.httpAddr }

// RemotingStats returns the remoting server's connection and request
// counters.
func (s *Server) RemotingStats() remoting.Stats { return s.remotingServer.Stats() }

// remotingDrain bounds how long Close waits for the remoting answers of
// the calls the broker finished (held pulls woken) to go out.
const remotingDrain = time.Second

// drainRemoting waits until no remoting request is being handled (their
// answers are written), at most remotingDrain or until ctx ends. Requests
// still arriving are answered at once (the broker is closed), so it
// returns quickly unless clients keep sending.
func (s *Server) drainRemoting(ctx context.Context) {
	deadline := time.NewTimer(remotingDrain)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.remotingServer.Stats().InFlight > 0 {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// RemotingAddr returns the address RocketMQ remoting clients dial
// (registered with the nameservers; its port is the store host's).
func (s *Server) RemotingAddr() string { return s.remotingAddr }

// Kill stops the server the way a crash looks from outside: registration
// streams and client connections are cut at once, nothing is unregistered
// and calls in flight fail. The store is still closed properly. For tests of
// what clients and nameservers do when a broker dies.
func (s *Server) Kill() error {
	s.once.Do(func() {
		s.stopSlave()
		if r := s.reg.Load(); r != nil {
			r.Abandon()
		}
		s.messaging.Shutdown()
		s.grpcServer.Stop()
		_ = s.httpServer.Close()
		_ = s.remotingServer.Close() // cuts remoting connections: held pulls end with them
		s.ports.close()
		s.wg.Wait()
		s.closeErr = errors.Join(s.b.Close(context.Background()), s.remotingHandler.Close(), s.closeMaster())
	})
	return s.closeErr
}

// Close shuts down in order: unregister from the nameservers (clients stop
// routing here), stop accepting remoting connections, finish the calls in
// flight (held pulls are woken and answered; requests arriving meanwhile
// on open remoting connections get SERVICE_NOT_AVAILABLE, which clients
// retry elsewhere), flush and close the store, then close the remoting
// connections (their consumers are unregistered). It waits for everything
// until ctx ends, then cuts what is left.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.stopSlave() // nothing appends to a slave's log while it closes
		var errs []error
		if r := s.reg.Load(); r != nil {
			uctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			errs = append(errs, r.Close(uctx))
			cancel()
		}
		s.ports.stopRemotingAccepts()
		s.messaging.Shutdown() // producers' send streams end; they reconnect elsewhere
		done := make(chan struct{})
		go func() { s.grpcServer.GracefulStop(); close(done) }()
		closed := make(chan error, 1)
		go func() { closed <- s.b.Close(ctx) }() // wakes held pulls so GracefulStop can finish
		select {
		case <-done:
		case <-ctx.Done():
			s.grpcServer.Stop()
			<-done
		}
		errs = append(errs, <-closed, s.closeMaster())
		s.drainRemoting(ctx)
		errs = append(errs, s.remotingServer.Close(), s.remotingHandler.Close())
		errs = append(errs, s.httpServer.Shutdown(ctx))
		s.ports.close()
		s.wg.Wait()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
