package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/broker/dedup"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// BrokerPicksQueue as a message's QueueID asks Send to pick the queue:
// round robin over the topic's write queues, message by message.
const BrokerPicksQueue = -1

// Send stores msgs, every one for topic, as one unit, and returns where each
// went. Under SYNC_FLUSH it returns once they are durable. The messages are
// not modified.
//
// A message with a DELAY level or a TIMER_DELIVER_MS / TIMER_DELAY_SEC in
// the future is parked (ScheduleTopic, TimerTopic) and delivered to its
// topic when due; its result is the parked record's. See the package doc.
//
// A Send is validated whole before anything is written: an invalid topic
// name (ErrInvalidTopic), a reserved topic (ErrReservedTopic), an unknown
// topic when autoCreateTopicEnable is off (ErrTopicNotFound), a topic
// without write permission (ErrNoPermission), and an empty or oversized
// body, oversized properties, messages whose records total more than
// message.BatchLimit(maxMessageSize), a message for another topic, a queue id out
// of range, an unparsable DELAY or timer property or a delivery time beyond
// timerMaxDelay (ErrInvalidMessage) store nothing. An error for which
// IsIndeterminate is true comes with the results filled in: the messages
// are in the log but not known durable.
//
// With DuplicationWindow on, a message whose key (its IDEMPOTENCY_KEY, else
// its UNIQ_KEY; a message without either never is) was stored for topic
// within the window is not stored again: its result is the original's,
// marked Duplicate. The other messages of the Send are stored as one unit,
// in order. A Send whose key another Send still in flight holds waits for
// that one's outcome (until ctx ends). Sends to a group's retry and
// dead-letter topics are never de-duplicated. See docs/BROKER.md.
func (b *Broker) Send(ctx context.Context, topic string, msgs []*message.Message) ([]SendResult, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return nil, err
	}
	tc, err := b.sendTopic(topic)
	if err != nil {
		return nil, err
	}
	prepared, err := b.prepare(tc, msgs)
	if err != nil {
		return nil, err
	}
	// Encoded once, here: from now on the records take SendRecords' path.
	batch, err := b.store.Encode(prepared)
	if err != nil {
		return nil, putError(topic, nil, err)
	}
	defer batch.Release()
	adm, err := b.admitSend(topic, len(prepared), messagesQueueOf(topic, prepared)) // limits.go
	if err != nil {
		return nil, err
	}
	dedupOn := b.dedup != nil && dedupTopic(topic)
	var keys []string
	if dedupOn {
		keys = make([]string, len(msgs))
		for i, m := range msgs {
			keys[i] = dedup.MessageKey(m)
		}
	}
	res, err := storeSend(ctx, b, topic, batch, dedupOn, keys, 0, false)
	adm.done(res)
	return res, err
}

// sendTopic returns the topic a Send may write to, auto-creating it when
// enabled.
func (b *Broker) sendTopic(name string) (metadata.TopicConfig, error) {
	if err := checkTopicName(name); err != nil {
		return metadata.TopicConfig{}, err
	}
	if IsReservedTopic(name) {
		return metadata.TopicConfig{}, fmt.Errorf("%w: cannot send to %q", ErrReservedTopic, name)
	}
	tc, ok := b.meta.TopicShared(name)
	if !ok {
		if !b.cfg.AutoCreateTopicEnable {
			return tc, fmt.Errorf("%w: %q (autoCreateTopicEnable is off)", ErrTopicNotFound, name)
		}
		var err error
		if tc, err = b.ensureTopic(name, b.autoCreateQueues(name)); err != nil {
			return tc, err
		}
	}
	if tc.Perm&metadata.PermWrite == 0 {
		return tc, fmt.Errorf("%w: topic %q is not writable (perm %d)", ErrNoPermission, name, tc.Perm)
	}
	return tc, nil
}

// prepare checks every message and returns the batch to store: the same
// messages, copied where the broker picks the queue or parks the message
// (delivery.Service.Park).
func (b *Broker) prepare(tc metadata.TopicConfig, msgs []*message.Message) ([]*message.Message, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidMessage)
	}
	now := b.cfg.Now()
	batch := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		mm, err := b.prepareOne(tc, m, now)
		if err != nil {
			if len(msgs) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		batch[i] = mm
	}
	if len(msgs) > 1 {
		size := 0
		for _, m := range msgs {
			n, _ := message.EncodedSize(m, true) // checked by prepareOne
			size += n
		}
		if err := b.checkSendSize(size); err != nil {
			return nil, err
		}
	}
	return batch, nil
}

// checkSendSize refuses a send whose records take size bytes when that
// is more than one send may carry: maxMessageSize plus one record's
// overhead (message.BatchLimit), as RocketMQ bounds a batch by
// maxMessageSize in total.
func (b *Broker) checkSendSize(size int) error {
	if limit := message.BatchLimit(b.cfg.MaxMessageSize); size > limit {
		return fmt.Errorf("%w: the send's messages take %d bytes as records, more than the %d one send may carry "+
			"(maxMessageSize %d plus %d for one record's fields, topic and properties): send them in smaller batches",
			ErrInvalidMessage, size, limit, b.cfg.MaxMessageSize, message.MaxRecordOverhead)
	}
	return nil
}

// prepareOne checks one message of a Send and returns what to store for it.
func (b *Broker) prepareOne(tc metadata.TopicConfig, m *message.Message, now time.Time) (*message.Message, error) {
	if err := b.checkMessage(tc, m); err != nil {
		return nil, err
	}
	if m.QueueID == BrokerPicksQueue {
		mm := *m
		mm.QueueID = b.nextQueue(tc)
		m = &mm
	}
	return b.park(m, now, false)
}

// checkMessage checks one message of a Send to tc.
func (b *Broker) checkMessage(tc metadata.TopicConfig, m *message.Message) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil message", ErrInvalidMessage)
	case m.Topic != tc.TopicName:
		return fmt.Errorf("%w: message is for topic %q, the send is for %q", ErrInvalidMessage, m.Topic, tc.TopicName)
	}
	if err := b.checkBodyAndQueue(tc, len(m.Body), m.QueueID); err != nil {
		return err
	}
	if v, ok := m.Properties.Get(PropTTL); ok {
		if err := checkTTL([]byte(v)); err != nil { // limits.go
			return err
		}
	}
	return b.checkProperties(m)
}

// checkBodyAndQueue checks a message's body size and queue id, whether it
// came as a message (Send) or as a record (SendRecords).
func (b *Broker) checkBodyAndQueue(tc metadata.TopicConfig, bodyLen int, queueID int32) error {
	switch {
	case bodyLen == 0:
		return fmt.Errorf("%w: body is empty", ErrInvalidMessage)
	case bodyLen > b.cfg.MaxMessageSize:
		return fmt.Errorf("%w: body is %d bytes, at most %d", ErrInvalidMessage, bodyLen, b.cfg.MaxMessageSize)
	case queueID != BrokerPicksQueue && (queueID < 0 || queueID >= tc.WriteQueueNums):
		return fmt.Errorf("%w: queue id %d: topic %q has write queues 0..%d (or -1: broker picks)",
			ErrInvalidMessage, queueID, tc.TopicName, tc.WriteQueueNums-1)
	}
	return nil
}

// checkProperties checks the encoded size of m's properties against
// maxPropertiesSize and the record format (which also carries the UNIQ_KEY
// the store may add and the CRC tail), and that they can be encoded.
func (b *Broker) checkProperties(m *message.Message) error {
	n, err := propertiesSize(m.Properties)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if n > b.cfg.MaxPropertiesSize {
		return fmt.Errorf("%w: properties are %d bytes encoded, at most %d", ErrInvalidMessage, n, b.cfg.MaxPropertiesSize)
	}
	limit := message.MaxPropertiesLen - message.CRCTailSize
	if m.UniqKey() == "" {
		limit -= len(message.PropUniqKey) + generatedUniqKeyLen + 2
	}
	if n > limit {
		return fmt.Errorf("%w: properties are %d bytes encoded, the record format leaves room for %d", ErrInvalidMessage, n, limit)
	}
	return nil
}

// generatedUniqKeyLen is the length of a UNIQ_KEY the store generates.
const generatedUniqKeyLen = 32

// propertiesSize is the encoded size of p as stored (key 0x01 value 0x02
// per pair; a __CRC32# pair is dropped by the encoder).
func propertiesSize(p message.Properties) (int, error) {
	n := 0
	for _, kv := range p {
		if kv.Key == message.PropCRC {
			continue
		}
		if kv.Key == "" {
			return 0, errors.New("property with an empty key")
		}
		if hasSeparator(kv.Key) || hasSeparator(kv.Value) {
			return 0, fmt.Errorf("property %q contains byte 0x01 or 0x02", kv.Key)
		}
		n += len(kv.Key) + len(kv.Value) + 2
	}
	return n, nil
}

func hasSeparator(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 1 || s[i] == 2 {
			return true
		}
	}
	return false
}

// putError classifies an error of store.Encode or store.PutBatch: stored
// records (res not empty) make it indeterminate; a record the log cannot
// hold is invalid input; anything else is passed on (disk full, flush
// failed, closed).
func putError(topic string, res []store.PutResult, err error) error {
	switch {
	case len(res) > 0:
		return fmt.Errorf("broker: send to %q: %w: %w", topic, ErrIndeterminate, err)
	case errors.Is(err, commitlog.ErrRecordTooLarge), errors.Is(err, commitlog.ErrInvalidBatch),
		errors.Is(err, message.ErrPropertiesTooLarge), errors.Is(err, message.ErrInvalidProperty),
		errors.Is(err, message.ErrRecordTooLarge):
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	case errors.Is(err, commitlog.ErrClosed):
		return fmt.Errorf("%w: %w", ErrShuttingDown, err)
	}
	return fmt.Errorf("broker: send to %q: %w", topic, err)
}
