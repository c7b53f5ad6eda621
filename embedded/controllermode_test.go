package embedded_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/replication/controller"
)

const failoverWait = 60 * time.Second

// startControllerGroup starts a controller-mode group of n brokers acking
// as role, serving reads on slaves.
func startControllerGroup(t *testing.T, n int, role broker.BrokerRole) *embedded.Cluster {
	t.Helper()
	return startGroup(t, embedded.Options{
		Replicas: n,
		Broker: func(c *broker.Config) {
			c.BrokerRole, c.SlaveReadEnable = role, true
			c.MappedFileSizeCommitLog = 4 << 20
			c.MaxHashSlotNum, c.MaxIndexNum = 1000, 4000
			c.SlaveTimeout = 10 * time.Second // a busy machine must not time out a healthy slave
		},
	})
}

// controllerGroup asks the cluster's controller for the group.
func controllerGroup(t *testing.T, c *embedded.Cluster) controller.GroupStatus {
	t.Helper()
	cl, err := controller.NewClient(controller.ClientConfig{Addrs: []string{c.ControllerAddr()}})
	require.NoError(t, err)
	defer cl.Close()
	g, err := cl.GetSyncStateSet(t.Context(), broker.DefaultBrokerName)
	require.NoError(t, err)
	return g
}

// sendUntilAcked sends body through p until a send is acknowledged (the
// group may be between masters).
func sendUntilAcked(t *testing.T, p *client.Producer, topic, body string) {
	t.Helper()
	deadline := time.Now().Add(failoverWait)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)})
		cancel()
		if err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "send %s for %s: %v", body, failoverWait, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTopicEverywhere waits until brokers 1..n of the group have topic.
func waitTopicEverywhere(t *testing.T, c *embedded.Cluster, n int64, topic string) {
	t.Helper()
	for id := int64(1); id <= n; id++ {
		require.Eventually(t, func() bool {
			m := c.Member(id)
			if m == nil || m.Server() == nil {
				return false
			}
			_, ok := m.Server().Broker().Topic(topic)
			return ok
		}, failoverWait, 10*time.Millisecond, "broker %d never learned topic %s", id, topic)
	}
}

// masterBodies returns the bodies of the messages of topic the current
// master holds (at most MaxPullMsgs a queue), sorted.
func masterBodies(t *testing.T, c *embedded.Cluster, topic string, queues int32) []string {
	t.Helper()
	var out []string
	for q := range queues {
		out = append(out, pullSlave(t, c.Server(), topic, q)...)
	}
	slices.Sort(out)
	return out
}

// A controller-mode group elects a master, which clients reach through
// the nameserver; killed, it is replaced by an in-sync broker that holds
// every message the old one acknowledged, and restarted it follows the
// new master.
func TestControllerModeFailover(t *testing.T) {
	c := startControllerGroup(t, 3, broker.SyncMaster)
	m1, ep1 := c.MasterID()
	require.NotZero(t, m1, "Start returns with a master")
	g := controllerGroup(t, c)
	assert.Equal(t, m1, g.MasterID, "the controller's master")
	assert.Equal(t, ep1, g.MasterEpoch)
	assert.GreaterOrEqual(t, len(g.InSync), 2, "a SYNC_MASTER with inSyncReplicas 2 starts with a slave in sync: %v", g.InSync)
	assert.Equal(t, c.Member(m1).Server().GRPCAddr(), c.BrokerAddr(), "BrokerAddr is the master's")
	assert.Equal(t, c.Member(m1).Server(), c.Server())

	require.NoError(t, c.Broker().CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: metadata.PermRead | metadata.PermWrite}))
	// A slave learns topics from its master's metadata: one promoted
	// before that would not serve T.
	waitTopicEverywhere(t, c, 3, "T")
	p, err := client.NewProducer(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("m%03d", i))
		sendUntilAcked(t, p, "T", want[i])
	}

	require.ErrorContains(t, c.KillBroker(), "controller mode", "the static master's calls are refused")
	require.NoError(t, c.KillMember(m1))
	assert.Nil(t, c.Member(m1))
	ctx, cancel := context.WithTimeout(t.Context(), failoverWait)
	defer cancel()
	m2, err := c.WaitMaster(ctx, ep1)
	require.NoError(t, err)
	assert.NotEqual(t, m1, m2)
	_, ep2 := c.MasterID()
	assert.Greater(t, ep2, ep1)
	assert.Equal(t, m2, controllerGroup(t, c).MasterID)
	for i := 20; i < 40; i++ {
		want = append(want, fmt.Sprintf("m%03d", i))
		sendUntilAcked(t, p, "T", want[i])
	}
	// A message reaches the consume queues once the in-sync set holds it,
	// just after its ack (docs/REPLICATION.md): wait for the last ones.
	var got []string
	assert.Eventually(t, func() bool {
		got = masterBodies(t, c, "T", 2)
		return len(got) >= len(want)
	}, 10*time.Second, 5*time.Millisecond)
	for _, w := range want {
		assert.Contains(t, got, w, "acknowledged before or after the failover")
	}

	// The old master rejoins as a slave of the new one, on its old ports.
	require.NoError(t, c.StartMember(t.Context(), m1))
	require.Error(t, c.StartMember(t.Context(), m1), "already running")
	sameLog(t, c.Server(), following(t, c, m1, ep2))
	assert.False(t, c.Member(m1).IsMaster())
	assert.Equal(t, ep2, c.Member(m1).Epoch())
}

// following waits until member id follows the master of epoch ep and
// returns its Server (a member restarts its Server on a change of role).
func following(t *testing.T, c *embedded.Cluster, id int64, ep int32) *server.Server {
	t.Helper()
	var s *server.Server
	require.Eventually(t, func() bool {
		m := c.Member(id)
		if m == nil || m.Epoch() != ep {
			return false
		}
		s = m.Server()
		if s == nil {
			return false
		}
		st, ok := s.SlaveStatus()
		return ok && st.Connected && st.Epoch == ep
	}, failoverWait, 10*time.Millisecond, "broker %d never followed the master of epoch %d", id, ep)
	return s
}

func TestControllerModeRefusesSlaves(t *testing.T) {
	_, err := embedded.Start(t.Context(), embedded.Options{Replicas: 2, Slaves: 1})
	require.ErrorContains(t, err, "Options.Slaves 1 and Replicas 2")
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	defer c.Close(context.Background())
	_, err = c.WaitMaster(t.Context(), 0)
	assert.ErrorContains(t, err, "controller-mode group")
	assert.Empty(t, c.ControllerAddr())
}

// A consumer group's committed offsets reach the slaves with the master's
// metadata: after a failover, a consumer of the group resumes on the new
// master where it left off, and is handed only what it had not handled.
func TestControllerModeConsumerOffsetsSurviveFailover(t *testing.T) {
	c := startControllerGroup(t, 3, broker.SyncMaster)
	m1, ep1 := c.MasterID()
	require.NoError(t, c.Broker().CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: metadata.PermRead | metadata.PermWrite}))
	waitTopicEverywhere(t, c, 3, "T")
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	for i := range 20 {
		sendUntilAcked(t, p, "T", fmt.Sprintf("a%03d", i))
	}

	var mu sync.Mutex
	handled := map[string]int{}
	consume := func() *client.PushConsumer {
		pc, err := client.NewPushConsumer(t.Context(), cfg, "G", func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ms {
				handled[string(m.Body)]++
			}
			return client.ConsumeSuccess
		}, client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithFetchHold(time.Second))
		require.NoError(t, err)
		require.NoError(t, pc.Subscribe("T", "*"))
		require.NoError(t, pc.Start(t.Context()))
		return pc
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	pc := consume()
	require.Eventually(t, func() bool { return count() == 20 }, failoverWait, 10*time.Millisecond)
	require.NoError(t, pc.Shutdown(t.Context())) // commits what it handled
	committed := map[int32]int64{}
	for q := range int32(2) {
		off, ok := c.Broker().QueryOffset("G", "T", q)
		require.True(t, ok)
		committed[q] = off
	}
	require.Equal(t, int64(20), committed[0]+committed[1])
	for id := int64(1); id <= 3; id++ { // the slaves have the offsets (metadata, about every second)
		if id == m1 {
			continue
		}
		require.Eventually(t, func() bool {
			s := c.Member(id).Server()
			for q, want := range committed {
				if s == nil {
					return false
				}
				if off, ok := s.Broker().QueryOffset("G", "T", q); !ok || off != want {
					return false
				}
			}
			return true
		}, failoverWait, 10*time.Millisecond, "broker %d never had G's offsets %v", id, committed)
	}

	require.NoError(t, c.KillMember(m1))
	ctx, cancel := context.WithTimeout(t.Context(), failoverWait)
	defer cancel()
	_, err = c.WaitMaster(ctx, ep1)
	require.NoError(t, err)
	for q, want := range committed {
		off, ok := c.Broker().QueryOffset("G", "T", q)
		require.True(t, ok)
		assert.Equal(t, want, off, "queue %d: the new master's offset of G", q)
	}
	for i := range 10 {
		sendUntilAcked(t, p, "T", fmt.Sprintf("b%03d", i))
	}
	pc = consume()
	t.Cleanup(func() { _ = pc.Shutdown(context.Background()) })
	require.Eventually(t, func() bool { return count() == 30 }, failoverWait, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for b, n := range handled {
		assert.Equal(t, 1, n, "%s handled %d times: the consumer resumed from the committed offsets", b, n)
	}
}
