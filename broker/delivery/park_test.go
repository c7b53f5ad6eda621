package delivery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/message"
)

// Park needs no store: where a message goes is decided from its
// properties, the delay levels and TimerMaxDelay.
func TestPark(t *testing.T) {
	d := &Service{cfg: Config{DelayLevels: []time.Duration{time.Second, 5 * time.Second}, TimerMaxDelay: time.Hour}}
	now := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name           string
		props          message.Properties
		topic          string
		queue          int32
		delay, deliver string // the parked copy's DELAY, TIMER_DELIVER_MS
	}{
		{"not delayed", nil, "T", 1, "", ""},
		{"level 0", message.Properties{{Key: message.PropDelay, Value: "0"}}, "T", 1, "", ""},
		{"level 2", message.Properties{{Key: message.PropDelay, Value: "2"}}, ScheduleTopic, 1, "2", ""},
		{"past the last level", message.Properties{{Key: message.PropDelay, Value: "9"}}, ScheduleTopic, 1, "2", ""},
		{"delay seconds", message.Properties{{Key: message.PropTimerDelaySec, Value: "10"}}, TimerTopic, 0, "", "1700000010000"},
		{"delivery time past", message.Properties{{Key: message.PropTimerDeliverMS, Value: "1"}}, "T", 1, "", ""},
	} {
		m := &message.Message{Topic: "T", QueueID: 1, Body: []byte("b"), Properties: tc.props}
		out, err := d.Park(m, now, false)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.topic, out.Topic, tc.name)
		if tc.topic == "T" {
			continue
		}
		assert.Equal(t, tc.queue, out.QueueID, tc.name)
		real, _ := out.Properties.Get(message.PropRealTopic)
		assert.Equal(t, "T", real, tc.name)
		delay, _ := out.Properties.Get(message.PropDelay)
		assert.Equal(t, tc.delay, delay, tc.name)
		deliver, _ := out.Properties.Get(message.PropTimerDeliverMS)
		assert.Equal(t, tc.deliver, deliver, tc.name)
		assert.Equal(t, "T", m.Topic, "%s: the caller's message is not changed", tc.name)
	}
	for name, p := range map[string]message.Property{
		"bad level":      {Key: message.PropDelay, Value: "x"},
		"bad seconds":    {Key: message.PropTimerDelaySec, Value: "1.5"},
		"beyond the max": {Key: message.PropTimerDelaySec, Value: "7200"},
	} {
		_, err := d.Park(&message.Message{Topic: "T", Properties: message.Properties{p}}, now, false)
		assert.ErrorIs(t, err, brokererr.ErrInvalidMessage, name)
	}
}
