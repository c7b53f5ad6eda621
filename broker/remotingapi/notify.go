package remotingapi

import (
	"context"
	"slices"
	"sync"

	"github.com/gantrymq/gantry/remoting"
)

// notifier collects the groups whose membership changed, for notifyLoop.
// add never blocks (the broker calls it while changing membership);
// changes of one group coalesce until the loop takes them.
type notifier struct {
	mu      sync.Mutex
	pending map[string]struct{}
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
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// take returns the pending groups, sorted, and forgets them.
func (n *notifier) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	groups := make([]string, 0, len(n.pending))
	for g := range n.pending {
		groups = append(groups, g)
	}
	clear(n.pending)
	slices.Sort(groups)
	return groups
}

// notifyLoop sends NOTIFY_CONSUMER_IDS_CHANGED for every changed group and
// RESET_CONSUMER_CLIENT_OFFSET for every reset until ctx ends.
func (h *Handler) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.notes.wake:
		case <-h.resets.wake:
		}
		for _, g := range h.notes.take() {
			h.notifyGroup(ctx, g)
		}
		for _, r := range h.resets.take() {
			h.notifyReset(ctx, r)
		}
	}
}

// notifyGroup tells every connection with a live consumer of group that
// its membership changed (code 40, ext consumerGroup, oneway: the client
// rebalances and sends no answer). A connection that cannot take it in
// NotifyTimeout is skipped (its client rebalances within 20 s anyway).
func (h *Handler) notifyGroup(ctx context.Context, group string) {
	live := map[string]bool{}
	for _, id := range h.b.ConsumerList(group) {
		live[id] = true
	}
	for _, c := range h.clients.conns(group, func(id string) bool { return live[id] }) {
		req := remoting.NewRequest(remoting.ReqNotifyConsumerIDsChanged, map[string]string{"consumerGroup": group})
		wctx, cancel := context.WithTimeout(ctx, h.cfg.NotifyTimeout)
		err := c.Oneway(wctx, req)
		cancel()
		if err != nil {
			h.log.Debug("membership notification not sent", "group", group, "conn", c.String(), "err", err)
			continue
		}
		h.log.Debug("membership notification sent", "group", group, "conn", c.String())
	}
}
