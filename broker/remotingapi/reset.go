package remotingapi

import (
	"context"
	"strconv"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// notifyReset tells every connection with a live consumer of r.Group that
// the group's offsets of r.Topic were reset: RESET_CONSUMER_CLIENT_OFFSET
// (220, oneway: the client answers nothing), ext topic, group, timestamp
// and isForce, and r's offsets in the body, a ResetOffsetBody as a Java
// broker writes it (offsetTableBody), which the official Go client
// parses. It then pauses, drops what it pulled of those queues, commits
// the new offsets and reads the queues from there. A connection that
// cannot take it in NotifyTimeout is skipped: the broker answers its pulls
// "offset moved" after the reset's grace period (broker.ResetOffsetByTime).
func (h *Handler) notifyReset(ctx context.Context, r broker.OffsetReset) {
	body, err := offsetTableBody(h.b.Config().BrokerName, offsetEntries(r.Topic, r.Offsets))
	if err != nil { // int64 values: never
		h.log.Warn("offset reset notification not encoded", "group", r.Group, "topic", r.Topic, "err", err)
		return
	}
	ext := map[string]string{"topic": r.Topic, "group": r.Group, "timestamp": strconv.FormatInt(r.Timestamp, 10), "isForce": "true"}
	h.tellMembers(ctx, r.Group, "offset reset notification", func() *remoting.Command {
		req := remoting.NewRequest(remoting.ReqResetConsumerClientOffset, ext)
		req.Body = body
		return req
	}, "topic", r.Topic)
}

// offsetEntries returns the queue table of a topic's offsets by queue id.
func offsetEntries(topic string, offsets map[int32]int64) []queueEntry {
	entries := make([]queueEntry, 0, len(offsets))
	for q, off := range offsets {
		entries = append(entries, queueEntry{topic, q, off})
	}
	return entries
}
