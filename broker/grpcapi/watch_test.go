package grpcapi_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
)

// startServer starts a broker server on loopback, without nameservers and
// with opts added to its gRPC server, and returns it with a Messaging
// client.
func startServer(t *testing.T, opts ...grpc.ServerOption) (*server.Server, gantryv1.MessagingClient) {
	t.Helper()
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		return lis
	}
	s, err := server.Start(t.Context(), server.Config{
		Broker: broker.Config{
			StorePathRootDir: filepath.Join(t.TempDir(), "store"),
			Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		},
		GRPCListener: listen(), HTTPListener: listen(), RemotingListener: listen(),
		GRPCOptions: opts,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return s, gantryv1.NewMessagingClient(cc)
}

// recvWithin receives one event or the stream's end, failing after d.
func recvWithin(t *testing.T, st grpc.ServerStreamingClient[gantryv1.GroupEvent], d time.Duration) (*gantryv1.GroupEvent, error) {
	t.Helper()
	type result struct {
		ev  *gantryv1.GroupEvent
		err error
	}
	got := make(chan result, 1)
	go func() {
		ev, err := st.Recv()
		got <- result{ev, err}
	}()
	select {
	case r := <-got:
		return r.ev, r.err
	case <-time.After(d):
		t.Fatalf("nothing received within %v", d)
		return nil, nil
	}
}

// WatchGroup answers the membership at once and ends, with no goroutine
// left behind (goleak), when the server stops gracefully or is killed;
// its client is then unregistered.
func TestWatchGroupEndsWithTheServer(t *testing.T) {
	for _, stop := range []struct {
		name string
		do   func(*server.Server) error
	}{
		{"close", func(s *server.Server) error { return s.Close(context.Background()) }},
		{"kill", func(s *server.Server) error { return s.Kill() }},
	} {
		t.Run(stop.name, func(t *testing.T) {
			s, msg := startServer(t)
			_, err := msg.Heartbeat(t.Context(), &gantryv1.HeartbeatRequest{ClientId: "c1", Group: "G"})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			st, err := msg.WatchGroup(ctx, &gantryv1.WatchGroupRequest{Group: "G", ClientId: "c1"})
			require.NoError(t, err)
			ev, err := recvWithin(t, st, 5*time.Second)
			require.NoError(t, err)
			assert.Equal(t, "G", ev.GetGroup())
			assert.Equal(t, []string{"c1"}, ev.GetClientIds())

			start := time.Now()
			require.NoError(t, stop.do(s))
			assert.Less(t, time.Since(start), 3*time.Second, "the stream did not hold the server up")
			_, err = recvWithin(t, st, 5*time.Second)
			assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
			assert.Eventually(t, func() bool { return len(s.Broker().ConsumerList("G")) == 0 }, 5*time.Second, time.Millisecond,
				"the watch's end unregistered c1") // Kill does not wait for handlers
		})
	}
}
