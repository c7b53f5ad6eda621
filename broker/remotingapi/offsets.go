package remotingapi

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// queueArgs reads the topic and queueId of an offset request.
func queueArgs(rd *extReader) (string, int32) {
	return rd.str("topic", true), int32(rd.required("queueId", 32))
}

// queryConsumerOffset answers QUERY_CONSUMER_OFFSET (14): the group's
// committed offset in a queue; with none, offset 0 for a young queue
// (Config.YoungQueueBytes), else QUERY_NOT_FOUND (22), which the Go client
// reads as "no offset" (any other error leaves the queue unassigned).
func (h *Handler) queryConsumerOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("consumerGroup", true)
	topic, qid := queueArgs(&rd)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	off, ok := h.b.QueryOffset(group, topic, qid)
	if !ok {
		if !h.youngQueue(topic, qid) {
			return remoting.NewResponse(req, remoting.ResQueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
		}
		off = 0
	}
	return offsetResponse(req, off)
}

// youngQueue reports whether a queue was never trimmed and its first
// message lies within the last YoungQueueBytes of the commit log (Java:
// is still in the page cache). An empty queue is young.
func (h *Handler) youngQueue(topic string, qid int32) bool {
	if h.cfg.YoungQueueBytes < 0 {
		return false
	}
	minOff, maxOff := h.b.QueueOffsets(topic, qid)
	switch {
	case minOff > 0:
		return false
	case maxOff == 0:
		return true
	}
	m, err := h.b.MessageByQueueOffset(topic, qid, 0)
	if err != nil {
		return false
	}
	_, logEnd := h.b.LogOffsets()
	return logEnd-m.PhysicalOffset <= h.cfg.YoungQueueBytes
}

// updateConsumerOffset answers UPDATE_CONSUMER_OFFSET (15). The Go client
// sends it "oneway" without the oneway flag: the answer is dropped, but
// always sent.
func (h *Handler) updateConsumerOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("consumerGroup", true)
	topic, qid := queueArgs(&rd)
	off := rd.required("commitOffset", 64)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	if err := h.b.CommitOffset(group, topic, qid, off); err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// searchOffset answers SEARCH_OFFSET_BY_TIMESTAMP (29): the offset of the
// queue's first message stored at or after timestamp (ms), or its max.
func (h *Handler) searchOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	topic, qid := queueArgs(&rd)
	ts := rd.required("timestamp", 64)
	if err := h.checkQueue(rd.err, topic, qid); err != nil {
		return errorResponse(req, err)
	}
	off, err := h.b.OffsetAtTime(topic, qid, ts)
	if err != nil {
		return errorResponse(req, err)
	}
	return offsetResponse(req, off)
}

// maxOffset answers GET_MAX_OFFSET (30): the queue's next offset to write.
func (h *Handler) maxOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return h.queueOffset(req, func(_, maxOff int64) int64 { return maxOff })
}

// minOffset answers GET_MIN_OFFSET (31): the queue's first offset kept.
func (h *Handler) minOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return h.queueOffset(req, func(minOff, _ int64) int64 { return minOff })
}

func (h *Handler) queueOffset(req *remoting.Command, pick func(minOff, maxOff int64) int64) *remoting.Command {
	rd := extReader{req: req}
	topic, qid := queueArgs(&rd)
	if err := h.checkQueue(rd.err, topic, qid); err != nil {
		return errorResponse(req, err)
	}
	return offsetResponse(req, pick(h.b.QueueOffsets(topic, qid)))
}

// checkQueue refuses an unknown topic and a queue id outside its read
// queues, as the gRPC API's queue offset calls do; it passes a header
// error on.
func (h *Handler) checkQueue(headerErr error, topic string, qid int32) error {
	if headerErr != nil {
		return headerErr
	}
	tc, ok := h.b.Topic(topic)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", broker.ErrTopicNotFound, topic)
	case qid < 0 || qid >= tc.ReadQueueNums:
		return fmt.Errorf("%w: queue id %d: topic %q has read queues 0..%d", broker.ErrInvalidArgument, qid, topic, tc.ReadQueueNums-1)
	}
	return nil
}

// offsetResponse is SUCCESS with ext offset: the Go client reads only
// that field of 14, 29, 30 and 31.
func offsetResponse(req *remoting.Command, off int64) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.SetExt("offset", strconv.FormatInt(off, 10))
	return resp
}
