package remotingapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// PULL_MESSAGE sysFlag bits (Java's PullSysFlag).
const (
	pullCommitOffset = 1 << 0 // commitOffset is the group's offset to store
	pullSuspend      = 1 << 1 // long poll when there is nothing new
	pullSubscription = 1 << 2 // the subscription is in the request
)

// slaveBrokerID is the broker a master suggests to a consumer reading far
// behind (RocketMQ's whichBrokerWhenConsumeSlowly).
const slaveBrokerID = "1"

// expressionTag is the only filter expression type Gantry evaluates.
const expressionTag = "TAG"

// pull answers PULL_MESSAGE (11): the stored records from queueOffset,
// filtered by the request's subscription or else the group's from its
// heartbeat, held until a message arrives (up to suspendTimeoutMillis,
// at most MaxHold) when there is nothing new and the suspend bit is set.
// Every answer carries nextBeginOffset, minOffset, maxOffset and
// suggestWhichBrokerId (the Go client reads a missing one as 0, and
// rewinds).
func (h *Handler) pull(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("consumerGroup", true)
	topic := rd.str("topic", true)
	qid := int32(rd.required("queueId", 32))
	offset := rd.required("queueOffset", 64)
	maxMsgs := rd.int32("maxMsgNums", 0)
	sysFlag := rd.int32("sysFlag", 0)
	commitOffset := rd.int64("commitOffset", -1)
	suspend := rd.int64("suspendTimeoutMillis", 0)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	expr, err := h.pullExpression(group, topic, sysFlag, req.Ext("subscription"), req.Ext("expressionType"))
	if err != nil {
		return remoting.NewResponse(req, remoting.ResSystemError, err.Error())
	}
	if sysFlag&pullCommitOffset != 0 && commitOffset >= 0 {
		if err := h.b.CommitOffset(group, topic, qid, commitOffset); err != nil {
			h.log.Debug("offset commit with a pull refused", "group", group, "topic", topic, "queue", qid, "err", err)
		}
	}
	var hold time.Duration
	if sysFlag&pullSuspend != 0 && suspend > 0 {
		hold = min(time.Duration(suspend)*time.Millisecond, h.cfg.MaxHold)
	}
	res, err := h.b.Pull(ctx, broker.PullRequest{
		Group: group, Topic: topic, QueueID: qid, Offset: offset,
		MaxMsgs: max(int(maxMsgs), 1), // the Go pull consumer sends 0
		Filter:  expr, Hold: hold,
	})
	if err != nil {
		return errorResponse(req, err)
	}
	defer res.Release()
	resp := remoting.NewResponse(req, pullCode(res.Status), res.Status.String())
	resp.SetExt("nextBeginOffset", strconv.FormatInt(res.NextOffset, 10))
	resp.SetExt("minOffset", strconv.FormatInt(res.MinOffset, 10))
	resp.SetExt("maxOffset", strconv.FormatInt(res.MaxOffset, 10))
	suggest := "0"
	if len(res.Records) > 0 && h.b.SuggestSlave(message.PhysicalOffsetOf(res.Records[0].B)) {
		suggest = slaveBrokerID
	}
	resp.SetExt("suggestWhichBrokerId", suggest)
	if len(res.Records) > 0 {
		n := 0
		for _, r := range res.Records {
			n += len(r.B)
		}
		body := make([]byte, 0, n)
		for _, r := range res.Records {
			body = append(body, r.B...)
		}
		resp.Body = body
	}
	return resp
}

// pullCode maps a pull's status to its response code as Java's
// PullMessageProcessor does; the store has set the next offset to match.
func pullCode(st broker.PullStatus) remoting.ResponseCode {
	switch st {
	case broker.PullFound:
		return remoting.ResSuccess
	case broker.PullNoMatchedMessage:
		return remoting.ResPullRetryImmediately
	case broker.PullNoMessageInQueue, broker.PullOffsetOverflowOne, broker.PullOffsetFoundNull:
		return remoting.ResPullNotFound
	default: // OffsetTooSmall, OffsetOverflowBadly (an empty queue's too)
		return remoting.ResPullOffsetMoved
	}
}

// pullExpression returns the tag expression that filters a pull: the
// request's when it carries one (the pull consumer), else the group's
// subscription to the topic from its last heartbeat (the push consumer
// sends none), else everything. A SQL92 expression is refused, as by a
// Java broker without property filtering.
func (h *Handler) pullExpression(group, topic string, sysFlag int32, sub, typ string) (string, error) {
	if sysFlag&pullSubscription == 0 {
		s, ok := h.subs.get(group, topic)
		if !ok {
			return "", nil
		}
		sub, typ = s.expression, s.kind
	}
	if typ != "" && !strings.EqualFold(typ, expressionTag) {
		return "", fmt.Errorf("the broker does not support consumer to filter message by %s (Gantry filters by TAG only)", typ)
	}
	return sub, nil
}
