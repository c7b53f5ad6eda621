package broker

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/gantrymq/gantry/message"
)

// keyLookupCatchUp bounds how long a key lookup that found nothing waits
// for the dispatcher to index what the log held when it began (a stalled
// dispatcher must not hold an admin's query for good).
const keyLookupCatchUp = 5 * time.Second

// MaxByUniqKey bounds the messages MessagesByUniqKey returns.
const MaxByUniqKey = 32

// MessagesByKey returns up to max messages of topic whose KEYS hold key or
// whose UNIQ_KEY is key, stored within [begin, end] (unix ms), as the
// store's MessagesByKey does; but a lookup sees every message acknowledged
// before it began: when it finds nothing while the dispatcher has not yet
// indexed them, it waits for it (at most keyLookupCatchUp, or ctx) and
// looks again. Both front ends' queries by key answer through it.
func (b *Broker) MessagesByKey(ctx context.Context, topic, key string, begin, end int64, max int) ([]*message.Message, error) {
	var ms []*message.Message
	err := b.lookupDispatched(ctx, func() (err error) {
		ms, err = b.store.MessagesByKey(topic, key, begin, end, max)
		return err
	}, func() bool { return len(ms) > 0 })
	return ms, err
}

// MessagesByUniqKey returns the messages of every topic whose UNIQ_KEY is
// key (the client's message id), oldest first, at most MaxByUniqKey; it
// waits for the dispatcher as MessagesByKey does.
func (b *Broker) MessagesByUniqKey(ctx context.Context, key string) ([]*message.Message, error) {
	var out []*message.Message
	err := b.lookupDispatched(ctx, func() error {
		out = out[:0]
		for _, tc := range b.Topics() { // the key index is per topic: ask each
			ms, err := b.store.MessagesByKey(tc.TopicName, key, 0, math.MaxInt64, MaxByUniqKey)
			if err != nil {
				return err
			}
			for _, m := range ms {
				if m.UniqKey() == key {
					out = append(out, m)
				}
			}
		}
		return nil
	}, func() bool { return len(out) > 0 })
	slices.SortFunc(out, func(a, b *message.Message) int { return cmp.Compare(a.PhysicalOffset, b.PhysicalOffset) })
	return out[:min(len(out), MaxByUniqKey)], err
}

// lookupDispatched runs lookup; if it found nothing (found) while the
// dispatcher is behind the messages stored before it began, it waits for
// the dispatcher to pass them and runs lookup again.
func (b *Broker) lookupDispatched(ctx context.Context, lookup func() error, found func() bool) error {
	end := b.store.PutEnd()
	if err := lookup(); err != nil || found() || b.store.DispatchedOffset() >= end {
		return err
	}
	if b.store.WaitDispatched(ctx, end, keyLookupCatchUp) {
		return lookup()
	}
	return nil
}
