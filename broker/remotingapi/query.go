package remotingapi

import (
	"context"
	"math"
	"strconv"

	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// Limits of QUERY_MESSAGE, Java's: defaultQueryMaxNum and maxMsgsNumBatch.
const (
	defaultQueryMax = 32
	maxQueryMax     = 64
)

// queryMessage answers QUERY_MESSAGE (12): the messages of topic whose
// KEYS hold key (or whose UNIQ_KEY is key) stored within [beginTimestamp,
// endTimestamp] (ms), at most maxNum (32 when absent, at most 64), newest
// first, as their stored records back to back; ext
// indexLastUpdateTimestamp and indexLastUpdatePhyoffset are the newest
// match's store time and commit-log offset. No match is QUERY_NOT_FOUND.
// Like the gRPC query, it sees every message acknowledged before it
// (broker.MessagesByKey).
func (h *Handler) queryMessage(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	topic := rd.str("topic", true)
	key := rd.str("key", true)
	maxNum := int(rd.int32("maxNum", defaultQueryMax))
	begin := rd.int64("beginTimestamp", 0)
	end := rd.int64("endTimestamp", math.MaxInt64)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	if maxNum <= 0 {
		maxNum = defaultQueryMax
	}
	msgs, err := h.b.MessagesByKey(ctx, topic, key, begin, end, min(maxNum, maxQueryMax))
	if err != nil {
		return errorResponse(req, err)
	}
	var body []byte
	var newest *message.Message
	for _, m := range msgs {
		if body, err = h.appendRecord(body, m.PhysicalOffset); err != nil {
			continue // deleted by retention since
		}
		if newest == nil || m.StoreTimestamp > newest.StoreTimestamp {
			newest = m
		}
	}
	if newest == nil {
		return remoting.NewResponse(req, remoting.ResQueryNotFound, "can not find message, maybe time range not correct")
	}
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.SetExt("indexLastUpdateTimestamp", strconv.FormatInt(newest.StoreTimestamp, 10))
	resp.SetExt("indexLastUpdatePhyoffset", strconv.FormatInt(newest.PhysicalOffset, 10))
	resp.Body = body
	return resp
}

// viewMessage answers VIEW_MESSAGE_BY_ID (33): the record at commit-log
// offset (what an offset message id names), as stored.
func (h *Handler) viewMessage(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	off := rd.required("offset", 64)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	body, err := h.appendRecord(nil, off)
	if err != nil {
		return remoting.ErrorResponse(req, remoting.ResSystemError, "can not find message by the offset, %d: %v", off, err)
	}
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.Body = body
	return resp
}

// appendRecord appends the stored record that starts at commit-log offset
// off.
func (h *Handler) appendRecord(dst []byte, off int64) ([]byte, error) {
	return h.b.AppendRecordAt(dst, off)
}
