package nameserver

import (
	"context"
	"net/http"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/internal/muxlisten"
	"github.com/gantrymq/gantry/remoting"
)

// tlsRequired is what a plaintext client of a nameserver that requires
// TLS is told.
const tlsRequired = "this Gantry nameserver requires TLS (--tls-mode enforcing): connect with TLS " +
	"(Gantry's client: client.Config.TLS; brokers: tls.enable=true; gantry admin: --tls; RocketMQ clients: their TLS option, e.g. WithTls(true))"

// refusers answer the plaintext clients of a nameserver that requires
// TLS, each in its protocol (docs/SECURITY.md, "TLS").
type refusers struct {
	grpc     *grpc.Server
	remoting *remoting.Server
	http     *http.Server
}

func newRefusers() (*refusers, error) {
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
		http:     muxlisten.MisdirectedHTTP("This Gantry nameserver port requires TLS; it serves gRPC and RocketMQ remoting, not HTTP.\n"),
	}, nil
}

// serve serves the refusers on m's plaintext connections, in goroutines of
// wg that end when m closes.
func (r *refusers) serve(wg *sync.WaitGroup, m *muxlisten.Mux) {
	grpcLis, remotingLis, httpLis := m.Refused(muxlisten.HTTP2), m.Refused(muxlisten.Remoting, muxlisten.Unknown), m.Refused(muxlisten.HTTP1)
	wg.Go(func() { _ = r.grpc.Serve(grpcLis) })
	wg.Go(func() { _ = r.remoting.Serve(remotingLis) })
	wg.Go(func() { _ = r.http.Serve(httpLis) })
}

func (r *refusers) close() {
	r.grpc.Stop()
	_ = r.remoting.Close()
	_ = r.http.Close()
}
