package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// The broker's own messages (send-backs, resent dead letters, delivered
// parked messages) and the parking of delayed sends: the part of the send
// path that broker/delivery calls back into (deliveryHost) and that Send
// and SendRecords share with it.

// park returns what to store for m, whose queue is picked: m, or its
// parked form when it is delayed (delivery.Service.Park). When owned, m
// is the caller's to change and is parked in place.
func (b *Broker) park(m *message.Message, now time.Time, owned bool) (*message.Message, error) {
	return b.delivery.Park(m, now, owned)
}

// putInternal stores messages the broker itself generates (a consumer's
// send-back to %RETRY%<group> or %DLQ%<group>) as one unit, parking those
// with DELAY or timer properties like Send does. Unlike Send it accepts
// any existing topic, reserved ones included, and messages of several
// topics; a group's retry or dead-letter topic is created on first use
// (one queue, read and write); topic permissions are not checked. The
// parking topics themselves are refused (ErrReservedTopic). Queue id -1
// asks the broker to pick. The body, queue id and properties are checked
// as Send checks them (ErrInvalidMessage); the messages are not modified.
//
// putInternal does not pass the call gate: call it from a method that
// did (Close closes the store only after those return).
func (b *Broker) putInternal(ctx context.Context, msgs []*message.Message) ([]store.PutResult, error) {
	return b.putInternalMode(ctx, msgs, false)
}

func (b *Broker) putInternalMode(ctx context.Context, msgs []*message.Message, owned bool) ([]store.PutResult, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidMessage)
	}
	now := b.cfg.Now()
	batch := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		mm, err := b.prepareInternal(m, now, owned)
		if err != nil {
			if len(msgs) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		batch[i] = mm
	}
	return b.put(ctx, batch[0].Topic, batch)
}

// prepareInternal checks one message of putInternal and returns what to
// store for it.
func (b *Broker) prepareInternal(m *message.Message, now time.Time, owned bool) (*message.Message, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", ErrInvalidMessage)
	}
	tc, err := b.internalTopic(m.Topic)
	if err != nil {
		return nil, err
	}
	if err := b.checkBodyAndQueue(tc, len(m.Body), m.QueueID); err != nil {
		return nil, err
	}
	if err := b.checkProperties(m); err != nil {
		return nil, err
	}
	if m.QueueID == BrokerPicksQueue {
		if owned {
			m.QueueID = b.nextQueue(tc)
		} else {
			mm := *m
			mm.QueueID = b.nextQueue(tc)
			m = &mm
		}
	}
	return b.park(m, now, owned)
}

// put encodes prepared messages once and stores them on the one put path
// (putBatch); topic names the send in errors.
func (b *Broker) put(ctx context.Context, topic string, msgs []*message.Message) ([]store.PutResult, error) {
	batch, err := b.store.Encode(msgs)
	if err != nil {
		return nil, putError(topic, nil, err)
	}
	defer batch.Release()
	return b.putBatch(ctx, topic, batch)
}

// decodeDelayed is SendRecords' path for records of which some are
// delayed: it decodes the checked records (queues already picked) and
// returns them as messages to store, parked where they ask to be.
func (b *Broker) decodeDelayed(chunks [][]byte, n int) ([]*message.Message, error) {
	now := b.cfg.Now()
	batch := make([]*message.Message, 0, n)
	for _, c := range chunks {
		msgs, err := message.DecodeAll(c)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
		}
		for _, m := range msgs {
			mm, err := b.park(m, now, true) // decoded here: ours
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", len(batch), err)
			}
			batch = append(batch, mm)
		}
	}
	if len(batch) != n {
		return nil, errors.New("broker: records changed while being sent") // a broken invariant: the caller reused the chunks
	}
	return batch, nil
}
