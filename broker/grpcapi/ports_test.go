package grpcapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
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
}
