package controller

import (
	"context"
	"fmt"
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

	"github.com/gantrymq/gantry/internal/tlsx"
)

// Three members on disk whose raft ports and gRPC services require TLS
// and client certificates elect a leader and a broker group's master for
// a client dialing with TLS; a plaintext client is told TLS is required,
// and one without a certificate gets nothing.
func TestControllerOverTLS(t *testing.T) {
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"127.0.0.1"})
	require.NoError(t, err)
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey,
		ClientCAFile: f.CA, ClientAuth: tlsx.RequireClientAuth})
	require.NoError(t, err)
	// Members show their server certificate to each other (it allows
	// client authentication too); brokers a client certificate.
	peerTLS, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ServerCert, KeyFile: f.ServerKey})
	require.NoError(t, err)
	brokerTLS, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	require.NoError(t, err)

	raftAddrs := freeAddrs(t, 3)
	var (
		peers []Peer
		lis   []net.Listener
	)
	for i, a := range raftAddrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis = append(lis, l)
		peers = append(peers, Peer{ID: fmt.Sprintf("c%d", i+1), Addr: a, GRPCAddr: l.Addr().String()})
	}
	dir := t.TempDir()
	for i, p := range peers {
		cfg := testConfig(p.ID, peers)
		cfg.BindAddr, cfg.GRPCAddr, cfg.DataDir = p.Addr, p.GRPCAddr, filepath.Join(dir, p.ID)
		cfg.TLS, cfg.RequireTLS, cfg.RaftDial = srv.Config(), true, peerTLS.Dial
		c, err := New(cfg)
		require.NoError(t, err)
		svc, err := NewService(c)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- svc.Serve(lis[i]) }()
		t.Cleanup(func() {
			assert.NoError(t, svc.Close(context.Background()))
			assert.NoError(t, <-done)
			assert.NoError(t, c.Close())
		})
	}
	var addrs []string
	for _, p := range peers {
		addrs = append(addrs, p.GRPCAddr)
	}
	newClient := func(opts ...grpc.DialOption) *Client {
		c, err := NewClient(ClientConfig{Addrs: addrs, Attempts: 100, Backoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			DialOptions: opts})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		return c
	}

	c := newClient(grpc.WithTransportCredentials(brokerTLS.Credentials()))
	_, err = c.RegisterBroker(ctx(t), "g", 1, "10.0.0.1:10912", "10.0.0.1:10911")
	require.NoError(t, err, "raft elected a leader over TLS, which applied the registration")
	g := groupWhen(t, c, "g", "a master", func(g GroupStatus) bool { return g.MasterID != 0 })
	assert.EqualValues(t, 1, g.MasterID)

	plain := newClient(grpc.WithTransportCredentials(insecure.NewCredentials()))
	short, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = plain.GetGroup(short, "g")
	require.Error(t, err)
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "requires TLS")

	anon, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA})
	require.NoError(t, err)
	brief, cancel2 := context.WithTimeout(t.Context(), time.Second) // refused handshakes are retried until then
	defer cancel2()
	_, err = newClient(grpc.WithTransportCredentials(anon.Credentials())).GetGroup(brief, "g")
	assert.Error(t, err, "no client certificate")
}

func TestConfigValidateTLS(t *testing.T) {
	peers := []Peer{{ID: "c1", Addr: "127.0.0.1:9878"}}
	cfg := testConfig("c1", peers)
	cfg.BindAddr, cfg.DataDir, cfg.RequireTLS = "127.0.0.1:9878", t.TempDir(), true
	assert.ErrorContains(t, cfg.Validate(), "RequireTLS needs TLS")
}
