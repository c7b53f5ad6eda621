package nameserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/auth/grpcauth"
	"github.com/gantrymq/gantry/internal/muxlisten"
	"github.com/gantrymq/gantry/internal/streamx"
	"github.com/gantrymq/gantry/internal/tlsx"
	"github.com/gantrymq/gantry/remoting"
)

// Server is a nameserver: the Registry behind the gRPC NameServer service
// and the RocketMQ remoting front end (NewRemotingHandler), both on every
// port it serves.
type Server struct {
	gantryv1.UnimplementedNameServerServer
	reg             *Registry
	grpcServer      *grpc.Server
	remotingServer  *remoting.Server
	misdirectedHTTP *http.Server // answers HTTP/1 requests: this is no HTTP port
	tls             *tls.Config  // Config.TLS
	requireTLS      bool
	refused         *refusers // plaintext clients with RequireTLS; nil without
	log             *slog.Logger
	conns           atomic.Int64
	shutdown        chan struct{} // closed by Close: registration streams end
	users           *auth.Store   // nil with authentication off
	guard           *auth.Guard   // nil with authentication off

	mu     sync.Mutex
	closed bool
	muxes  map[*muxlisten.Mux]struct{}

	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

// MaxRequestBytes is the largest request the nameserver's gRPC server
// reads (gRPC refuses a larger one from its length prefix, unread): a
// broker's registration, a few dozen bytes per topic, is the largest.
const MaxRequestBytes = 4 << 20

// NewServer makes a nameserver and starts its expiry loop. Serve it on
// listeners with Serve; Close stops it. opts are added to the gRPC
// server's after a receive limit of MaxRequestBytes, with
// cfg.AuthenticationEnabled the calls' authentication, and with cfg.TLS
// the credentials of the TLS its ports terminate.
func NewServer(cfg Config, opts ...grpc.ServerOption) (*Server, error) {
	reg, err := NewRegistry(cfg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	users, guard, err := openAuth(cfg)
	if err != nil {
		return nil, err
	}
	closeUsers := func() {
		if users != nil {
			_ = users.Close()
		}
	}
	remotingServer, err := remoting.NewServer(remoting.Config{Logger: log}, NewRemotingHandler(reg, guard))
	if err != nil {
		closeUsers()
		return nil, err
	}
	opts = append(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRequestBytes), grpc.UnknownServiceHandler(notHere)},
		grpcauth.ServerOptions(guard, grpcClass)...), opts...)
	var refused *refusers
	if cfg.TLS != nil { // the ports terminate TLS: the credentials only tell which connections had it
		opts = append([]grpc.ServerOption{grpc.Creds(tlsx.TerminatedCredentials())}, opts...)
		if cfg.RequireTLS {
			if refused, err = newRefusers(); err != nil {
				closeUsers()
				return nil, errors.Join(err, remotingServer.Close())
			}
		}
	}
	s := &Server{
		users:           users,
		guard:           guard,
		reg:             reg,
		grpcServer:      grpc.NewServer(opts...),
		remotingServer:  remotingServer,
		misdirectedHTTP: muxlisten.MisdirectedHTTP("This is a Gantry nameserver port: it serves gRPC and RocketMQ remoting, not HTTP.\n"),
		tls:             cfg.TLS,
		requireTLS:      cfg.RequireTLS,
		refused:         refused,
		log:             log,
		shutdown:        make(chan struct{}),
		muxes:           make(map[*muxlisten.Mux]struct{}),
	}
	gantryv1.RegisterNameServerServer(s.grpcServer, s)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Go(func() { reg.Run(ctx) })
	return s, nil
}

// notHere answers a call of a service the nameserver does not serve (a
// broker's, from a client given the nameserver's address as a broker's).
func notHere(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	return status.Errorf(codes.Unimplemented, "this is a Gantry nameserver, which does not serve %s: "+
		"a broker's addresses are in its cluster info (gantry admin clusterList)", method)
}

// Registry returns the server's registry.
func (s *Server) Registry() *Registry { return s.reg }

// Guard returns the server's authentication (nil when off: a nil
// *auth.Guard allows everything), for a controller run beside it.
func (s *Server) Guard() *auth.Guard { return s.guard }

// Serve answers on lis until Close, then returns nil; it returns the
// listener's error if it fails first. Every listener speaks both
// protocols: the first bytes of each connection tell a gRPC client (a
// broker registering, Gantry's clients) from a RocketMQ remoting client
// (internal/muxlisten), so RocketMQ's 9876 and Gantry's 9877 serve alike.
// An HTTP/1 request gets 400 saying so; a connection that sends nothing
// for 10 s is closed. With Config.TLS each protocol is served over TLS too.
func (s *Server) Serve(lis net.Listener) error {
	m := muxlisten.New(lis, muxlisten.Config{Name: "nameserver " + lis.Addr().String(), Logger: s.log, TLS: s.tls, RequireTLS: s.requireTLS})
	grpcLis := m.Listener(muxlisten.HTTP2)
	remotingLis := m.Listener(muxlisten.Remoting, muxlisten.Unknown) // the remoting server names a bad frame
	httpLis := m.Listener(muxlisten.HTTP1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = m.Close()
		return nil
	}
	s.muxes[m] = struct{}{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.grpcServer.Serve(grpcLis) }) // each returns once the Mux closes its listener
	wg.Go(func() { _ = s.remotingServer.Serve(remotingLis) })
	wg.Go(func() { _ = s.misdirectedHTTP.Serve(httpLis) })
	if r := s.refused; r != nil {
		r.serve(&wg, m)
	}
	err := m.Serve()
	wg.Wait()
	s.mu.Lock()
	delete(s.muxes, m)
	s.mu.Unlock()
	_ = m.Close()
	return err
}

// Close stops serving (finishing calls in flight until ctx ends, then
// cutting them), closes the listeners and stops the expiry loop.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		close(s.shutdown)
		s.mu.Lock()
		s.closed = true
		muxes := make([]*muxlisten.Mux, 0, len(s.muxes))
		for m := range s.muxes {
			muxes = append(muxes, m)
		}
		s.mu.Unlock()
		done := make(chan struct{})
		go func() { s.grpcServer.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpcServer.Stop()
			<-done
		}
		_ = s.remotingServer.Close()
		_ = s.misdirectedHTTP.Close()
		if r := s.refused; r != nil {
			r.close()
		}
		for _, m := range muxes {
			_ = m.Close()
		}
		s.stop()
		s.wg.Wait()
		if s.users != nil {
			_ = s.users.Close()
		}
	})
	return nil
}

// RegisterBroker implements the registration stream: every request
// registers, and the brokers registered on the stream are dropped when it
// ends (the broker died or its connection broke).
func (s *Server) RegisterBroker(stream grpc.BidiStreamingServer[gantryv1.RegisterBrokerRequest, gantryv1.RegisterBrokerResponse]) error {
	conn := "grpc-" + strconv.FormatInt(s.conns.Add(1), 10)
	if p, ok := peer.FromContext(stream.Context()); ok {
		conn += "-" + p.Addr.String()
	}
	defer s.reg.Disconnected(conn)
	ctx := stream.Context()
	reqs := streamx.Recv(ctx, stream.Recv)
	for {
		var r streamx.Msg[*gantryv1.RegisterBrokerRequest]
		select {
		case r = <-reqs:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.shutdown:
			return status.Error(codes.Unavailable, "nameserver shutting down")
		}
		if errors.Is(r.Err, io.EOF) {
			return nil
		}
		if r.Err != nil {
			return r.Err
		}
		if err := s.stillCluster(ctx); err != nil {
			return err
		}
		res, err := s.reg.Register(fromRequest(r.Value, conn))
		if err != nil {
			return toStatus(err)
		}
		if err := stream.Send(&gantryv1.RegisterBrokerResponse{Changed: res.Changed,
			MasterAddr: res.MasterAddr, MasterHaAddr: res.MasterHAAddr}); err != nil {
			return err
		}
	}
}

func fromRequest(req *gantryv1.RegisterBrokerRequest, conn string) Registration {
	reg := Registration{
		Cluster: req.GetCluster(), BrokerName: req.GetBrokerName(), BrokerID: req.GetBrokerId(),
		Addr: req.GetAddr(), RemotingAddr: req.GetRemotingAddr(), HAAddr: req.GetHaAddr(), Conn: conn,
		Topics:      make(map[string]TopicInfo, len(req.GetTopics())),
		DataVersion: DataVersion{Timestamp: req.GetDataVersion().GetTimestampMs(), Counter: req.GetDataVersion().GetCounter()},
	}
	for name, t := range req.GetTopics() {
		reg.Topics[name] = TopicInfo{ReadQueueNums: t.GetReadQueueNums(), WriteQueueNums: t.GetWriteQueueNums(),
			Perm: t.GetPerm(), TopicSysFlag: t.GetTopicSysFlag(), Order: t.GetOrder()}
	}
	return reg
}

// UnregisterBroker implements the service.
func (s *Server) UnregisterBroker(_ context.Context, req *gantryv1.UnregisterBrokerRequest) (*gantryv1.UnregisterBrokerResponse, error) {
	s.reg.Unregister(req.GetCluster(), req.GetBrokerName(), req.GetBrokerId(), req.GetAddr())
	return &gantryv1.UnregisterBrokerResponse{}, nil
}

// GetRoute implements the service.
func (s *Server) GetRoute(_ context.Context, req *gantryv1.GetRouteRequest) (*gantryv1.GetRouteResponse, error) {
	route, err := s.reg.Route(req.GetTopic())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &gantryv1.GetRouteResponse{}
	for _, q := range route.QueueDatas {
		resp.QueueDatas = append(resp.QueueDatas, &gantryv1.QueueData{BrokerName: q.BrokerName, ReadQueueNums: q.ReadQueueNums,
			WriteQueueNums: q.WriteQueueNums, Perm: q.Perm, TopicSysFlag: q.TopicSysFlag})
	}
	for _, b := range route.BrokerDatas {
		resp.BrokerDatas = append(resp.BrokerDatas, toBrokerData(b))
	}
	return resp, nil
}

func toBrokerData(b BrokerData) *gantryv1.BrokerData {
	return &gantryv1.BrokerData{Cluster: b.Cluster, BrokerName: b.BrokerName, BrokerAddrs: b.BrokerAddrs, RemotingAddrs: b.RemotingAddrs}
}

// GetClusterInfo implements the service.
func (s *Server) GetClusterInfo(context.Context, *gantryv1.GetClusterInfoRequest) (*gantryv1.GetClusterInfoResponse, error) {
	info := s.reg.ClusterInfo()
	resp := &gantryv1.GetClusterInfoResponse{Clusters: map[string]*gantryv1.BrokerNames{}, Brokers: map[string]*gantryv1.BrokerData{}}
	for c, names := range info.Clusters {
		resp.Clusters[c] = &gantryv1.BrokerNames{Names: names}
	}
	for name, b := range info.Brokers {
		resp.Brokers[name] = toBrokerData(b)
	}
	return resp, nil
}

// ListTopics implements the service.
func (s *Server) ListTopics(context.Context, *gantryv1.ListTopicsRequest) (*gantryv1.ListTopicsResponse, error) {
	return &gantryv1.ListTopicsResponse{Topics: s.reg.Topics()}, nil
}

// toStatus maps registry errors to gRPC statuses.
func toStatus(err error) error {
	switch {
	case errors.Is(err, ErrTopicNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrConflict):
		return status.Error(codes.AlreadyExists, err.Error())
	}
	return status.Error(codes.Internal, fmt.Sprintf("nameserver: %v", err))
}
