package nameserver_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/tlsx"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
)

// A nameserver with TLS required serves gRPC and remoting over TLS and
// tells plaintext clients, in their protocol, that TLS is required; a
// permissive one serves both.
func TestServerTLS(t *testing.T) {
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"127.0.0.1"})
	require.NoError(t, err)
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey})
	require.NoError(t, err)
	cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA})
	require.NoError(t, err)
	for _, required := range []bool{true, false} {
		s, err := nameserver.NewServer(nameserver.Config{TLS: srv.Config(), RequireTLS: required})
		require.NoError(t, err)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- s.Serve(lis) }()
		addr := lis.Addr().String()

		listTopics := func(creds credentials.TransportCredentials) error {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			require.NoError(t, err)
			defer cc.Close()
			_, err = gantryv1.NewNameServerClient(cc).ListTopics(t.Context(), &gantryv1.ListTopicsRequest{})
			return err
		}
		route := func(conf *tls.Config) *remoting.Command {
			rc, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{TLS: conf})
			require.NoError(t, err)
			defer rc.Close()
			resp, err := rc.Invoke(t.Context(), remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Orders"}))
			require.NoError(t, err)
			return resp
		}
		assert.NoError(t, listTopics(cl.Credentials()), "gRPC over TLS")
		assert.Equal(t, remoting.ResTopicNotExist, route(cl.Config("127.0.0.1")).ResponseCode(), "remoting over TLS")
		err = listTopics(insecure.NewCredentials())
		resp := route(nil)
		if required {
			assert.Equal(t, codes.Unauthenticated, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), "requires TLS")
			assert.Equal(t, remoting.ResNoPermission, resp.ResponseCode())
			assert.Contains(t, resp.Remark, "requires TLS")
		} else {
			assert.NoError(t, err)
			assert.Equal(t, remoting.ResTopicNotExist, resp.ResponseCode())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		require.NoError(t, s.Close(ctx))
		cancel()
		require.NoError(t, <-done)
	}
	_, err = nameserver.NewServer(nameserver.Config{RequireTLS: true})
	assert.ErrorContains(t, err, "RequireTLS needs TLS")
}
