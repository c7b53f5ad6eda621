package nameserver

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

func startServer(t *testing.T) gantryv1.NameServerClient {
	t.Helper()
	s, err := NewServer(Config{})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		require.NoError(t, <-done)
	})
	return gantryv1.NewNameServerClient(cc)
}

func registration(topic string) *gantryv1.RegisterBrokerRequest {
	return &gantryv1.RegisterBrokerRequest{
		Cluster: "DefaultCluster", BrokerName: "broker-a", Addr: "127.0.0.1:8081", RemotingAddr: "127.0.0.1:10911",
		Topics:      map[string]*gantryv1.TopicInfo{topic: {ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
		DataVersion: &gantryv1.DataVersion{TimestampMs: 1, Counter: 1},
	}
}

// A broker registered on a stream is routable until the stream ends.
func TestServerRegistrationStream(t *testing.T) {
	ns := startServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := ns.RegisterBroker(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(registration("Orders")))
	resp, err := stream.Recv()
	require.NoError(t, err)
	assert.True(t, resp.Changed)

	route, err := ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	require.NoError(t, err)
	require.Len(t, route.QueueDatas, 1)
	assert.Equal(t, int32(8), route.QueueDatas[0].WriteQueueNums)
	assert.Equal(t, "127.0.0.1:8081", route.BrokerDatas[0].BrokerAddrs[0])
	info, err := ns.GetClusterInfo(t.Context(), &gantryv1.GetClusterInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{"broker-a"}, info.Clusters["DefaultCluster"].Names)
	topics, err := ns.ListTopics(t.Context(), &gantryv1.ListTopicsRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{"Orders"}, topics.Topics)

	_, err = ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Nope"})
	assert.Equal(t, codes.NotFound, status.Code(err))

	cancel() // the broker's connection ends
	require.Eventually(t, func() bool {
		_, err := ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
		return status.Code(err) == codes.NotFound
	}, 5*time.Second, 5*time.Millisecond)
}

func TestServerRejectsBadRegistrationAndUnregisters(t *testing.T) {
	ns := startServer(t)
	stream, err := ns.RegisterBroker(t.Context())
	require.NoError(t, err)
	bad := registration("bad topic!")
	require.NoError(t, stream.Send(bad))
	_, err = stream.Recv()
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "bad topic!")

	stream, err = ns.RegisterBroker(t.Context())
	require.NoError(t, err)
	require.NoError(t, stream.Send(registration("Orders")))
	_, err = stream.Recv()
	require.NoError(t, err)
	_, err = ns.UnregisterBroker(t.Context(), &gantryv1.UnregisterBrokerRequest{Cluster: "DefaultCluster", BrokerName: "broker-a", Addr: "127.0.0.1:8081"})
	require.NoError(t, err)
	_, err = ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	assert.Equal(t, codes.NotFound, status.Code(err))
}

// A slave's registration is answered with its group's master's gRPC and HA
// addresses; a master's with none.
func TestServerAnswersASlaveWithItsMaster(t *testing.T) {
	ns := startServer(t)
	register := func(req *gantryv1.RegisterBrokerRequest) *gantryv1.RegisterBrokerResponse {
		t.Helper()
		stream, err := ns.RegisterBroker(t.Context())
		require.NoError(t, err)
		require.NoError(t, stream.Send(req))
		resp, err := stream.Recv()
		require.NoError(t, err)
		return resp
	}
	master := registration("Orders")
	master.HaAddr = "127.0.0.1:10912"
	resp := register(master)
	assert.Empty(t, resp.MasterAddr)
	assert.Empty(t, resp.MasterHaAddr)

	slave := registration("Orders")
	slave.BrokerId, slave.Addr, slave.RemotingAddr = 1, "127.0.0.2:8081", "127.0.0.2:10911"
	resp = register(slave)
	assert.Equal(t, "127.0.0.1:8081", resp.MasterAddr)
	assert.Equal(t, "127.0.0.1:10912", resp.MasterHaAddr)

	route, err := ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	require.NoError(t, err)
	assert.Equal(t, map[int64]string{0: "127.0.0.1:8081", 1: "127.0.0.2:8081"}, route.BrokerDatas[0].BrokerAddrs)
}
