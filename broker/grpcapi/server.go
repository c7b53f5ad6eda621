package grpcapi

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
	"github.com/gantrymq/gantry/broker"
)

// MaxRequestBytes is the largest request the broker's gRPC server reads.
const MaxRequestBytes = 64 << 20

// ServerConfig configures a broker server.
type ServerConfig struct {
	// Broker is the broker's configuration (broker.conf). Its
	// OnTopicsChanged is set by the server.
	Broker broker.Config
	// GRPCListener and HTTPListener, if set, are used instead of listening
	// on Broker.GRPCListenAddr and Broker.HTTPListenAddr (tests pass
	// 127.0.0.1:0 listeners).
	GRPCListener, HTTPListener net.Listener
	// GRPCOptions are added to the gRPC server.
	GRPCOptions []grpc.ServerOption
}

// Server is a running broker: the core, its gRPC services (Messaging,
// Admin), its HTTP endpoints and its nameserver registration.
type Server struct {
	b        *broker.Broker
	msg      *Messaging
	gs       *grpc.Server
	hs       *http.Server
	reg      atomic.Pointer[Registrar]
	grpcAddr string
	httpAddr string
	log      *slog.Logger
	wg       sync.WaitGroup
	once     sync.Once
	closeErr error
}

// Start recovers the broker's store, starts serving and registers with the
// nameservers.
func Start(ctx context.Context, cfg ServerConfig) (*Server, error) {
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
	glis, hlis := cfg.GRPCListener, cfg.HTTPListener
	var err error
	if glis == nil {
		if glis, err = net.Listen("tcp", orDefault(bc.GRPCListenAddr, broker.DefaultGRPCListenAddr)); err != nil {
			return nil, fmt.Errorf("broker gRPC listen: %w", err)
		}
	}
	if hlis == nil {
		if hlis, err = net.Listen("tcp", orDefault(bc.HTTPListenAddr, broker.DefaultHTTPListenAddr)); err != nil {
			glis.Close()
			return nil, fmt.Errorf("broker HTTP listen: %w", err)
		}
	}
	s.grpcAddr, s.httpAddr = advertised(glis.Addr(), bc.BrokerIP1), hlis.Addr().String()
	bc.GRPCListenAddr, bc.HTTPListenAddr = s.grpcAddr, s.httpAddr
	b, err := broker.Open(ctx, bc)
	if err != nil {
		glis.Close()
		hlis.Close()
		return nil, err
	}
	s.b, s.log = b, b.Config().Logger.With("component", "server")

	// A batch may carry messages up to maxMessageSize each: accept requests
	// well beyond gRPC's 4 MiB default, so the broker can name the problem.
	opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRequestBytes)}, cfg.GRPCOptions...)
	s.gs = grpc.NewServer(opts...)
	s.msg = NewMessaging(b)
	gantryv1.RegisterMessagingServer(s.gs, s.msg)
	gantryv1.RegisterAdminServer(s.gs, NewAdmin(b))
	registered := func() bool { return len(b.Config().NamesrvAddr) == 0 || s.reg.Load() != nil }
	s.hs = &http.Server{Handler: httpHandler(b, registered), ReadHeaderTimeout: 5 * time.Second}
	s.wg.Go(func() {
		if err := s.gs.Serve(glis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("gRPC server stopped", "err", err)
		}
	})
	s.wg.Go(func() {
		if err := s.hs.Serve(hlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP server stopped", "err", err)
		}
	})
	if len(b.Config().NamesrvAddr) > 0 {
		r, err := NewRegistrar(RegistrarConfig{
			NameServers: b.Config().NamesrvAddr, Interval: b.Config().RegisterNameServerPeriod,
			Registration: s.registration, Logger: b.Config().Logger,
		})
		if err != nil {
			_ = s.Close(ctx)
			return nil, err
		}
		s.reg.Store(r)
	}
	return s, nil
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
		Topics: map[string]*gantryv1.TopicInfo{},
	}
	v := s.b.Store().Metadata().TopicsVersion()
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

// Kill stops the server the way a crash looks from outside: registration
// streams and client connections are cut at once, nothing is unregistered
// and calls in flight fail. The store is still closed properly. For tests of
// what clients and nameservers do when a broker dies.
func (s *Server) Kill() error {
	s.once.Do(func() {
		if r := s.reg.Load(); r != nil {
			r.Abandon()
		}
		s.msg.Shutdown()
		s.gs.Stop()
		_ = s.hs.Close()
		s.wg.Wait()
		s.closeErr = s.b.Close(context.Background())
	})
	return s.closeErr
}

// Close shuts down in order: unregister from the nameservers (clients stop
// routing here), finish the calls in flight (held pulls are woken), flush
// and close the store. It waits for everything until ctx ends, then cuts
// what is left.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		var errs []error
		if r := s.reg.Load(); r != nil {
			uctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			errs = append(errs, r.Close(uctx))
			cancel()
		}
		s.msg.Shutdown() // producers' send streams end; they reconnect elsewhere
		done := make(chan struct{})
		go func() { s.gs.GracefulStop(); close(done) }()
		closed := make(chan error, 1)
		go func() { closed <- s.b.Close(ctx) }() // wakes held pulls so GracefulStop can finish
		select {
		case <-done:
		case <-ctx.Done():
			s.gs.Stop()
			<-done
		}
		errs = append(errs, <-closed)
		errs = append(errs, s.hs.Shutdown(ctx))
		s.wg.Wait()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
