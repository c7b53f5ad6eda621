package remotingapi

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// resetQueue collects the resets of groups' offsets (the broker's
// AddOffsetResetHook) for notifyLoop. add never blocks.
type resetQueue struct {
	mu      sync.Mutex
	pending []broker.OffsetReset
	wake    chan struct{} // holds a value while something is pending
}

func newResetQueue() *resetQueue { return &resetQueue{wake: make(chan struct{}, 1)} }

// add queues r.
func (q *resetQueue) add(r broker.OffsetReset) {
	q.mu.Lock()
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the queued resets, oldest first, and forgets them.
func (q *resetQueue) take() []broker.OffsetReset {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending = nil
	return out
}

// notifyReset tells every connection with a live consumer of r.Group that
// the group's offsets of r.Topic were reset: RESET_CONSUMER_CLIENT_OFFSET
// (220, oneway: the client answers nothing), ext topic, group, timestamp
// and isForce, and r's offsets in the body. The official Go client then
// pauses, drops what it pulled of those queues, commits the new offsets
// and reads the queues from there. A connection that cannot take it in
// NotifyTimeout is skipped: the broker answers its pulls "offset moved"
// after the reset's grace period (broker.ResetOffsetByTime).
func (h *Handler) notifyReset(ctx context.Context, r broker.OffsetReset) {
	live := map[string]bool{}
	for _, id := range h.b.ConsumerList(r.Group) {
		live[id] = true
	}
	body := resetBody(h.b.Config().BrokerName, r)
	for _, c := range h.clients.conns(r.Group, func(id string) bool { return live[id] }) {
		req := remoting.NewRequest(remoting.ReqResetConsumerClientOffset, map[string]string{
			"topic": r.Topic, "group": r.Group, "timestamp": strconv.FormatInt(r.Timestamp, 10), "isForce": "true",
		})
		req.Body = body
		wctx, cancel := context.WithTimeout(ctx, h.cfg.NotifyTimeout)
		err := c.Oneway(wctx, req)
		cancel()
		if err != nil {
			h.log.Debug("offset reset notification not sent", "group", r.Group, "topic", r.Topic, "conn", c.String(), "err", err)
			continue
		}
		h.log.Debug("offset reset notification sent", "group", r.Group, "topic", r.Topic, "conn", c.String())
	}
}

// resetBody is RESET_CONSUMER_CLIENT_OFFSET's body, ResetOffsetBody:
// {"offsetTable":[[{"topic":..,"brokerName":..,"queueId":..},offset],...]},
// the map as Gson writes one with object keys, which is the form of it
// that is valid JSON and that the official Go client parses (it splits
// the text on "],[" and "},", so the encoding is compact).
func resetBody(brokerName string, r broker.OffsetReset) []byte {
	type messageQueue struct {
		Topic      string `json:"topic"`
		BrokerName string `json:"brokerName"`
		QueueID    int32  `json:"queueId"`
	}
	b := []byte(`{"offsetTable":[`)
	for i, id := range slices.Sorted(maps.Keys(r.Offsets)) {
		if i > 0 {
			b = append(b, ',')
		}
		mq, _ := json.Marshal(messageQueue{Topic: r.Topic, BrokerName: brokerName, QueueID: id}) // cannot fail
		b = append(append(append(b, '['), mq...), ',')
		b = append(strconv.AppendInt(b, r.Offsets[id], 10), ']')
	}
	return append(b, "]}"...)
}
