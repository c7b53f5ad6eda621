package embedded_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/remoting"
)

func remotingInvoke(t *testing.T, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	resp, err := cl.Invoke(t.Context(), req)
	require.NoError(t, err)
	return resp
}

// remotingRoute asks the nameserver's remoting front end for a topic's
// route, as RocketMQ clients do, and returns its master's address.
func remotingRoute(t *testing.T, c *embedded.Cluster, topic string) string {
	t.Helper()
	resp := remotingInvoke(t, c.NameServerRemotingAddr(), remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": topic}))
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)
	var route struct {
		BrokerDatas []struct {
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &route))
	require.Len(t, route.BrokerDatas, 1)
	return route.BrokerDatas[0].BrokerAddrs["0"]
}

// The cluster speaks RocketMQ remoting: the nameserver routes to the
// broker's remoting address, which takes sends, and which a restarted
// broker keeps.
func TestRemotingEndpoints(t *testing.T) {
	c, _ := start(t, embedded.Options{})
	require.NotEmpty(t, c.NameServerRemotingAddr())
	require.NotEqual(t, c.NameServerAddr(), c.NameServerRemotingAddr())
	assert.Equal(t, c.BrokerRemotingAddr(), remotingRoute(t, c, "TBW102"), "auto-creation is on: TBW102 is routed")

	send := func() *remoting.Command {
		req := remoting.NewRequest(remoting.ReqSendMessage, map[string]string{"producerGroup": "PG", "topic": "Orders", "queueId": "0"})
		req.Body = []byte("hello")
		return remotingInvoke(t, c.BrokerRemotingAddr(), req)
	}
	resp := send()
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)
	require.Eventually(t, func() bool {
		r := remotingInvoke(t, c.NameServerRemotingAddr(), remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Orders"}))
		return r.ResponseCode() == remoting.ResSuccess
	}, 5*time.Second, time.Millisecond, "a topic created by a send is registered at once")

	addr := c.BrokerRemotingAddr()
	require.NoError(t, c.RestartBroker(t.Context()))
	assert.Equal(t, addr, c.BrokerRemotingAddr())
	assert.Equal(t, addr, remotingRoute(t, c, "Orders"))
	resp = send()
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)

	require.NoError(t, c.StopNameServer(context.Background()))
	_, err := remoting.Dial(t.Context(), c.NameServerRemotingAddr(), remoting.DialOptions{})
	assert.Error(t, err, "the nameserver's remoting port is closed with it")
}
