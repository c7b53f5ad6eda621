package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// TestHAStatus reads the Admin service's HAStatus on a master and on its
// slave: the master's slaves with their acked offset and lag, the slave's
// master, lag and metadata snapshots; a stopped slave shows as
// disconnected and behind.
func TestHAStatus(t *testing.T) {
	c := startGroup(t, groupOptions(broker.AsyncMaster, 1))
	groupTopic(t, c, "T", 2)
	waitSlaves(t, c, 1)
	for i := range 10 {
		_, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
	}
	a, err := client.NewAdmin(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	end := logEnd(c.Server())
	master, slave := c.BrokerAddr(), c.SlaveServer(1).GRPCAddr()

	var st client.HAStatus
	require.Eventually(t, func() bool {
		st, err = a.HAStatus(t.Context(), master)
		require.NoError(t, err)
		return len(st.Slaves) == 1 && st.Slaves[0].LagBytes == 0
	}, 30*time.Second, 10*time.Millisecond, "the master's HA status: %+v", st)
	assert.Equal(t, "ASYNC_MASTER", st.Role)
	assert.Equal(t, end, st.LogEnd)
	assert.Equal(t, client.HASlave{BrokerID: 1, Addr: st.Slaves[0].Addr, Connected: true, Acked: end}, st.Slaves[0])
	assert.NotEmpty(t, st.Slaves[0].Addr)
	assert.False(t, st.Following, "a master follows nobody")

	require.Eventually(t, func() bool {
		st, err = a.HAStatus(t.Context(), slave)
		require.NoError(t, err)
		return st.Connected && st.LogEnd == end && st.MasterLogEnd == end && st.MetaSnapshots > 0
	}, 30*time.Second, 10*time.Millisecond, "the slave's HA status: %+v", st)
	assert.Equal(t, "SLAVE", st.Role)
	assert.True(t, st.Following)
	assert.Equal(t, c.Server().HAAddr(), st.MasterHAAddr)
	assert.Zero(t, st.LagBytes)
	assert.False(t, st.Stopped)
	assert.Empty(t, st.Slaves, "a slave has no slaves")

	// Stopped, the slave stays in the master's list, disconnected, and
	// falls behind by what the master stores meanwhile.
	require.NoError(t, c.StopSlave(t.Context(), 1))
	_, err = sendOne(t.Context(), c.Broker(), "T", 10)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err = a.HAStatus(t.Context(), master)
		require.NoError(t, err)
		return len(st.Slaves) == 1 && !st.Slaves[0].Connected
	}, 30*time.Second, 10*time.Millisecond, "the master's HA status: %+v", st)
	assert.Equal(t, end, st.Slaves[0].Acked)
	assert.Equal(t, logEnd(c.Server())-end, st.Slaves[0].LagBytes)
	assert.Positive(t, st.Slaves[0].LagBytes)
}

// TestHAStatusStandalone: a broker without slaves is a master with none.
func TestHAStatusStandalone(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	a, err := client.NewAdmin(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	st, err := a.HAStatus(t.Context(), c.BrokerRemotingAddr())
	require.NoError(t, err)
	assert.Equal(t, client.HAStatus{Role: "ASYNC_MASTER", LogEnd: logEnd(c.Server())}, st)
}
