package server_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/internal/faultproxy"
	"github.com/gantrymq/gantry/message"
)

// A controller-mode master's consumers read only what every slave of its
// in-sync set holds, and its slaves' consumers only what it confirmed: a
// message its slaves have not received stays unread (so no failover can
// take back a message a consumer read), and is read everywhere once they
// have it.
func TestMemberConsumersReadWhatTheInSyncSetHolds(t *testing.T) {
	g, _, ha := proxied(t, broker.SyncMaster)
	m1 := g.master(1)
	require.NoError(t, g.ms[m1-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	for id := 1; id <= 3; id++ {
		g.waitTopic(id)
	}
	require.Eventually(t, func() bool { return len(g.ms[m1-1].InSync()) == 2 }, failoverWait, 10*time.Millisecond)
	g.send(m1, 0)
	queued := func(id int, q int32) int64 {
		_, max := g.ms[id-1].Server().Broker().QueueOffsets("T", q)
		return max
	}
	for id := 1; id <= 3; id++ {
		require.Eventually(t, func() bool { return queued(id, 0) == 1 }, failoverWait, 5*time.Millisecond, "broker %d", id)
	}

	ha[m1-1].Set(faultproxy.Fault{Mode: faultproxy.Blackhole}) // the slaves stay connected and in sync, but receive nothing
	b := g.ms[m1-1].Server().Broker()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := b.Send(ctx, "T", []*message.Message{{Topic: "T", QueueID: 1, Body: body(1)}})
	require.ErrorIs(t, err, broker.ErrReplicaTimeout, "no slave acknowledged it")
	held := b.Status().Dispatch.Held
	assert.Greater(t, held, int64(0), "the master holds the message back")
	st, err := adminAt(t, g.ms[m1-1].Server().GRPCAddr()).BrokerStatus(t.Context(), &gantryv1.BrokerStatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatInt(held, 10), st.Status["dispatchHeldBytes"], "brokerStatus shows it")
	assert.Equal(t, "0", st.Status["dispatchBehindBytes"], "held bytes are no dispatch lag")
	assert.Zero(t, queued(m1, 1), "no consumer of the master reads it")
	assert.ElementsMatch(t, others3(m1), g.ms[m1-1].InSync(), "the slaves are still in sync")

	ha[m1-1].Set(faultproxy.Fault{})
	for id := 1; id <= 3; id++ {
		require.Eventually(t, func() bool { return queued(id, 1) == 1 }, failoverWait, 5*time.Millisecond, "broker %d never served the message", id)
	}
	assert.Zero(t, b.Status().Dispatch.Held)
}

// A slave of the in-sync set that stalls (its link holds everything, its
// connection stays up) leaves the set after haMaxTimeSlaveNotCatchup, long
// before the master's read timeout would drop its connection: the
// master's consumers then read what only the master holds (a slave out of
// the set is never elected), and the slaves rejoin once the link heals.
func TestMemberDropsAStalledSlave(t *testing.T) {
	g, _, ha := proxied(t, broker.SyncMaster, func(c *server.Config) { c.Broker.HAMaxTimeSlaveNotCatchup = 2 * time.Second })
	m1 := g.master(1)
	require.NoError(t, g.ms[m1-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	for id := 1; id <= 3; id++ {
		g.waitTopic(id)
	}
	require.Eventually(t, func() bool { return len(g.ms[m1-1].InSync()) == 2 }, failoverWait, 10*time.Millisecond)
	g.send(m1, 0)

	ha[m1-1].Set(faultproxy.Fault{Mode: faultproxy.Blackhole})
	stalled := time.Now()
	b := g.ms[m1-1].Server().Broker()
	_, err := b.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: 1, Body: body(1)}})
	require.ErrorIs(t, err, broker.ErrReplicaTimeout)
	require.Eventually(t, func() bool { return len(g.ms[m1-1].InSync()) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the stalled slaves never left the in-sync set")
	t.Logf("the stalled slaves left the in-sync set %s after the stall", time.Since(stalled).Round(time.Millisecond))
	require.Eventually(t, func() bool { _, max := b.QueueOffsets("T", 1); return max == 1 }, failoverWait, 5*time.Millisecond,
		"the master alone holds the message: its consumers read it")

	ha[m1-1].Set(faultproxy.Fault{})
	require.Eventually(t, func() bool { return len(g.ms[m1-1].InSync()) == 2 }, failoverWait, 10*time.Millisecond, "the slaves never rejoined")
	g.send(m1, 2)
}

// others3 returns the ids of a group of 3 other than id.
func others3(id int) []int64 {
	var out []int64
	for i := int64(1); i <= 3; i++ {
		if i != int64(id) {
			out = append(out, i)
		}
	}
	return out
}
