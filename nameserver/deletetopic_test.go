package nameserver_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
)

// DeleteTopic drops a topic's route on every broker serving it, leaves
// the other topics alone, and a broker that still serves the topic
// brings it back with its next registration; one that deleted it does not.
func TestDeleteTopic(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T1", "T2"))
	mustRegister(t, r, reg("b1", 1, "10.0.0.3:8081", "T1", "T2"))
	mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081", "T1"))

	assert.True(t, r.DeleteTopic("T1"))
	_, err := r.Route("T1")
	assert.True(t, errors.Is(err, nameserver.ErrTopicNotFound), "%v", err)
	assert.Equal(t, []string{"T2"}, r.Topics())
	assert.Len(t, mustRoute(t, r, "T2").BrokerDatas, 1)
	assert.False(t, r.DeleteTopic("T1"), "already gone")
	assert.False(t, r.DeleteTopic("Never"))

	mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081"))
	assert.Equal(t, []string{"T2"}, r.Topics(), "b2 deleted it too")
	res := mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T1", "T2"))
	assert.True(t, res.Changed)
	assert.Equal(t, "b1", mustRoute(t, r, "T1").BrokerDatas[0].BrokerName, "b1 still serves it")
}

// DELETE_TOPIC_IN_NAMESRV (the official admin.DeleteTopic's last step)
// removes the route; a topic without one is answered SUCCESS too, saying
// so, and a request without a topic is refused.
func TestRemotingDeleteTopic(t *testing.T) {
	r := newRegistry(t, nil, nameserver.Config{})
	mustRegister(t, r, remotingReg("c", "b1", 0, "10.0.0.1:10911", 6, "T1", "T2"))
	cl := dialRemoting(t, startRemoting(t, r))

	resp := invoke(t, cl, remoting.ReqDeleteTopicInNameServer, map[string]string{"topic": "T1"})
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)
	assert.Empty(t, resp.Remark)
	assert.Equal(t, remoting.ResTopicNotExist, invoke(t, cl, remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "T1"}).ResponseCode())
	assert.JSONEq(t, `{"topicList":["T2"]}`, string(invoke(t, cl, remoting.ReqGetAllTopicListFromNameServer, nil).Body))

	resp = invoke(t, cl, remoting.ReqDeleteTopicInNameServer, map[string]string{"topic": "T1"})
	assert.Equal(t, remoting.ResSuccess, resp.ResponseCode())
	assert.Equal(t, "topic T1 has no route in this name server: nothing to delete", resp.Remark)
	resp = invoke(t, cl, remoting.ReqDeleteTopicInNameServer, nil)
	assert.Equal(t, remoting.ResInvalidParameter, resp.ResponseCode())
	assert.Equal(t, "DELETE_TOPIC_IN_NAMESRV needs the ext field topic", resp.Remark)
}
