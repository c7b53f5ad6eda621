package delivery

import (
	"context"
	"fmt"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/message"
)

// SendRetry stores a message a consumer of group sends to the group's retry
// topic itself, as RocketMQ clients do when CONSUMER_SEND_MSG_BACK fails:
// m is for %RETRY%<group> and carries its reconsume times (the failures so
// far, this one included) and the retry's DELAY level. While
// m.ReconsumeTimes is at most maxReconsumeTimes (<= 0: the group's
// retryMaxTimes, 16 by default) m is stored in the retry topic, parked
// until its DELAY is due; beyond it, m is dead-lettered as SendBack
// dead-letters a message: to %DLQ%<group>, at once, recording its
// RETRY_TOPIC and ORIGIN_MESSAGE_ID as DLQ_ORIGIN_TOPIC and
// DLQ_ORIGIN_MESSAGE_ID. The result's Put says where it went.
//
// The group must exist or be auto-created (else ErrGroupNotFound); the
// retry topic is created when missing whatever autoCreateTopicEnable says,
// and retries are never de-duplicated. m is checked as Send checks a
// message (ErrInvalidMessage, also for a topic other than the group's
// retry topic) and is not modified.
func (d *Service) SendRetry(ctx context.Context, group string, m *message.Message, maxReconsumeTimes int32) (SendBackResult, error) {
	g, err := d.topics.EnsureGroup(group)
	if err != nil {
		return SendBackResult{}, err
	}
	switch {
	case m == nil:
		return SendBackResult{}, fmt.Errorf("%w: nil message", brokererr.ErrInvalidMessage)
	case m.Topic != RetryTopic(group):
		return SendBackResult{}, fmt.Errorf("%w: a retry of group %q is for %q, not %q", brokererr.ErrInvalidMessage, group, RetryTopic(group), m.Topic)
	}
	maxTimes := retryMaxTimes(maxReconsumeTimes, g)
	out, res := m, SendBackResult{ReconsumeTimes: m.ReconsumeTimes}
	if m.ReconsumeTimes > maxTimes {
		out, res = d.sendBackMessage(SendBackRequest{Group: group, DelayLevel: -1}, g, m)
	}
	put, err := d.send.PutInternal(ctx, false, []*message.Message{out})
	if len(put) > 0 {
		res.Put = put[0]
	}
	if err != nil {
		return res, err
	}
	if res.DeadLettered {
		d.deadLettered(group)
		topic, _ := out.Properties.Get(message.PropDLQOriginTopic)
		id, _ := out.Properties.Get(message.PropDLQOriginMessageID)
		d.log.Info("message dead-lettered", "group", group, "topic", topic, "id", id,
			"reconsume_times", res.ReconsumeTimes, "reason", "retried by the client past its max reconsume times")
	}
	return res, nil
}
