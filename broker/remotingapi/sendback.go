package remotingapi

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// sendBack answers CONSUMER_SEND_MSG_BACK (36) with broker.SendBack, the
// gRPC API's rules: the record at commit-log offset goes to %RETRY%<group>
// after the retry ladder's delay (delayLevel 0), or the level given, or to
// %DLQ%<group> once retried maxReconsumeTimes times (0: the group's, 16 by
// default) or when delayLevel < 0. On any error the Go client sends the
// message to the retry topic itself (SEND_MESSAGE, see sendRetry).
func (h *Handler) sendBack(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	sb := broker.SendBackRequest{
		Group:             rd.str("group", true),
		PhysicalOffset:    rd.required("offset", 64),
		DelayLevel:        rd.int32("delayLevel", 0),
		MaxReconsumeTimes: rd.int32("maxReconsumeTimes", 0),
	}
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	res, err := h.b.SendBack(ctx, sb)
	if err != nil {
		return errorResponse(req, err)
	}
	h.log.Debug("message sent back", "group", sb.Group, "offset", sb.PhysicalOffset, "dead_lettered", res.DeadLettered,
		"reconsume_times", res.ReconsumeTimes)
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// lockBody is LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's body
// (Java's LockBatchRequestBody).
type lockBody struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	MQSet         []messageQueue `json:"mqSet"`
}

// messageQueue is RocketMQ's MessageQueue in JSON.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

func parseLockBody(req *remoting.Command) (lockBody, []broker.QueueRef, error) {
	var body lockBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return body, nil, fmt.Errorf("%w: %s body: %w", errBadHeader, req.RequestCode(), err)
	}
	refs := make([]broker.QueueRef, len(body.MQSet))
	for i, q := range body.MQSet {
		refs[i] = broker.QueueRef{Topic: q.Topic, QueueID: q.QueueID}
	}
	return body, refs, nil
}

// lockBatch answers LOCK_BATCH_MQ (41), which the Go orderly consumer
// waits 1 s for: {"lockOKMQSet":[...]}, the queues asked for that the
// client now holds (locks last the broker's queueLockTTL unless renewed).
func (h *Handler) lockBatch(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	body, refs, err := parseLockBody(req)
	if err != nil {
		return errorResponse(req, err)
	}
	held, err := h.b.LockQueues(body.ConsumerGroup, body.ClientID, refs)
	if err != nil {
		return errorResponse(req, err)
	}
	brokerName := map[broker.QueueRef]string{}
	for _, q := range body.MQSet {
		brokerName[broker.QueueRef{Topic: q.Topic, QueueID: q.QueueID}] = q.BrokerName
	}
	ok := make([]messageQueue, len(held))
	for i, q := range held {
		ok[i] = messageQueue{Topic: q.Topic, BrokerName: brokerName[q], QueueID: q.QueueID}
	}
	return jsonResponse(req, struct {
		LockOKMQSet []messageQueue `json:"lockOKMQSet"`
	}{ok})
}

// unlockBatch answers UNLOCK_BATCH_MQ (42), sent oneway (without the flag)
// or, at shutdown, waited for.
func (h *Handler) unlockBatch(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	body, refs, err := parseLockBody(req)
	if err == nil {
		err = h.b.UnlockQueues(body.ConsumerGroup, body.ClientID, refs)
	}
	if err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}
