package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/controller"
)

// aclFile writes the test users, a brokers' cluster user, a client and an
// admin, and returns the file's path and the users' guard.
func aclFile(t *testing.T) (string, *auth.Guard) {
	t.Helper()
	f := auth.File{Users: []auth.User{
		{AccessKey: "broker-key", SecretKey: "broker-secret", Role: auth.RoleCluster},
		{AccessKey: "alice-key", SecretKey: "alice-secret", Rules: []auth.Rule{{Resource: "*", Actions: []string{"All"}}}},
		{AccessKey: "admin-key", SecretKey: "admin-secret", Role: auth.RoleAdmin},
	}}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	users, err := auth.NewUsers(f)
	require.NoError(t, err)
	return path, auth.NewGuard(auth.GuardConfig{Users: func() *auth.Users { return users }})
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wildcardAddr is a loopback listener that reports the wildcard address
// 0.0.0.0 with its port, as one listening on every interface does: the
// test binds nothing beyond loopback (a wildcard port would take the
// port from other tests' 127.0.0.x listeners).
type wildcardAddr struct{ net.Listener }

func (w wildcardAddr) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4zero, Port: w.Listener.Addr().(*net.TCPAddr).Port}
}

func wildcard(t *testing.T) net.Listener {
	t.Helper()
	return wildcardAddr{loopback(t)}
}

// A broker with authentication off refuses to listen beyond loopback,
// naming the ports and the ways out, unless allowRemoteWithoutAuth says
// so (then it warns); with authentication on it listens where it is told.
func TestBrokerRefusesOpenPortsWithoutAuth(t *testing.T) {
	start := func(t *testing.T, bc broker.Config, lis ...net.Listener) (*server.Server, error) {
		bc.StorePathRootDir = filepath.Join(t.TempDir(), "store")
		cfg := server.Config{Broker: bc}
		if len(lis) == 3 {
			cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener = lis[0], lis[1], lis[2]
			cfg.HAListener = loopback(t)
		}
		s, err := server.Start(t.Context(), cfg)
		if err == nil {
			t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
		}
		return s, err
	}

	t.Run("wildcard listeners", func(t *testing.T) {
		_, err := start(t, broker.Config{}, wildcard(t), loopback(t), wildcard(t))
		require.ErrorIs(t, err, server.ErrOpenWithoutAuth)
		for _, says := range []string{"gRPC port (grpcListenAddr) on ", "remoting port (bindAddress, listenPort) on ",
			"authenticationEnabled=true", "bindAddress=127.0.0.1", "allowRemoteWithoutAuth=true"} {
			assert.Contains(t, err.Error(), says)
		}
	})
	t.Run("bindAddress unset", func(t *testing.T) {
		port := freePort(t)
		_, err := start(t, broker.Config{ListenPort: port, GRPCListenAddr: "127.0.0.1:0", HTTPListenAddr: "127.0.0.1:0"})
		require.ErrorIs(t, err, server.ErrOpenWithoutAuth)
		assert.Contains(t, err.Error(), "remoting port (bindAddress, listenPort) on :"+portString(port))
		assert.Contains(t, err.Error(), "HA port (bindAddress, haListenPort) on :"+portString(port+1))
		assert.NotContains(t, err.Error(), "gRPC port")
	})
	t.Run("allowRemoteWithoutAuth", func(t *testing.T) {
		var logs syncBuffer
		bc := broker.Config{AuthConfig: broker.AuthConfig{AllowRemoteWithoutAuth: true}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		_, err := start(t, bc, wildcard(t), loopback(t), wildcard(t))
		require.NoError(t, err)
		assert.Contains(t, logs.String(), "LISTENING BEYOND LOOPBACK WITH AUTHENTICATION OFF (allowRemoteWithoutAuth=true)")
	})
	t.Run("authentication on", func(t *testing.T) {
		acl, _ := aclFile(t)
		bc := broker.Config{AuthConfig: broker.AuthConfig{AuthenticationEnabled: true, ACLFile: acl}}
		_, err := start(t, bc, wildcard(t), loopback(t), wildcard(t))
		require.NoError(t, err)
	})
	t.Run("loopback", func(t *testing.T) {
		_, err := start(t, broker.Config{}, loopback(t), loopback(t), loopback(t))
		require.NoError(t, err)
	})
}

func portString(p int) string { return strings.TrimPrefix((&net.TCPAddr{Port: p}).String(), ":") }

// authNameServer serves a nameserver with authentication on.
func authNameServer(t *testing.T, acl string) string {
	t.Helper()
	s, err := nameserver.NewServer(nameserver.Config{AuthenticationEnabled: true, ACLFile: acl})
	require.NoError(t, err)
	lis := loopback(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close(context.Background()))
		require.NoError(t, <-done)
	})
	return lis.Addr().String()
}

// authBroker is a broker's configuration with authentication on and the
// inner credentials ak/sk ("": none).
func authBroker(t *testing.T, acl, ak, sk string) broker.Config {
	return broker.Config{
		StorePathRootDir: filepath.Join(t.TempDir(), "store"),
		AuthConfig:       broker.AuthConfig{AuthenticationEnabled: true, ACLFile: acl, InnerAccessKey: ak, InnerSecretKey: sk},
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func startServer(t *testing.T, bc broker.Config) *server.Server {
	t.Helper()
	s, err := server.Start(t.Context(), server.Config{Broker: bc, GRPCListener: loopback(t), HTTPListener: loopback(t), RemotingListener: loopback(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

// With authentication on everywhere: a master signs its registration with
// its inner credentials and the nameserver routes it; a slave signing
// with them learns its master from the nameserver and replicates; a slave
// signing as a user, or not at all, is refused by the master and copies
// nothing.
func TestBrokersAuthenticateToEachOther(t *testing.T) {
	acl, _ := aclFile(t)
	ns := authNameServer(t, acl)
	mc := authBroker(t, acl, "broker-key", "broker-secret")
	mc.NamesrvAddr = []string{ns}
	master := startServer(t, mc)
	require.NoError(t, master.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))

	cc, err := grpc.NewClient(ns, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	require.Eventually(t, func() bool {
		_, err := gantryv1.NewNameServerClient(cc).GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "T"})
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the master's signed registration is routed")

	sc := authBroker(t, acl, "broker-key", "broker-secret")
	sc.NamesrvAddr, sc.BrokerRole, sc.BrokerID = []string{ns}, broker.Slave, 1
	slave := startServer(t, sc)
	_, err = master.Broker().Send(t.Context(), "T", []*message.Message{{Topic: "T", Body: []byte("hello")}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return slave.Broker().ReplicaLog().MaxOffset() == master.Broker().ReplicaLog().MaxOffset()
	}, 10*time.Second, 5*time.Millisecond, "the signed slave replicates")

	for _, tc := range []struct{ name, ak, sk, says string }{
		{"a user's credentials", "alice-key", "alice-secret", "cluster operations need a cluster or admin user"},
		{"no credentials", "", "", "cluster operations need credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bc := authBroker(t, acl, tc.ak, tc.sk)
			bc.BrokerRole, bc.BrokerID, bc.HAMasterAddress = broker.Slave, 2, master.HAAddr()
			s := startServer(t, bc)
			var refused *replication.RefusedError
			require.Eventually(t, func() bool {
				st, ok := s.SlaveStatus()
				return ok && errors.As(st.LastErr, &refused)
			}, 10*time.Second, 5*time.Millisecond)
			assert.Contains(t, refused.Reason, tc.says)
			assert.Zero(t, s.Broker().ReplicaLog().MaxOffset(), "nothing of the master's log reached the slave")
		})
	}
}

// In controller mode with authentication on, the members sign their
// calls to the controller (cluster), a master is elected, and its slave
// replicates over the authenticated HA port.
func TestMembersAuthenticateToTheController(t *testing.T) {
	acl, guard := aclFile(t)
	ctl := startController(t, false, func(c *controller.Config) { c.Guard = guard })
	g := &group{t: t}
	for id := 1; id <= 2; id++ {
		cfg := memberConfig(t, ctl, filepath.Join(t.TempDir(), "store"), int64(id), broker.SyncMaster)
		cfg.Broker.AuthConfig = broker.AuthConfig{AuthenticationEnabled: true, ACLFile: acl, InnerAccessKey: "broker-key", InnerSecretKey: "broker-secret"}
		g.cfgs, g.ms = append(g.cfgs, cfg), append(g.ms, nil)
		g.start(id)
	}
	t.Cleanup(func() {
		for _, m := range g.ms {
			assert.NoError(t, m.Close(context.Background()))
		}
	})
	m := g.master(1)
	require.NoError(t, g.ms[m-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	g.send(m, 1)
	g.sameLogs(m, 3-m)
	refused := guard.Refused()
	assert.Zero(t, refused[auth.ReasonNoCredentials]+refused[auth.ReasonBadSignature]+refused[auth.ReasonDenied],
		"the members' calls were all signed by a cluster user")
}
