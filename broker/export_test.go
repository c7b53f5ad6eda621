package broker

import (
	"context"
	"time"

	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// PullLimits exposes how a Pull's limits are defaulted and bounded.
func PullLimits(msgs, bytes int) (int, int) { return pullLimits(msgs, bytes) }

// PutError exposes the classification of store.Put errors.
func PutError(topic string, res []store.PutResult, err error) error { return putError(topic, res, err) }

// Watched reports whether a pull is (or was, until the next dispatch)
// watching a queue.
func (b *Broker) Watched(topic string, queueID int32) bool {
	b.polls.mu.Lock()
	defer b.polls.mu.Unlock()
	_, ok := b.polls.waits[store.QueueKey{Topic: topic, QueueID: queueID}]
	return ok
}

// HoldFor exposes how long a Pull under ctx may be held.
func (b *Broker) HoldFor(ctx context.Context, hold time.Duration) time.Duration {
	return b.holdFor(ctx, hold)
}

// QueueLocks returns a group's unexpired queue locks: queue to holder.
func (b *Broker) QueueLocks(group string) map[QueueRef]string { return b.locks.held(group) }

// WithScheduleTick returns c with the scheduler's and the timer's tick set.
func (c Config) WithScheduleTick(d time.Duration) Config { c.scheduleTick = d; return c }

// PutInternal exposes putInternal, which the broker's own senders (send-back) use.
func (b *Broker) PutInternal(ctx context.Context, msgs []*message.Message) ([]store.PutResult, error) {
	return b.putInternal(ctx, msgs)
}

// RetryRef is a retry reference as tests write it.
type RetryRef = delivery.RetryRef

// ParkRetryRefs parks one reference record naming refs, as a send-back
// of group's messages at level would (refs need not name messages).
func (b *Broker) ParkRetryRefs(ctx context.Context, group string, level int32, refs ...RetryRef) error {
	return b.delivery.ParkRetryRefs(ctx, group, level, refs)
}

// Store returns the broker's store, for tests that check it directly.
func (b *Broker) Store() *store.Store { return b.store.(*store.Store) }

// SetSlaveReadBehind sets how far behind the log's end a read makes
// SuggestSlave answer true.
func (b *Broker) SetSlaveReadBehind(n int64) { b.repl.behind = n }
