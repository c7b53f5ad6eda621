package broker

import (
	"context"
	"fmt"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// SendRecords is Send for messages the producer already encoded as records
// (message.AppendUnsealed: V1 layout, a UNIQ_KEY, a __CRC32# tail the log
// seals), each chunk holding one or more records back to back. The checks
// are Send's, made on the records in place; queue id -1 is replaced by the
// broker's pick. The chunks are checked and stamped in place and copied
// straight into the log, so the caller may reuse them once SendRecords
// returns.
func (b *Broker) SendRecords(ctx context.Context, topic string, chunks [][]byte) ([]store.PutResult, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	tc, err := b.sendTopic(topic)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range chunks {
		for off := 0; off < len(c); n++ {
			rec, err := b.checkRecord(tc, c[off:])
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", n, err)
			}
			off += len(rec)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidMessage)
	}
	res, err := b.store.PutRecords(ctx, topic, chunks, n)
	if len(res) > 0 {
		b.msgsPut.Add(int64(len(res)))
	}
	if err != nil {
		return res, putError(topic, res, err)
	}
	return res, nil
}

// checkRecord checks the record at the front of b as checkMessage checks a
// message, picks its queue if asked, and returns the record's bytes.
func (b *Broker) checkRecord(tc metadata.TopicConfig, buf []byte) ([]byte, error) {
	v, err := message.NewView(buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	rec := v.Bytes()
	props := v.PropertiesLen() - message.CRCTailSize
	uniq, _ := v.Property(message.PropUniqKey)
	switch {
	case string(v.Topic()) != tc.TopicName:
		return nil, fmt.Errorf("%w: record is for topic %q, the send is for %q", ErrInvalidMessage, v.Topic(), tc.TopicName)
	case !v.HasCRC():
		return nil, fmt.Errorf("%w: record has no __CRC32# tail (encode it with message.AppendUnsealed)", ErrInvalidMessage)
	case len(uniq) == 0:
		return nil, fmt.Errorf("%w: record has no UNIQ_KEY", ErrInvalidMessage)
	case props > b.cfg.MaxPropertiesSize:
		return nil, fmt.Errorf("%w: properties are %d bytes encoded, at most %d", ErrInvalidMessage, props, b.cfg.MaxPropertiesSize)
	}
	if err := b.checkBodyAndQueue(tc, len(v.Body()), v.QueueID()); err != nil {
		return nil, err
	}
	if v.QueueID() == BrokerPicksQueue {
		message.SetQueueID(rec, b.nextQueue(tc))
	}
	return rec, nil
}
