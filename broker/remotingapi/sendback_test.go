package remotingapi_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// parked returns the message parked last in a delay level's schedule
// queue.
func parked(t *testing.T, e *env, level int32) *message.Message {
	t.Helper()
	var maxOff int64
	require.Eventually(t, func() bool {
		_, maxOff = e.b.QueueOffsets(broker.ScheduleTopic, level-1)
		return maxOff > 0
	}, 5*time.Second, time.Millisecond, "nothing parked at level %d", level)
	m, err := e.b.MessageByQueueOffset(broker.ScheduleTopic, level-1, maxOff-1)
	require.NoError(t, err)
	return m
}

// CONSUMER_SEND_MSG_BACK takes the consumed record back through the
// broker's retry ladder: %RETRY%<group> at level 3 + reconsume times, or
// straight to %DLQ%<group> with delayLevel -1.
func TestSendBack(t *testing.T) {
	e := newEnv(t, func(bc *broker.Config, _ *remotingapi.Config) {
		bc.MessageDelayLevel = []time.Duration{time.Hour, time.Hour, 50 * time.Millisecond, time.Hour}
	})
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)
	resp := sendOne(t, cl, "T", 0, "failing", tagged("A"))
	requireCode(t, remoting.ResSuccess, resp)
	_, phys, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	back := func(delayLevel string) *remoting.Command {
		return invoke(t, cl, request(remoting.ReqConsumerSendMsgBack, map[string]string{
			"group": "CG", "offset": strconv.FormatInt(phys, 10), "delayLevel": delayLevel, "originMsgId": resp.Ext("transactionId"),
			"originTopic": "T", "unitMode": "false", "maxReconsumeTimes": "16", "bname": "broker-a",
		}, nil))
	}
	requireCode(t, remoting.ResSuccess, back("0"))
	real, _ := parked(t, e, 3).Properties.Get(message.PropRealTopic)
	assert.Equal(t, "%RETRY%CG", real)
	e.waitVisible(t, "%RETRY%CG", 0, 1) // level 3: 50 ms here
	m, err := e.b.MessageByQueueOffset("%RETRY%CG", 0, 0)
	require.NoError(t, err)
	retryTopic, _ := m.Properties.Get(message.PropRetryTopic)
	assert.Equal(t, "T", retryTopic)
	assert.Equal(t, int32(1), m.ReconsumeTimes)
	assert.Equal(t, "failing", string(m.Body))

	requireCode(t, remoting.ResSuccess, back("-1"))
	e.waitVisible(t, "%DLQ%CG", 0, 1)

	bad := invoke(t, cl, request(remoting.ReqConsumerSendMsgBack, map[string]string{"group": "CG", "offset": "12345"}, nil))
	assert.NotEqual(t, remoting.ResSuccess, bad.ResponseCode(), "no record there: the Go client falls back to sending the retry itself")
}

// The Go client's fallback when the send-back fails: SEND_MESSAGE to
// %RETRY%<group> with reconsumeTimes and maxReconsumeTimes in the header
// and the retry's DELAY. Within the limit it waits in the retry ladder;
// past it, it is dead-lettered.
func TestClientRetrySend(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)
	retry := func(reconsume int) *remoting.Command {
		props := message.Properties{{Key: message.PropTags, Value: "A"}, {Key: message.PropUniqKey, Value: "7F0000010D4B0000000005f5e1000009"},
			{Key: message.PropRetryTopic, Value: "T"}, {Key: message.PropOriginMessageID, Value: "7F0000010D4B0000000005f5e1000009"},
			{Key: message.PropDelay, Value: strconv.Itoa(3 + reconsume - 1)}}
		return invoke(t, cl, request(remoting.ReqSendMessage, map[string]string{
			"producerGroup": "CLIENT_INNER_PRODUCER", "topic": "%RETRY%CG", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000000",
			"flag": "0", "properties": string(message.AppendProperties(nil, props)), "reconsumeTimes": strconv.Itoa(reconsume),
			"unitMode": "false", "maxReconsumeTimes": "16", "batch": "false", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		}, []byte("retry me")))
	}
	resp := retry(1)
	requireCode(t, remoting.ResSuccess, resp)
	m := parked(t, e, 3)
	real, _ := m.Properties.Get(message.PropRealTopic)
	assert.Equal(t, "%RETRY%CG", real)
	assert.Equal(t, int32(1), m.ReconsumeTimes)
	assert.Equal(t, "7F0000010D4B0000000005f5e1000009", m.UniqKey())

	resp = retry(17)
	requireCode(t, remoting.ResSuccess, resp)
	e.waitVisible(t, "%DLQ%CG", 0, 1)
	dl, err := e.b.MessageByQueueOffset("%DLQ%CG", 0, 0)
	require.NoError(t, err)
	origin, _ := dl.Properties.Get(message.PropDLQOriginTopic)
	assert.Equal(t, "T", origin)
	_, hasDelay := dl.Properties.Get(message.PropDelay)
	assert.False(t, hasDelay)
	assert.Equal(t, int32(17), dl.ReconsumeTimes)
	_, phys, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	assert.Equal(t, dl.PhysicalOffset, phys)
}
