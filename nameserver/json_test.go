package nameserver_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
)

func TestTopicRouteJSON(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	master := reg("b1", 0, "10.0.0.1:8081", "T")
	master.RemotingAddr = "10.0.0.1:10911"
	mustRegister(t, r, master)
	mustRegister(t, r, reg("b1", 1, "10.0.0.2:8081", "T"))
	mustRegister(t, r, reg("b2", 0, "10.0.0.3:8081", "T")) // no remoting address
	route := mustRoute(t, r, "T")

	b, err := json.Marshal(route)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"queueDatas": [
			{"brokerName": "b1", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0},
			{"brokerName": "b2", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}
		],
		"brokerDatas": [
			{"cluster": "c", "brokerName": "b1", "brokerAddrs": {"0": "10.0.0.1:8081", "1": "10.0.0.2:8081"},
			 "remotingAddrs": {"0": "10.0.0.1:10911"}},
			{"cluster": "c", "brokerName": "b2", "brokerAddrs": {"0": "10.0.0.3:8081"}}
		]
	}`, string(b))

	// What a RocketMQ client gets: compact, remoting addresses, brokers without one left out.
	b, err = json.Marshal(route.ForRemoting())
	require.NoError(t, err)
	assert.Equal(t, `{"queueDatas":[{"brokerName":"b1","readQueueNums":8,"writeQueueNums":8,"perm":6,"topicSysFlag":0}],`+
		`"brokerDatas":[{"cluster":"c","brokerName":"b1","brokerAddrs":{"0":"10.0.0.1:10911"}}]}`, string(b))

	var back nameserver.TopicRoute
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, route.ForRemoting(), back)
}

func TestForRemotingOfNoRemotingBrokers(t *testing.T) {
	route := nameserver.TopicRoute{
		QueueDatas:  []nameserver.QueueData{{BrokerName: "b1", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
		BrokerDatas: []nameserver.BrokerData{{Cluster: "c", BrokerName: "b1", BrokerAddrs: map[int64]string{0: "x:1"}}},
	}
	b, err := json.Marshal(route.ForRemoting())
	require.NoError(t, err)
	assert.Equal(t, `{"queueDatas":[],"brokerDatas":[]}`, string(b), "arrays, never null")
}

func TestClusterInfoJSON(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081"))
	b, err := json.Marshal(r.ClusterInfo())
	require.NoError(t, err)
	assert.Equal(t, `{"clusterAddrTable":{"c":["b1"]},"brokerAddrTable":{"b1":{"cluster":"c","brokerName":"b1","brokerAddrs":{"0":"10.0.0.1:8081"}}}}`, string(b))
}
