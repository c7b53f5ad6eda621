package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/internal/tlsx"
	"github.com/gantrymq/gantry/remoting"
)

// startTLS starts a broker whose ports serve TLS in mode with the dev
// certificates f, optional client certificates.
func startTLS(t *testing.T, f tlsx.DevFiles, mode broker.TLSMode) *server.Server {
	t.Helper()
	s, err := server.Start(t.Context(), server.Config{
		Broker: broker.Config{
			StorePathRootDir: filepath.Join(t.TempDir(), "store"),
			Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			TLSConfig: broker.TLSConfig{TLSServerMode: mode, TLSServerCertPath: f.ServerCert, TLSServerKeyPath: f.ServerKey,
				TLSServerTrustCertPath: f.CA, TLSServerNeedClientAuth: broker.TLSClientAuthOptional},
		},
		GRPCListener: loopback(t), HTTPListener: loopback(t), RemotingListener: loopback(t),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	return s
}

func devTLS(t *testing.T) (tlsx.DevFiles, *tlsx.Client) {
	t.Helper()
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"127.0.0.1"})
	require.NoError(t, err)
	cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	require.NoError(t, err)
	return f, cl
}

// adminTLS is an Admin client of the gRPC API at addr over TLS.
func adminTLS(t *testing.T, addr string, cl *tlsx.Client) gantryv1.AdminClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(cl.Credentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return gantryv1.NewAdminClient(cc)
}

// remotingSendTLS sends a message to topic T over remoting at addr, with
// TLS when conf is set.
func remotingSendTLS(t *testing.T, addr string, conf *tls.Config) *remoting.Command {
	t.Helper()
	cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{TLS: conf})
	require.NoError(t, err)
	defer cl.Close()
	req := remoting.NewRequest(remoting.ReqSendMessage, map[string]string{"producerGroup": "PG", "topic": "T", "queueId": "0"})
	req.Body = []byte("hi")
	resp, err := cl.Invoke(t.Context(), req)
	require.NoError(t, err)
	return resp
}

// get GETs url with client and returns the status and body.
func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// With tls.server.mode=enforcing every port serves each of its protocols
// over TLS, and tells a plaintext client, in its protocol, that TLS is
// required.
func TestTLSEnforcing(t *testing.T) {
	f, cl := devTLS(t)
	s := startTLS(t, f, broker.TLSEnforcing)
	conf := cl.Config("127.0.0.1")
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}

	for _, addr := range []string{s.GRPCAddr(), s.RemotingAddr()} {
		st, err := adminTLS(t, addr, cl).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
		require.NoError(t, err, "gRPC over TLS at %s", addr)
		assert.Equal(t, s.RemotingAddr(), st.GetStatus()["brokerAddr"])
		resp := remotingSendTLS(t, addr, conf)
		assert.Equal(t, remoting.ResSuccess, resp.ResponseCode(), "remoting over TLS at %s: %s", addr, resp.Remark)
		code, body := get(t, https, "https://"+addr+"/metrics")
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, body, "https://"+s.HTTPAddr()+"/")

		_, err = adminAt(t, addr).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "plaintext gRPC at %s", addr)
		assert.Contains(t, status.Convert(err).Message(), "requires TLS")
		resp = remotingSendTLS(t, addr, nil)
		assert.Equal(t, remoting.ResNoPermission, resp.ResponseCode(), "plaintext remoting at %s", addr)
		assert.Contains(t, resp.Remark, "requires TLS")
		code, body = get(t, http.DefaultClient, "http://"+addr+"/metrics")
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, body, "requires TLS")
	}
	code, body := get(t, https, "https://"+s.HTTPAddr()+"/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = get(t, http.DefaultClient, "http://"+s.HTTPAddr()+"/healthz")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "use https://"+s.HTTPAddr()+"/")
	_, err := adminTLS(t, s.HTTPAddr(), cl).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
	assert.Error(t, err, "gRPC on the HTTP port: no h2 offered")
}

// Permissive serves TLS and plaintext clients on the same ports.
func TestTLSPermissive(t *testing.T) {
	f, cl := devTLS(t)
	s := startTLS(t, f, broker.TLSPermissive)
	_, err := adminTLS(t, s.GRPCAddr(), cl).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
	require.NoError(t, err)
	_, err = adminAt(t, s.GRPCAddr()).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, remoting.ResSuccess, remotingSendTLS(t, s.RemotingAddr(), cl.Config("127.0.0.1")).ResponseCode())
	assert.Equal(t, remoting.ResSuccess, remotingSendTLS(t, s.RemotingAddr(), nil).ResponseCode())
	code, _ := get(t, http.DefaultClient, "http://"+s.HTTPAddr()+"/healthz")
	assert.Equal(t, http.StatusOK, code)
}
