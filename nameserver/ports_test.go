package nameserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
)

// Every port of a nameserver speaks gRPC and RocketMQ remoting: a broker
// registers over gRPC on RocketMQ's port (a broker.conf's
// namesrvAddr=host:9876), and a RocketMQ client gets its route from
// Gantry's. An HTTP request is told this is no HTTP port.
func TestServerSpeaksBothProtocolsOnEveryPort(t *testing.T) {
	s, err := nameserver.NewServer(nameserver.Config{})
	require.NoError(t, err)
	var addrs []string
	done := make(chan error, 2)
	for range 2 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs = append(addrs, lis.Addr().String())
		go func() { done <- s.Serve(lis) }()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		require.NoError(t, <-done)
		require.NoError(t, <-done)
	})
	grpcClient := func(addr string) gantryv1.NameServerClient {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		return gantryv1.NewNameServerClient(cc)
	}

	for i, addr := range addrs {
		stream, err := grpcClient(addr).RegisterBroker(t.Context())
		require.NoError(t, err, "port %d", i)
		reg := &gantryv1.RegisterBrokerRequest{Cluster: "DefaultCluster", BrokerName: "broker-" + string(rune('a'+i)),
			Addr: "127.0.0.1:808" + string(rune('1'+i)), RemotingAddr: "127.0.0.1:1091" + string(rune('1'+i)),
			Topics:      map[string]*gantryv1.TopicInfo{"Orders": {ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
			DataVersion: &gantryv1.DataVersion{TimestampMs: 1, Counter: 1}}
		require.NoError(t, stream.Send(reg))
		_, err = stream.Recv()
		require.NoError(t, err, "registration over gRPC on port %d", i)
	}
	for i, addr := range addrs {
		route, err := grpcClient(addr).GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
		require.NoError(t, err, "gRPC on port %d", i)
		assert.Len(t, route.BrokerDatas, 2)
		cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{})
		require.NoError(t, err)
		resp, err := cl.Invoke(t.Context(), remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Orders"}))
		require.NoError(t, err, "remoting on port %d", i)
		assert.Equal(t, remoting.ResSuccess, resp.ResponseCode())
		assert.Contains(t, string(resp.Body), "127.0.0.1:10912", "the RocketMQ view: remoting addresses")
		require.NoError(t, cl.Close())

		hr, err := http.Get("http://" + addr + "/")
		require.NoError(t, err)
		body, _ := io.ReadAll(hr.Body)
		hr.Body.Close()
		assert.Equal(t, http.StatusBadRequest, hr.StatusCode)
		assert.Contains(t, string(body), "Gantry nameserver port: it serves gRPC and RocketMQ remoting, not HTTP")

		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		_, err = gantryv1.NewAdminClient(cc).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
		cc.Close()
		assert.Equal(t, codes.Unimplemented, status.Code(err))
		assert.Equal(t, "this is a Gantry nameserver, which does not serve /gantry.v1.Admin/BrokerStatus: "+
			"a broker's addresses are in its cluster info (gantry admin clusterList)", status.Convert(err).Message())
	}
}
