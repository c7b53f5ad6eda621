package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/remoting"
)

// adminAt is an Admin client of the gRPC API at addr.
func adminAt(t *testing.T, addr string) gantryv1.AdminClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return gantryv1.NewAdminClient(cc)
}

// remotingSend sends a message to topic T over remoting at addr.
func remotingSend(t *testing.T, addr string) *remoting.Command {
	t.Helper()
	cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	req := remoting.NewRequest(remoting.ReqSendMessage, map[string]string{"producerGroup": "PG", "topic": "T", "queueId": "0"})
	req.Body = []byte("hi")
	resp, err := cl.Invoke(t.Context(), req)
	require.NoError(t, err)
	return resp
}

// The gRPC and remoting ports each speak both protocols; the HTTP port
// answers a gRPC or remoting client with an error naming the right ports,
// and a data port answers HTTP with 400 naming the HTTP port.
func TestPortsSpeakBothProtocols(t *testing.T) {
	s := startRemoting(t)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })

	for _, addr := range []string{s.GRPCAddr(), s.RemotingAddr()} {
		st, err := adminAt(t, addr).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
		require.NoError(t, err, "gRPC at %s", addr)
		assert.Equal(t, s.RemotingAddr(), st.GetStatus()["brokerAddr"])
		resp := remotingSend(t, addr)
		assert.Equal(t, remoting.ResSuccess, resp.ResponseCode(), "remoting at %s: %s", addr, resp.Remark)

		hr, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(hr.Body)
		hr.Body.Close()
		assert.Equal(t, http.StatusBadRequest, hr.StatusCode)
		assert.Contains(t, string(body), "gRPC and RocketMQ remoting port: its HTTP endpoints (metrics, health) are at http://"+s.HTTPAddr()+"/")
	}

	wrong := s.HTTPAddr() + " is the Gantry broker's HTTP port (metrics, health): its gRPC API and RocketMQ remoting are at " +
		s.GRPCAddr() + " and " + s.RemotingAddr()
	_, err := adminAt(t, s.HTTPAddr()).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	assert.Equal(t, wrong, status.Convert(err).Message())
	resp := remotingSend(t, s.HTTPAddr())
	assert.Equal(t, remoting.ResSystemError, resp.ResponseCode())
	assert.Equal(t, wrong, resp.Remark)
	hr, err := http.Get("http://" + s.HTTPAddr() + "/healthz")
	require.NoError(t, err)
	hr.Body.Close()
	assert.Equal(t, http.StatusOK, hr.StatusCode)

	cc, err := grpc.NewClient(s.RemotingAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	_, err = gantryv1.NewNameServerClient(cc).GetClusterInfo(t.Context(), &gantryv1.GetClusterInfoRequest{})
	assert.Equal(t, codes.Unimplemented, status.Code(err), "a broker given as a nameserver")
	assert.Equal(t, "this is Gantry broker broker-a, which does not serve /gantry.v1.NameServer/GetClusterInfo: its nameservers are not configured",
		status.Convert(err).Message())
}

// freePort returns a TCP port of 127.0.0.2 free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 to listen on: %v", err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// The broker listens where bindAddress says, every port of it, and
// serves Go's profiles only with pprofEnable.
func TestBindAddressAndPprof(t *testing.T) {
	for _, pprof := range []bool{false, true} {
		t.Run(fmt.Sprint("pprof=", pprof), func(t *testing.T) {
			var cfg broker.Config
			require.NoError(t, broker.ParseConfig(strings.NewReader(fmt.Sprintf(
				"bindAddress=127.0.0.2\nlistenPort=%d\ngrpcListenAddr=127.0.0.2:0\nhttpListenAddr=127.0.0.2:0\npprofEnable=%t\n",
				freePort(t), pprof)), &cfg))
			cfg.StorePathRootDir = filepath.Join(t.TempDir(), "store")
			s, err := server.Start(t.Context(), server.Config{Broker: cfg})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
			for _, addr := range []string{s.GRPCAddr(), s.RemotingAddr(), s.HTTPAddr()} {
				host, port, err := net.SplitHostPort(addr)
				require.NoError(t, err)
				assert.Equal(t, "127.0.0.2", host)
				c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
				if err == nil {
					c.Close()
				}
				assert.Error(t, err, "%s listens on 127.0.0.2 only", addr)
			}
			hr, err := http.Get("http://" + s.HTTPAddr() + "/debug/pprof/")
			require.NoError(t, err)
			hr.Body.Close()
			want := http.StatusNotFound
			if pprof {
				want = http.StatusOK
			}
			assert.Equal(t, want, hr.StatusCode)
		})
	}
}
