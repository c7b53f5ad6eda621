package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/internal/muxlisten"
)

// TLS of a controller member (docs/SECURITY.md, "TLS"): with Config.TLS its
// raft port and its gRPC service terminate TLS in a muxlisten.Mux (which
// also takes plaintext peers and clients unless Config.RequireTLS), and
// raft dials the other members with Config.RaftDial.

// tlsRequired is what a plaintext gRPC client of a member that requires
// TLS is told.
const tlsRequired = "this Gantry controller requires TLS (--tls-mode enforcing): connect with TLS " +
	"(brokers: tls.enable=true; gantry admin: --tls)"

// muxStream is raft's stream layer over a muxlisten.Mux that terminates
// TLS: Accept takes the Mux's connections, Dial is Config.RaftDial.
type muxStream struct {
	net.Listener // the Mux's listener of every protocol
	mux          *muxlisten.Mux
	adv          net.Addr
	dial         func(ctx context.Context, addr string) (net.Conn, error)
	served       chan struct{} // closed when the Mux's Serve returns
	once         sync.Once
	closeErr     error
}

// tlsTransport returns raft's transport on cfg.BindAddr with TLS.
func tlsTransport(cfg Config, adv net.Addr, logger hclog.Logger) (*raft.NetworkTransport, error) {
	lis, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, err
	}
	m := muxlisten.New(lis, muxlisten.Config{Name: "controller raft " + lis.Addr().String(), Logger: cfg.Logger,
		TLS: cfg.TLS, RequireTLS: cfg.RequireTLS})
	s := &muxStream{Listener: m.Listener(muxlisten.AllProtocols()...), mux: m, adv: adv, dial: cfg.RaftDial, served: make(chan struct{})}
	if s.dial == nil {
		s.dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	go func() {
		defer close(s.served)
		_ = m.Serve()
	}()
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: s, MaxPool: 3, Timeout: 10 * time.Second, Logger: logger}), nil
}

func (s *muxStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.dial(ctx, string(addr))
	if err != nil {
		return nil, fmt.Errorf("controller: dial raft peer %s: %w", addr, err)
	}
	return c, nil
}

func (s *muxStream) Addr() net.Addr { return s.adv }

// Close closes the port and waits for the Mux.
func (s *muxStream) Close() error {
	s.once.Do(func() {
		s.closeErr = s.mux.Close()
		<-s.served
	})
	return s.closeErr
}

// newTLSRefuser is the gRPC server that answers the plaintext clients of
// a member that requires TLS.
func newTLSRefuser() *grpc.Server {
	return grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return status.Error(codes.Unauthenticated, tlsRequired)
	}))
}

// serveTLS serves the service on lis through a Mux that terminates TLS,
// until Close (or lis fails), then closes the Mux.
func (s *Service) serveTLS(lis net.Listener) error {
	m := muxlisten.New(lis, muxlisten.Config{Name: "controller gRPC " + lis.Addr().String(), Logger: s.cfg.Logger,
		TLS: s.cfg.TLS, RequireTLS: s.cfg.RequireTLS})
	grpcLis := m.Listener(muxlisten.HTTP2)
	var wg sync.WaitGroup
	if s.refuser != nil {
		refused := m.Refused(muxlisten.HTTP2)
		wg.Go(func() { _ = s.refuser.Serve(refused) })
	}
	var muxErr error
	wg.Go(func() { muxErr = m.Serve() })
	err := s.gs.Serve(grpcLis)
	_ = m.Close()
	wg.Wait()
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("controller: serve: %w", err)
	}
	if muxErr != nil {
		return fmt.Errorf("controller: serve: %w", muxErr)
	}
	return nil
}
