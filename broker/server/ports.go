package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/internal/inlinenet"
	"github.com/gantrymq/gantry/internal/muxlisten"
	"github.com/gantrymq/gantry/remoting"
)

// The broker's ports (docs/BROKER.md, "Ports"). The gRPC port
// (grpcListenAddr, 8081) and the remoting port (listenPort, 10911) each
// speak both protocols: the first bytes of a connection tell a gRPC client
// from a RocketMQ remoting client (internal/muxlisten), so either address
// works for either client. The HTTP port serves HTTP only; a gRPC or
// remoting client that reaches it is answered, in its protocol, with an
// error naming the broker's other ports, and an HTTP request on a data
// port with 400 naming the HTTP port.
//
// With tls.server.mode permissive or enforcing every port, the HA port
// included, also terminates TLS and serves each protocol inside it
// (docs/SECURITY.md, "TLS"); enforcing answers a plaintext client, in its
// protocol, that the port requires TLS.

// ports are the multiplexers of the broker's three listeners and the
// servers that answer misdirected clients.
type ports struct {
	muxes       []*muxlisten.Mux
	remoting    []net.Listener // the remoting connections of each data port
	misHTTP     *http.Server   // HTTP/1 on a data port
	misGRPC     *grpc.Server   // gRPC on the HTTP port
	misRemoting *remoting.Server
	refused     *refusers // plaintext clients of ports that require TLS; nil unless enforcing
}

// refusers answer plaintext clients on a port that requires TLS, each in
// its protocol.
type refusers struct {
	grpc     *grpc.Server
	remoting *remoting.Server
	http     *http.Server // on a data port
	https    *http.Server // on the HTTP port: names the https:// URL
}

// servePorts starts serving the three listeners: gRPC and remoting on
// both data ports, HTTP on httpLis.
func (s *Server) servePorts(grpcLis, httpLis, remotingLis net.Listener) error {
	httpAddr := advertised(httpLis.Addr(), s.b.Config().BrokerIP1)
	wrong := fmt.Sprintf("%s is the Gantry broker's HTTP port (metrics, health): its gRPC API and RocketMQ remoting are at %s and %s",
		httpAddr, s.grpcAddr, s.remotingAddr)
	// The misdirect servers log nothing: their every request is a mistake
	// the client is told of.
	misRemoting, err := remoting.NewServer(remoting.Config{}, remoting.HandlerFunc(
		func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
			return remoting.ErrorResponse(req, remoting.ResSystemError, "%s", wrong)
		}))
	if err != nil {
		return err
	}
	p := &s.ports
	p.misRemoting = misRemoting
	p.misGRPC = grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return status.Error(codes.Unimplemented, wrong)
	}))
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	p.misHTTP = muxlisten.MisdirectedHTTP(fmt.Sprintf(
		"This is a Gantry broker's gRPC and RocketMQ remoting port: its HTTP endpoints (metrics, health) are at %s://%s/\n", scheme, httpAddr))

	if s.tls != nil && s.tls.Required() {
		if p.refused, err = newRefusers(httpAddr); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		what string
		lis  net.Listener
	}{{"gRPC", grpcLis}, {"remoting", remotingLis}} {
		mc := s.muxConfig("broker " + l.what + " " + l.lis.Addr().String())
		mc.WrapTLS = inlinenet.Wrap
		m := muxlisten.New(l.lis, mc)
		grpcConns, remotingConns, httpConns := m.Listener(muxlisten.HTTP2), m.Listener(muxlisten.Remoting, muxlisten.Unknown), m.Listener(muxlisten.HTTP1)
		p.muxes, p.remoting = append(p.muxes, m), append(p.remoting, remotingConns)
		s.serve("gRPC", func() error { return s.grpcServer.Serve(inlinenet.Listen(grpcConns)) })
		s.serve("remoting", func() error { return s.remotingServer.Serve(inlinenet.Listen(remotingConns)) })
		s.serve("HTTP misdirect", func() error { return p.misHTTP.Serve(httpConns) })
		if r := p.refused; r != nil {
			s.serveRefusals(m, r.http)
		}
		s.serve(l.what+" port", m.Serve)
	}
	mc := s.muxConfig("broker HTTP " + httpLis.Addr().String())
	mc.NextProtos = []string{"http/1.1"} // an HTTPS client offering h2 gets HTTP/1.1
	m := muxlisten.New(httpLis, mc)
	httpConns, grpcConns, remotingConns := m.Listener(muxlisten.HTTP1, muxlisten.Unknown), m.Listener(muxlisten.HTTP2), m.Listener(muxlisten.Remoting)
	p.muxes = append(p.muxes, m)
	s.serve("HTTP", func() error { return s.httpServer.Serve(httpConns) })
	s.serve("gRPC misdirect", func() error { return p.misGRPC.Serve(grpcConns) })
	s.serve("remoting misdirect", func() error { return p.misRemoting.Serve(remotingConns) })
	if r := p.refused; r != nil {
		s.serveRefusals(m, r.https)
	}
	s.serve("HTTP port", m.Serve)
	return nil
}

// muxConfig is the configuration of a port's multiplexer: with the ports'
// TLS, if any.
func (s *Server) muxConfig(name string) muxlisten.Config {
	mc := muxlisten.Config{Name: name, Logger: s.b.Config().Logger}
	if s.tls != nil {
		mc.TLS, mc.RequireTLS = s.tls.Config(), s.tls.Required()
	}
	return mc
}

// tlsRequired is what a plaintext client of a port that requires TLS is
// told.
const tlsRequired = "this Gantry port requires TLS (tls.server.mode=enforcing): connect with TLS " +
	"(Gantry's client: client.Config.TLS; gantry admin: --tls; RocketMQ clients: their TLS option, e.g. WithTls(true))"

// newRefusers makes the servers that tell plaintext clients the port
// requires TLS.
func newRefusers(httpAddr string) (*refusers, error) {
	rs, err := remoting.NewServer(remoting.Config{}, remoting.HandlerFunc(
		func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
			return remoting.ErrorResponse(req, remoting.ResNoPermission, "%s", tlsRequired)
		}))
	if err != nil {
		return nil, err
	}
	return &refusers{
		grpc: grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			return status.Error(codes.Unauthenticated, tlsRequired)
		})),
		remoting: rs,
		http:     muxlisten.MisdirectedHTTP("This Gantry broker port requires TLS (tls.server.mode=enforcing).\n"),
		https: muxlisten.MisdirectedHTTP(fmt.Sprintf("This Gantry broker port requires TLS (tls.server.mode=enforcing): use https://%s/\n",
			httpAddr)),
	}, nil
}

// serveRefusals serves the refusers on m's plaintext connections, h
// answering HTTP/1.
func (s *Server) serveRefusals(m *muxlisten.Mux, h *http.Server) {
	r := s.ports.refused
	grpcConns, remotingConns, httpConns := m.Refused(muxlisten.HTTP2), m.Refused(muxlisten.Remoting, muxlisten.Unknown), m.Refused(muxlisten.HTTP1)
	s.serve("gRPC TLS refusal", func() error { return r.grpc.Serve(grpcConns) })
	s.serve("remoting TLS refusal", func() error { return r.remoting.Serve(remotingConns) })
	s.serve("HTTP TLS refusal", func() error { return h.Serve(httpConns) })
}

// serve runs a server's Serve in a goroutine of s, logging how it failed
// unless it stopped because it was closed.
func (s *Server) serve(what string, serve func() error) {
	s.wg.Go(func() {
		err := serve()
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, http.ErrServerClosed) &&
			!errors.Is(err, net.ErrClosed) && !errors.Is(err, remoting.ErrClosed) {
			s.log.Error(what+" server stopped", "err", err)
		}
	})
}

// stopRemotingAccepts stops handing new remoting connections to the
// remoting server; gRPC connections are still accepted.
func (p *ports) stopRemotingAccepts() {
	for _, l := range p.remoting {
		l.Close()
	}
}

// close closes the misdirect servers and the ports.
func (p *ports) close() {
	if p.misGRPC != nil {
		p.misGRPC.Stop()
	}
	if p.misRemoting != nil {
		_ = p.misRemoting.Close()
	}
	if p.misHTTP != nil {
		_ = p.misHTTP.Close()
	}
	if r := p.refused; r != nil {
		r.grpc.Stop()
		_ = r.remoting.Close()
		_ = r.http.Close()
		_ = r.https.Close()
	}
	for _, m := range p.muxes {
		_ = m.Close()
	}
}
