package broker

import (
	"context"
	"sync"
	"time"

	"github.com/gantrymq/gantry/broker/store"
)

// deadlineMargin is how long before ctx's deadline a held Pull answers, so
// that the reply reaches the client before it gives up.
const deadlineMargin = 50 * time.Millisecond

// notifier wakes pulls held on a queue when the store dispatches a message
// to it. Each watched queue has a channel that notify closes and forgets,
// so the dispatcher never blocks (it takes one short mutex) and any number
// of pulls wake at once.
type notifier struct {
	mu    sync.Mutex
	waits map[store.QueueKey]chan struct{}
}

func newNotifier() *notifier {
	return &notifier{waits: map[store.QueueKey]chan struct{}{}}
}

// watch returns a channel closed at the next dispatch to (topic, queueID).
func (n *notifier) watch(k store.QueueKey) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.waits[k]
	if ch == nil {
		ch = make(chan struct{})
		n.waits[k] = ch
	}
	return ch
}

// notify is the store's OnDispatch hook: it wakes the queue's watchers.
func (n *notifier) notify(topic string, queueID int32, _ int64) {
	k := store.QueueKey{Topic: topic, QueueID: queueID}
	n.mu.Lock()
	ch := n.waits[k]
	if ch != nil {
		delete(n.waits, k)
	}
	n.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// holdFor returns how long a pull may be held: hold, at most
// longPollingMaxHold, ending deadlineMargin before ctx's deadline.
func (b *Broker) holdFor(ctx context.Context, hold time.Duration) time.Duration {
	d := min(hold, b.cfg.LongPollingMaxHold)
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-deadlineMargin)
	}
	return d
}

// longPoll waits up to hold for a message of the queue, reading again after
// every dispatch to it. It watches before it reads, so a dispatch between
// the read and the wait is not missed.
func (b *Broker) longPoll(ctx context.Context, req PullRequest, f Filter, hold time.Duration) (PullResult, error) {
	timer := time.NewTimer(hold)
	defer timer.Stop()
	k := store.QueueKey{Topic: req.Topic, QueueID: req.QueueID}
	for {
		woken := b.polls.watch(k)
		res, err := b.get(req, f)
		if err != nil || !nothingNew(res) {
			return res, err
		}
		select {
		case <-woken:
		case <-timer.C:
			return res, nil
		case <-b.closing:
			return res, nil
		case <-ctx.Done():
			select {
			case <-timer.C: // the hold ended too (a late wake-up): answer as planned
				return res, nil
			default:
			}
			return res, ctx.Err()
		}
	}
}
