package remotingapi

import (
	"context"
	"slices"
	"sync"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// notifier collects, for notifyLoop, the groups whose membership changed
// and the resets of groups' offsets. Its adds never block (the broker
// calls them while changing membership or offsets); changes of one
// group's membership coalesce until the loop takes them.
type notifier struct {
	mu      sync.Mutex
	pending map[string]struct{}
	resets  []broker.OffsetReset
	wake    chan struct{} // holds a value while something is pending
}

func newNotifier() *notifier {
	return &notifier{pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// add marks group's membership changed.
func (n *notifier) add(group string) {
	n.mu.Lock()
	n.pending[group] = struct{}{}
	n.mu.Unlock()
	n.signal()
}

// addReset queues a reset of a group's offsets.
func (n *notifier) addReset(r broker.OffsetReset) {
	n.mu.Lock()
	n.resets = append(n.resets, r)
	n.mu.Unlock()
	n.signal()
}

func (n *notifier) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// take returns the pending groups, sorted, and the queued resets, oldest
// first, and forgets them.
func (n *notifier) take() ([]string, []broker.OffsetReset) {
	n.mu.Lock()
	defer n.mu.Unlock()
	groups := make([]string, 0, len(n.pending))
	for g := range n.pending {
		groups = append(groups, g)
	}
	clear(n.pending)
	slices.Sort(groups)
	resets := n.resets
	n.resets = nil
	return groups, resets
}

// notifyLoop sends NOTIFY_CONSUMER_IDS_CHANGED for every changed group and
// RESET_CONSUMER_CLIENT_OFFSET for every reset until ctx ends.
func (h *Handler) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.notes.wake:
		}
		groups, resets := h.notes.take()
		for _, g := range groups {
			h.notifyGroup(ctx, g)
		}
		for _, r := range resets {
			h.notifyReset(ctx, r)
		}
	}
}

// notifyGroup tells every connection with a live consumer of group that
// its membership changed (code 40, ext consumerGroup, oneway: the client
// rebalances and sends no answer). A connection that cannot take it in
// NotifyTimeout is skipped (its client rebalances within 20 s anyway).
func (h *Handler) notifyGroup(ctx context.Context, group string) {
	h.tellMembers(ctx, group, "membership notification", func() *remoting.Command {
		return remoting.NewRequest(remoting.ReqNotifyConsumerIDsChanged, map[string]string{"consumerGroup": group})
	})
}

// tellMembers sends a request newReq makes, oneway, to every connection
// with a live consumer of group; one that cannot take it in NotifyTimeout
// is skipped. what and attrs describe the request in the log.
func (h *Handler) tellMembers(ctx context.Context, group, what string, newReq func() *remoting.Command, attrs ...any) {
	log := h.log.With(append([]any{"group", group}, attrs...)...)
	live := map[string]bool{}
	for _, id := range h.b.ConsumerList(group) {
		live[id] = true
	}
	for _, c := range h.clients.conns(group, func(id string) bool { return live[id] }) {
		wctx, cancel := context.WithTimeout(ctx, h.cfg.NotifyTimeout)
		err := c.Oneway(wctx, newReq())
		cancel()
		if err != nil {
			log.Debug(what+" not sent", "conn", c.String(), "err", err)
			continue
		}
		log.Debug(what+" sent", "conn", c.String())
	}
}
