package server_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/nameserver"
)

// startNameServer serves a nameserver on loopback and returns its address
// and a client.
func startNameServer(t *testing.T) (string, gantryv1.NameServerClient) {
	t.Helper()
	s, err := nameserver.NewServer(nameserver.Config{})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		cc.Close()
		require.NoError(t, s.Close(context.Background()))
	})
	return lis.Addr().String(), gantryv1.NewNameServerClient(cc)
}

func routed(ns gantryv1.NameServerClient, topic string) bool {
	_, err := ns.GetRoute(context.Background(), &gantryv1.GetRouteRequest{Topic: topic})
	return err == nil
}

// The registrar registers with every nameserver at once, again at once
// when told topics changed, and unregisters on Close.
func TestRegistrar(t *testing.T) {
	addr1, ns1 := startNameServer(t)
	addr2, ns2 := startNameServer(t)
	var mu sync.Mutex
	topics := map[string]*gantryv1.TopicInfo{"Orders": {ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}
	r, err := server.NewRegistrar(server.RegistrarConfig{
		NameServers: []string{addr1, addr2},
		Interval:    time.Hour, // only the first registration and Changed
		Registration: func() *gantryv1.RegisterBrokerRequest {
			mu.Lock()
			defer mu.Unlock()
			ts := map[string]*gantryv1.TopicInfo{}
			for k, v := range topics {
				ts[k] = v
			}
			return &gantryv1.RegisterBrokerRequest{Cluster: "DefaultCluster", BrokerName: "broker-a", Addr: "127.0.0.1:8081",
				Topics: ts, DataVersion: &gantryv1.DataVersion{TimestampMs: time.Now().UnixMilli(), Counter: int64(len(ts))}}
		},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return routed(ns1, "Orders") && routed(ns2, "Orders") }, 5*time.Second, 5*time.Millisecond)

	mu.Lock()
	topics["Payments"] = &gantryv1.TopicInfo{ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	mu.Unlock()
	start := time.Now()
	r.Changed()
	require.Eventually(t, func() bool { return routed(ns1, "Payments") && routed(ns2, "Payments") }, 5*time.Second, time.Millisecond)
	require.Less(t, time.Since(start), time.Second, "a topic change is registered at once, not at the next interval")

	require.NoError(t, r.Close(t.Context()))
	_, err = ns1.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = ns2.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	require.Equal(t, codes.NotFound, status.Code(err))
}
