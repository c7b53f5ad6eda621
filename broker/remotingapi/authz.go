package remotingapi

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// codeClasses is the class of every request code the front end answers
// (docs/SECURITY.md, "Operations and rights"); resources says what each
// touches. New panics for a route without a class; with authentication
// on, a code without one is never run.
var codeClasses = map[remoting.RequestCode]auth.Class{
	remoting.ReqSendMessage:                      auth.ClassPub,   // PUB on the topic; a group's retry topic: SUB on the group
	remoting.ReqSendMessageV2:                    auth.ClassPub,   // as SEND_MESSAGE
	remoting.ReqSendBatchMessage:                 auth.ClassPub,   // as SEND_MESSAGE
	remoting.ReqPullMessage:                      auth.ClassSub,   // SUB on the topic and the group
	remoting.ReqHeartBeat:                        auth.ClassSub,   // SUB on each consumer's group and subscribed topics
	remoting.ReqUnregisterClient:                 auth.ClassSub,   // SUB on the consumer group, if any
	remoting.ReqGetConsumerListByGroup:           auth.ClassSub,   // SUB on the group
	remoting.ReqQueryConsumerOffset:              auth.ClassSub,   // SUB on the group and the topic
	remoting.ReqUpdateConsumerOffset:             auth.ClassSub,   // SUB on the group and the topic
	remoting.ReqSearchOffsetByTimestamp:          auth.ClassSub,   // SUB on the topic
	remoting.ReqGetMaxOffset:                     auth.ClassSub,   // SUB on the topic
	remoting.ReqGetMinOffset:                     auth.ClassSub,   // SUB on the topic
	remoting.ReqConsumerSendMsgBack:              auth.ClassSub,   // SUB on the group (its retry and dead-letter topics)
	remoting.ReqLockBatchMQ:                      auth.ClassSub,   // SUB on the group and the queues' topics
	remoting.ReqUnlockBatchMQ:                    auth.ClassSub,   // SUB on the group and the queues' topics
	remoting.ReqQueryMessage:                     auth.ClassSub,   // SUB on the topic
	remoting.ReqViewMessageByID:                  auth.ClassAdmin, // an offset names a message of any topic
	remoting.ReqUpdateAndCreateTopic:             auth.ClassAdmin,
	remoting.ReqDeleteTopicInBroker:              auth.ClassAdmin,
	remoting.ReqGetAllTopicConfig:                auth.ClassAdmin,
	remoting.ReqUpdateAndCreateSubscriptionGroup: auth.ClassAdmin,
	remoting.ReqDeleteSubscriptionGroup:          auth.ClassAdmin,
	remoting.ReqGetAllSubscriptionGroupConfig:    auth.ClassAdmin,
	remoting.ReqGetTopicStatsInfo:                auth.ClassSub, // SUB on the topic
	remoting.ReqGetConsumeStats:                  auth.ClassSub, // SUB on the group and the topics named
	remoting.ReqGetConsumerConnectionList:        auth.ClassSub, // SUB on the group
	remoting.ReqGetBrokerRuntimeInfo:             auth.ClassAdmin,
	remoting.ReqInvokeBrokerToResetOffset:        auth.ClassAdmin,
	remoting.ReqUpdateBrokerConfig:               auth.ClassAdmin, // refused anyway
}

// CodeClass returns the class of a request code the front end answers;
// false for any other.
func CodeClass(code remoting.RequestCode) (auth.Class, bool) {
	c, ok := codeClasses[code]
	return c, ok
}

// maxStackResources is how many resources a request names without an
// allocation: all but heartbeats, locks and multi-topic stats.
const maxStackResources = 4

// check authenticates req (its AccessKey and Signature, as the official
// clients sign every request) and authorizes its operation on what it
// touches; it returns the NO_PERMISSION answer of a refusal, naming what
// was refused, or nil. A code the front end does not answer is answered
// REQUEST_CODE_NOT_SUPPORTED once its signature (if any) holds: it runs
// nothing.
func (h *Handler) check(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	p, err := h.authenticate(c, req)
	if err != nil {
		return remoting.NewResponse(req, remoting.ResNoPermission, err.Error())
	}
	code := req.RequestCode()
	class, ok := codeClasses[code]
	if !ok {
		return nil
	}
	var buf [maxStackResources]auth.Resource
	class, rs := resources(class, req, buf[:0])
	if code == remoting.ReqConsumerSendMsgBack {
		rs = h.sentBackTopic(rs, req.ExtFields["offset"])
	}
	// What the rules allow the guard allows: the guard, which counts and
	// logs refusals with the peer's address, is asked only otherwise, so
	// that an allowed request allocates nothing.
	if auth.Authorize(p, class, rs...) == nil {
		return nil
	}
	if err := h.guard.Authorize(p, class, code.Name(), c.RemoteAddr().String(), rs...); err != nil {
		return remoting.NewResponse(req, remoting.ResNoPermission, err.Error())
	}
	return nil
}

// authenticate returns the user who signed req, nil for an unsigned one.
// The signature is checked once against the users; the guard, which
// counts and logs with the peer's address, checks it again only when it
// fails, so that a signed request costs one HMAC and no allocation.
func (h *Handler) authenticate(c *remoting.Conn, req *remoting.Command) (*auth.Principal, error) {
	if p, err := h.users().VerifyRemoting(req.ExtFields, req.Body); err == nil {
		return p, nil
	}
	return h.guard.Remoting(req.ExtFields, req.Body, c.RemoteAddr().String())
}

// resources returns the class of req's operation (class, its code's, but
// for a send to a group's retry topic) and the topics and groups it
// touches, appended to rs.
func resources(class auth.Class, req *remoting.Command, rs []auth.Resource) (auth.Class, []auth.Resource) {
	ext := req.ExtFields
	switch req.RequestCode() {
	case remoting.ReqSendMessage:
		return sendResources(ext["topic"], rs)
	case remoting.ReqSendMessageV2, remoting.ReqSendBatchMessage:
		return sendResources(ext[shortNames.topic], rs)
	case remoting.ReqPullMessage, remoting.ReqQueryConsumerOffset, remoting.ReqUpdateConsumerOffset:
		return class, append(rs, auth.Group(ext["consumerGroup"]), auth.Topic(ext["topic"]))
	case remoting.ReqSearchOffsetByTimestamp, remoting.ReqGetMaxOffset, remoting.ReqGetMinOffset,
		remoting.ReqQueryMessage, remoting.ReqGetTopicStatsInfo:
		return class, append(rs, auth.Topic(ext["topic"]))
	case remoting.ReqGetConsumerListByGroup, remoting.ReqGetConsumerConnectionList:
		return class, append(rs, auth.Group(ext["consumerGroup"]))
	case remoting.ReqUnregisterClient:
		if g := ext["consumerGroup"]; g != "" {
			rs = append(rs, auth.Group(g))
		}
		return class, rs // a producer's: any user
	case remoting.ReqConsumerSendMsgBack:
		return class, append(rs, auth.Group(ext["group"]))
	case remoting.ReqHeartBeat:
		return class, heartbeatResources(req.Body, rs)
	case remoting.ReqLockBatchMQ, remoting.ReqUnlockBatchMQ:
		return class, lockResources(req.Body, rs)
	case remoting.ReqGetConsumeStats:
		rs = append(rs, auth.Group(ext["consumerGroup"]))
		if t := ext["topic"]; t != "" {
			rs = append(rs, auth.Topic(t))
		}
		for t := range strings.SplitSeq(ext["topicList"], ";") {
			if t != "" {
				rs = append(rs, auth.Topic(t))
			}
		}
		return class, rs
	}
	return class, rs // admin operations name nothing
}

// sentBackTopic appends the topic of the message at commit-log offset off
// (decimal), which CONSUMER_SEND_MSG_BACK copies into the group's retry
// topic, lest a consumer of one group read any topic's messages through
// its retry topic. A message that cannot be read names no topic: the
// handler refuses it anyway.
func (h *Handler) sentBackTopic(rs []auth.Resource, off string) []auth.Resource {
	phys, err := strconv.ParseInt(off, 10, 64)
	if err != nil {
		return rs
	}
	rec, err := h.b.AppendRecordAt(nil, phys)
	if err != nil {
		return rs
	}
	if v, err := message.NewView(rec); err == nil {
		rs = append(rs, auth.Topic(string(v.Topic())))
	}
	return rs
}

// sendResources is what a send to topic needs: PUB on it, or, for a
// group's retry topic, SUB on the group, as RocketMQ checks it: a
// consumer stores its own retry there when CONSUMER_SEND_MSG_BACK failed
// (send.go, sendRetry).
func sendResources(topic string, rs []auth.Resource) (auth.Class, []auth.Resource) {
	if strings.HasPrefix(topic, broker.RetryTopicPrefix) {
		return auth.ClassSub, append(rs, auth.Topic(topic)) // the group's (auth.Authorize)
	}
	return auth.ClassPub, append(rs, auth.Topic(topic))
}

// heartbeatResources appends the groups a heartbeat registers consumers
// in and the topics they subscribe to: registering a consumer takes
// queues from the group's others. A body that does not decode names
// nothing; the handler refuses it.
func heartbeatResources(body []byte, rs []auth.Resource) []auth.Resource {
	var data heartbeatData
	if json.Unmarshal(body, &data) != nil {
		return rs
	}
	for _, cd := range data.ConsumerDataSet {
		rs = append(rs, auth.Group(cd.GroupName))
		for _, sd := range cd.SubscriptionDataSet {
			rs = append(rs, auth.Topic(sd.Topic))
		}
	}
	return rs
}

// lockResources appends the group of a LOCK_BATCH_MQ or UNLOCK_BATCH_MQ
// and its queues' topics. A body that does not decode names nothing; the
// handler refuses it.
func lockResources(body []byte, rs []auth.Resource) []auth.Resource {
	var lb lockBody
	if json.Unmarshal(body, &lb) != nil {
		return rs
	}
	rs = append(rs, auth.Group(lb.ConsumerGroup))
	for _, q := range lb.MQSet {
		rs = append(rs, auth.Topic(q.Topic))
	}
	return rs
}

// serveChecked is ServeRemoting with authentication on.
func (h *Handler) serveChecked(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if refused := h.check(c, req); refused != nil {
		return refused
	}
	return h.mux.ServeRemoting(ctx, c, req)
}
