package nameserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
)

func TestRegisterThenRoute(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	rg := reg("b1", 0, "10.0.0.1:8081", "T")
	rg.RemotingAddr = "10.0.0.1:10911"
	rg.Topics["T"] = nameserver.TopicInfo{ReadQueueNums: 4, WriteQueueNums: 2, Perm: 6, TopicSysFlag: 1}

	res := mustRegister(t, r, rg)
	assert.True(t, res.Changed, "first registration")

	want := nameserver.TopicRoute{
		QueueDatas: []nameserver.QueueData{{BrokerName: "b1", ReadQueueNums: 4, WriteQueueNums: 2, Perm: 6, TopicSysFlag: 1}},
		BrokerDatas: []nameserver.BrokerData{{
			Cluster: "c", BrokerName: "b1",
			BrokerAddrs:   map[int64]string{0: "10.0.0.1:8081"},
			RemotingAddrs: map[int64]string{0: "10.0.0.1:10911"},
		}},
	}
	assert.Equal(t, want, mustRoute(t, r, "T"))
	assert.Equal(t, []string{"T"}, r.Topics())

	res = mustRegister(t, r, rg)
	assert.False(t, res.Changed, "a refresh with the same content")
}

func TestRouteIsACopy(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))
	route := mustRoute(t, r, "T")
	route.BrokerDatas[0].BrokerAddrs[0] = "evil:1"
	route.QueueDatas[0].Perm = 0
	assert.Equal(t, "10.0.0.1:8081", mustRoute(t, r, "T").BrokerDatas[0].BrokerAddrs[0])
	assert.Equal(t, int32(6), mustRoute(t, r, "T").QueueDatas[0].Perm)
}

func TestRouteTwoBrokersOfOneTopic(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081", "T", "U"))
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))

	route := mustRoute(t, r, "T")
	require.Len(t, route.QueueDatas, 2)
	require.Len(t, route.BrokerDatas, 2)
	for i, name := range []string{"b1", "b2"} { // sorted by broker name
		assert.Equal(t, name, route.QueueDatas[i].BrokerName)
		assert.Equal(t, name, route.BrokerDatas[i].BrokerName)
	}
	assert.Equal(t, map[int64]string{0: "10.0.0.2:8081"}, route.BrokerDatas[1].BrokerAddrs)

	route = mustRoute(t, r, "U")
	require.Len(t, route.BrokerDatas, 1)
	assert.Equal(t, "b2", route.BrokerDatas[0].BrokerName)
	assert.Equal(t, []string{"T", "U"}, r.Topics())
}

func TestMasterAndSlaveFormOneBrokerData(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	slave := reg("b1", 1, "10.0.0.2:8081", "T")
	slave.Topics["T"] = nameserver.TopicInfo{ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	slave.Topics["OnlySlave"] = topic8

	res := mustRegister(t, r, slave)
	assert.Equal(t, nameserver.RegisterResult{Changed: true}, res, "no master yet")
	assert.Equal(t, int32(4), mustRoute(t, r, "T").QueueDatas[0].ReadQueueNums, "the only broker's queue data")

	master := reg("b1", 0, "10.0.0.1:8081", "T")
	master.RemotingAddr = "10.0.0.1:10911"
	master.HAAddr = "10.0.0.1:10912"
	mustRegister(t, r, master)

	route := mustRoute(t, r, "T")
	require.Len(t, route.BrokerDatas, 1)
	assert.Equal(t, map[int64]string{0: "10.0.0.1:8081", 1: "10.0.0.2:8081"}, route.BrokerDatas[0].BrokerAddrs)
	assert.Equal(t, map[int64]string{0: "10.0.0.1:10911"}, route.BrokerDatas[0].RemotingAddrs)
	assert.Equal(t, []nameserver.QueueData{{BrokerName: "b1", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}}, route.QueueDatas,
		"queue data comes from the master")
	_, err := r.Route("OnlySlave")
	require.ErrorIs(t, err, nameserver.ErrTopicNotFound, "the master's topic set is the group's")

	res = mustRegister(t, r, slave)
	assert.Equal(t, nameserver.RegisterResult{
		MasterAddr: "10.0.0.1:8081", MasterRemotingAddr: "10.0.0.1:10911", MasterHAAddr: "10.0.0.1:10912",
	}, res, "a slave learns its master")

	require.True(t, r.Unregister("c", "b1", 0, "10.0.0.1:8081"))
	route = mustRoute(t, r, "T")
	assert.Equal(t, map[int64]string{1: "10.0.0.2:8081"}, route.BrokerDatas[0].BrokerAddrs)
	assert.Equal(t, int32(4), route.QueueDatas[0].ReadQueueNums, "without a master, the slave's queue data")
	mustRoute(t, r, "OnlySlave")
}

func TestUnregister(t *testing.T) {
	tests := []struct {
		name                string
		cluster, brokerName string
		id                  int64
		addr                string
		dropped             bool
	}{
		{"by gRPC address", "c", "b1", 0, "10.0.0.1:8081", true},
		{"by remoting address", "c", "b1", 0, "10.0.0.1:10911", true},
		{"another address", "c", "b1", 0, "10.0.0.9:8081", false},
		{"empty address", "c", "b1", 0, "", false},
		{"another cluster", "c2", "b1", 0, "10.0.0.1:8081", false},
		{"another id", "c", "b1", 1, "10.0.0.1:8081", false},
		{"unknown broker name", "c", "b9", 0, "10.0.0.1:8081", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, newClock(), nameserver.Config{})
			rg := reg("b1", 0, "10.0.0.1:8081", "T")
			rg.RemotingAddr = "10.0.0.1:10911"
			mustRegister(t, r, rg)
			mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081", "U"))

			assert.Equal(t, tt.dropped, r.Unregister(tt.cluster, tt.brokerName, tt.id, tt.addr))
			_, err := r.Route("T")
			if tt.dropped {
				require.ErrorIs(t, err, nameserver.ErrTopicNotFound)
				assert.Equal(t, []string{"b2/0"}, brokerIDs(r))
				assert.Equal(t, []string{"U"}, r.Topics())
				assert.False(t, r.Unregister(tt.cluster, tt.brokerName, tt.id, tt.addr), "twice")
			} else {
				require.NoError(t, err)
				assert.Equal(t, []string{"b1/0", "b2/0"}, brokerIDs(r))
			}
		})
	}
}

func TestRouteOfUnknownTopic(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))

	route, err := r.Route("Nope")
	require.ErrorIs(t, err, nameserver.ErrTopicNotFound)
	var nf *nameserver.TopicNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "Nope", nf.Topic)
	assert.Equal(t, `nameserver: no route for topic "Nope"`, err.Error())
	assert.Empty(t, route.BrokerDatas)
}

func TestReRegistrationReplacesTopics(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	first := reg("b1", 0, "10.0.0.1:8081", "T1", "T2")
	first.DataVersion = nameserver.DataVersion{Timestamp: 100, Counter: 1}
	mustRegister(t, r, first)
	mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081", "T1"))

	second := reg("b1", 0, "10.0.0.1:8081", "T2", "T3")
	second.DataVersion = nameserver.DataVersion{Timestamp: 200, Counter: 2}
	res := mustRegister(t, r, second)
	assert.True(t, res.Changed)

	route := mustRoute(t, r, "T1")
	require.Len(t, route.BrokerDatas, 1, "b1 dropped T1")
	assert.Equal(t, "b2", route.BrokerDatas[0].BrokerName)
	assert.Equal(t, []string{"T1", "T2", "T3"}, r.Topics())

	third := reg("b1", 0, "10.0.0.1:8081")
	third.DataVersion = nameserver.DataVersion{Timestamp: 300, Counter: 3}
	mustRegister(t, r, third)
	assert.Equal(t, []string{"T1"}, r.Topics(), "a broker with no topics routes none")
	assert.Equal(t, []string{"b1/0", "b2/0"}, brokerIDs(r), "but stays registered")
}

func TestOlderDataVersionKeepsTopics(t *testing.T) {
	stored := nameserver.DataVersion{Timestamp: 1000, Counter: 5}
	tests := []struct {
		name    string
		version nameserver.DataVersion
		applied bool
	}{
		{"older timestamp", nameserver.DataVersion{Timestamp: 999, Counter: 9}, false},
		{"same timestamp, lower counter", nameserver.DataVersion{Timestamp: 1000, Counter: 4}, false},
		{"zero", nameserver.DataVersion{}, false},
		{"equal", stored, true},
		{"newer counter", nameserver.DataVersion{Timestamp: 1000, Counter: 6}, true},
		{"newer timestamp", nameserver.DataVersion{Timestamp: 1001, Counter: 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			r := newRegistry(t, clk, nameserver.Config{})
			first := reg("b1", 0, "10.0.0.1:8081", "Old")
			first.DataVersion = stored
			mustRegister(t, r, first)

			clk.Advance(30 * time.Second)
			next := reg("b1", 0, "10.0.0.1:8081", "New")
			next.DataVersion = tt.version
			res := mustRegister(t, r, next)

			assert.Equal(t, tt.applied, res.Changed)
			if tt.applied {
				assert.Equal(t, []string{"New"}, r.Topics())
				assert.Equal(t, tt.version, r.Brokers()[0].DataVersion)
			} else {
				assert.Equal(t, []string{"Old"}, r.Topics(), "no roll-back")
				assert.Equal(t, stored, r.Brokers()[0].DataVersion)
			}
			assert.Equal(t, clk.Now(), r.Brokers()[0].LastUpdate, "liveness is refreshed either way")
		})
	}
}

func TestAddressChanges(t *testing.T) {
	t.Run("slave promoted at its address replaces its old id", func(t *testing.T) {
		r := newRegistry(t, newClock(), nameserver.Config{})
		mustRegister(t, r, reg("b1", 1, "10.0.0.2:8081", "T"))
		res := mustRegister(t, r, reg("b1", 0, "10.0.0.2:8081", "T"))
		assert.True(t, res.Changed)
		assert.Equal(t, []string{"b1/0"}, brokerIDs(r))
		assert.Equal(t, map[int64]string{0: "10.0.0.2:8081"}, mustRoute(t, r, "T").BrokerDatas[0].BrokerAddrs)
	})
	t.Run("broker renamed at its address replaces the old name", func(t *testing.T) {
		r := newRegistry(t, newClock(), nameserver.Config{})
		mustRegister(t, r, reg("old", 0, "10.0.0.1:8081", "T"))
		mustRegister(t, r, reg("new", 0, "10.0.0.1:8081", "U"))
		assert.Equal(t, []string{"new/0"}, brokerIDs(r))
		assert.Equal(t, []string{"U"}, r.Topics())
	})
	t.Run("broker id moves to a new address", func(t *testing.T) {
		r := newRegistry(t, newClock(), nameserver.Config{})
		mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))
		res := mustRegister(t, r, reg("b1", 0, "10.0.0.7:8081", "T"))
		assert.True(t, res.Changed)
		assert.Equal(t, map[int64]string{0: "10.0.0.7:8081"}, mustRoute(t, r, "T").BrokerDatas[0].BrokerAddrs)
		assert.False(t, r.Unregister("c", "b1", 0, "10.0.0.1:8081"), "the old address is gone")
		mustRegister(t, r, reg("b2", 0, "10.0.0.1:8081", "U"))
		assert.Equal(t, []string{"b1/0", "b2/0"}, brokerIDs(r), "the old address is free")
	})
}

func TestClusterConflict(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))

	slave := reg("b1", 1, "10.0.0.2:8081", "T")
	slave.Cluster = "other"
	_, err := r.Register(slave)
	require.ErrorIs(t, err, nameserver.ErrConflict)
	assert.Contains(t, err.Error(), `Cluster "other"`)
	assert.Equal(t, []string{"b1/0"}, brokerIDs(r))

	moved := reg("b1", 0, "10.0.0.1:8081", "T")
	moved.Cluster = "other"
	res := mustRegister(t, r, moved)
	assert.True(t, res.Changed, "the broker itself may move")
	assert.Equal(t, "other", mustRoute(t, r, "T").BrokerDatas[0].Cluster)
}

func TestClusterInfo(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	assert.Equal(t, nameserver.ClusterInfo{Clusters: map[string][]string{}, Brokers: map[string]nameserver.BrokerData{}}, r.ClusterInfo())

	mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081", "T"))
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081"))
	mustRegister(t, r, reg("b1", 1, "10.0.0.3:8081"))
	other := reg("x", 0, "10.0.1.1:8081")
	other.Cluster = "d"
	mustRegister(t, r, other)

	ci := r.ClusterInfo()
	assert.Equal(t, map[string][]string{"c": {"b1", "b2"}, "d": {"x"}}, ci.Clusters)
	assert.Equal(t, nameserver.BrokerData{
		Cluster: "c", BrokerName: "b1", BrokerAddrs: map[int64]string{0: "10.0.0.1:8081", 1: "10.0.0.3:8081"},
	}, ci.Brokers["b1"])
	assert.Len(t, ci.Brokers, 3)
}

func TestBrokers(t *testing.T) {
	clk := newClock()
	r := newRegistry(t, clk, nameserver.Config{})
	rg := reg("b1", 0, "10.0.0.1:8081", "T", "U")
	rg.RemotingAddr, rg.HAAddr, rg.Conn = "10.0.0.1:10911", "10.0.0.1:10912", "conn-1"
	rg.DataVersion = nameserver.DataVersion{Timestamp: 7, Counter: 2}
	mustRegister(t, r, rg)
	clk.Advance(5 * time.Second)
	mustRegister(t, r, reg("a", 3, "10.0.0.2:8081"))

	assert.Equal(t, []nameserver.BrokerInfo{
		{Cluster: "c", BrokerName: "a", BrokerID: 3, Addr: "10.0.0.2:8081", LastUpdate: clk.Now()},
		{
			Cluster: "c", BrokerName: "b1", Addr: "10.0.0.1:8081", RemotingAddr: "10.0.0.1:10911", HAAddr: "10.0.0.1:10912",
			Conn: "conn-1", Topics: 2, DataVersion: rg.DataVersion, LastUpdate: clk.Now().Add(-5 * time.Second),
		},
	}, r.Brokers())
}

func TestRegistrationIsCopied(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	rg := reg("b1", 0, "10.0.0.1:8081", "T")
	mustRegister(t, r, rg)
	rg.Topics["U"] = topic8
	delete(rg.Topics, "T")
	assert.Equal(t, []string{"T"}, r.Topics())
}

func TestDisconnected(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	withConn := func(rg nameserver.Registration, conn string) nameserver.Registration {
		rg.Conn = conn
		return rg
	}
	mustRegister(t, r, withConn(reg("b1", 0, "10.0.0.1:8081", "T"), "conn-1"))
	mustRegister(t, r, withConn(reg("b1", 1, "10.0.0.2:8081", "T"), "conn-1"))
	mustRegister(t, r, withConn(reg("b2", 0, "10.0.0.3:8081", "T", "U"), "conn-2"))
	mustRegister(t, r, reg("b3", 0, "10.0.0.4:8081", "V"))

	assert.Equal(t, 0, r.Disconnected(""), "untracked brokers stay")
	assert.Equal(t, 0, r.Disconnected("conn-9"))
	assert.Equal(t, 2, r.Disconnected("conn-1"))
	assert.Equal(t, []string{"b2/0", "b3/0"}, brokerIDs(r))
	assert.Equal(t, []string{"T", "U", "V"}, r.Topics())
	route := mustRoute(t, r, "T")
	require.Len(t, route.BrokerDatas, 1)
	assert.Equal(t, "b2", route.BrokerDatas[0].BrokerName)

	// A broker that re-registered through a new connection outlives the old one.
	mustRegister(t, r, withConn(reg("b2", 0, "10.0.0.3:8081", "T", "U"), "conn-3"))
	assert.Equal(t, 0, r.Disconnected("conn-2"))
	assert.Equal(t, 1, r.Disconnected("conn-3"))
	assert.Equal(t, []string{"b3/0"}, brokerIDs(r))
}
