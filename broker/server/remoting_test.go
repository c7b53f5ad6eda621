package server_test

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

func loopback(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return lis
}

// startRemoting starts a broker server with a remoting listener on a port
// the system picks, registered with nameservers.
func startRemoting(t *testing.T, nameservers ...string) *server.Server {
	t.Helper()
	s, err := server.Start(t.Context(), server.Config{
		Broker: broker.Config{
			StorePathRootDir: filepath.Join(t.TempDir(), "store"),
			NamesrvAddr:      nameservers,
			Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		},
		GRPCListener: loopback(t), HTTPListener: loopback(t), RemotingListener: loopback(t),
	})
	require.NoError(t, err)
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	return s
}

// The broker serves RocketMQ remoting on its listener, registers that
// address with the nameservers next to its gRPC one, and stores it (the
// port the system chose) as the store host of its records, so offset
// message ids name an address RocketMQ clients reach.
func TestRemotingServed(t *testing.T) {
	nsAddr, ns := startNameServer(t)
	s := startRemoting(t, nsAddr)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })

	require.Eventually(t, func() bool {
		r, err := ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "T"})
		return err == nil && len(r.GetBrokerDatas()) == 1 && r.GetBrokerDatas()[0].GetRemotingAddrs()[0] == s.RemotingAddr()
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, s.RemotingAddr(), net.JoinHostPort("127.0.0.1", portOf(t, s.RemotingAddr())))
	assert.Equal(t, netip.MustParseAddrPort(s.RemotingAddr()).Port(), uint16(s.Broker().Config().ListenPort))

	resp := remotingSend(t, s.RemotingAddr())
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)
	host, _, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort(s.RemotingAddr()), host)
}

// Close answers a remoting pull in flight (a held one is woken:
// PULL_NOT_FOUND) before the connection closes; afterwards nothing
// listens.
func TestCloseAnswersHeldRemotingPull(t *testing.T) {
	s := startRemoting(t)
	cl, err := remoting.Dial(t.Context(), s.RemotingAddr(), remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	got := make(chan *remoting.Command, 1)
	go func() {
		resp, err := cl.Invoke(context.Background(), remoting.NewRequest(remoting.ReqPullMessage, map[string]string{
			"consumerGroup": "CG", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": "2", "suspendTimeoutMillis": "20000"}))
		if err != nil {
			resp = remoting.NewResponse(&remoting.Command{}, remoting.ResSystemError, err.Error())
		}
		got <- resp
	}()
	require.Eventually(t, func() bool { return s.RemotingStats().InFlight == 1 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, s.Close(context.Background()))
	assert.Less(t, time.Since(start), 5*time.Second)
	resp := <-got
	// Held, it is woken: PULL_NOT_FOUND. In flight but not held yet (the
	// request is read, the broker not reached), it is refused:
	// SERVICE_NOT_AVAILABLE, shutting down. Either is the broker's answer
	// before the connection closes, never a cut connection.
	assert.Contains(t, []remoting.ResponseCode{remoting.ResPullNotFound, remoting.ResServiceNotAvailable}, resp.ResponseCode(), resp.Remark)
	if resp.ResponseCode() == remoting.ResServiceNotAvailable {
		assert.Contains(t, resp.Remark, "shutting down")
	}
	_, err = net.DialTimeout("tcp", s.RemotingAddr(), time.Second)
	assert.Error(t, err, "the remoting port is closed")
}

// Kill cuts remoting connections at once, held pulls included.
func TestKillCutsRemoting(t *testing.T) {
	s := startRemoting(t)
	cl, err := remoting.Dial(t.Context(), s.RemotingAddr(), remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(context.Background(), remoting.NewRequest(remoting.ReqPullMessage, map[string]string{
			"consumerGroup": "CG", "topic": "T", "queueId": "0", "queueOffset": "0", "sysFlag": "2", "suspendTimeoutMillis": "20000"}))
		errc <- err
	}()
	require.Eventually(t, func() bool { return s.RemotingStats().InFlight == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Kill())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, remoting.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the held pull outlived Kill")
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return port
}
