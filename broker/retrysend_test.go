package broker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

func clientRetry(reconsume int32) *message.Message {
	m := newMsg(broker.RetryTopic("G"), 0, "retry me", "A")
	m.ReconsumeTimes = reconsume
	m.Properties.Set(message.PropRetryTopic, "Orders")
	m.Properties.Set(message.PropOriginMessageID, "ORIGIN")
	m.Properties.Set(message.PropDelay, "3")
	return m
}

// A consumer's own retry (RocketMQ clients' fallback when the send-back
// fails) waits in the retry ladder while within maxReconsumeTimes, and is
// dead-lettered past it as SendBack does it.
func TestSendRetry(t *testing.T) {
	b := openBroker(t, testConfig(t))
	res, err := b.SendRetry(t.Context(), "G", clientRetry(2), 16)
	require.NoError(t, err)
	assert.False(t, res.DeadLettered)
	assert.Equal(t, int32(2), res.ReconsumeTimes)
	waitVisible(t, b, broker.ScheduleTopic, 2, 1)
	parked, err := b.Store().MessageAt(res.Put.PhysicalOffset)
	require.NoError(t, err)
	assert.Equal(t, broker.ScheduleTopic, parked.Topic)
	real, _ := parked.Properties.Get(message.PropRealTopic)
	assert.Equal(t, "%RETRY%G", real)
	_, ok := b.Topic("%RETRY%G")
	assert.True(t, ok, "the retry topic is created whatever autoCreateTopicEnable says")

	res, err = b.SendRetry(t.Context(), "G", clientRetry(17), 16)
	require.NoError(t, err)
	assert.True(t, res.DeadLettered)
	waitVisible(t, b, "%DLQ%G", 0, 1)
	dl, err := b.Store().MessageAt(res.Put.PhysicalOffset)
	require.NoError(t, err)
	assert.Equal(t, "%DLQ%G", dl.Topic)
	assert.Equal(t, int32(17), dl.ReconsumeTimes)
	origin, _ := dl.Properties.Get(message.PropDLQOriginTopic)
	assert.Equal(t, "Orders", origin)
	id, _ := dl.Properties.Get(message.PropDLQOriginMessageID)
	assert.Equal(t, "ORIGIN", id)
	_, delayed := dl.Properties.Get(message.PropDelay)
	assert.False(t, delayed)

	res, err = b.SendRetry(t.Context(), "G", clientRetry(3), 2) // the header's limit wins
	require.NoError(t, err)
	assert.True(t, res.DeadLettered)

	_, err = b.SendRetry(t.Context(), "G", newMsg("Orders", 0, "x", ""), 16)
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
	_, err = b.SendRetry(t.Context(), "bad group", clientRetry(1), 16)
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	empty := clientRetry(1)
	empty.Body = nil
	_, err = b.SendRetry(t.Context(), "G", empty, 16)
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
}
