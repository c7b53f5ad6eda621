package tlsx_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gantrymq/gantry/internal/tlsx"
)

// A Client's Credentials reach a gRPC server serving the Server's Config,
// with the client certificate it requires.
func TestCredentials(t *testing.T) {
	f := devCerts(t)
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey,
		ClientCAFile: f.CA, ClientAuth: tlsx.RequireClientAuth})
	require.NoError(t, err)
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(srv.Config())))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })

	check := func(cc tlsx.ClientConfig) error {
		cl, err := tlsx.NewClient(cc)
		require.NoError(t, err)
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(cl.Credentials()))
		require.NoError(t, err)
		defer conn.Close()
		_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}
	assert.NoError(t, check(tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}))
	assert.Error(t, check(tlsx.ClientConfig{CAFile: f.CA}), "no client certificate")
	assert.Error(t, check(tlsx.ClientConfig{CertFile: f.ClientCert, KeyFile: f.ClientKey}), "the system's roots do not know the CA")
}
