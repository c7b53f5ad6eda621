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
// returns. If a record is delayed (a DELAY other than 0, a timer
// property), the records are decoded and stored as Send stores messages,
// parked where they ask to be.
func (b *Broker) SendRecords(ctx context.Context, topic string, chunks [][]byte) ([]store.PutResult, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	tc, err := b.sendTopic(topic)
	if err != nil {
		return nil, err
	}
	n, delayed := 0, false
	for _, c := range chunks {
		for off := 0; off < len(c); n++ {
			rec, d, err := b.checkRecord(tc, c[off:])
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", n, err)
			}
			delayed = delayed || d
			off += len(rec)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidMessage)
	}
	if delayed {
		return b.sendDecoded(ctx, topic, chunks, n)
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
// message, picks its queue if asked, and returns the record's bytes and
// whether it may need parking (a DELAY other than 0, a timer property).
func (b *Broker) checkRecord(tc metadata.TopicConfig, buf []byte) (rec []byte, delayed bool, err error) {
	v, err := message.NewView(buf)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	rec = v.Bytes()
	props := v.PropertiesLen() - message.CRCTailSize
	var uniq []byte
	var d delayProps
	for k, val := range v.All() { // one pass; the last of a repeated key wins
		switch string(k) {
		case message.PropUniqKey:
			uniq = val
		case message.PropDelay, message.PropTimerDeliverMS, message.PropTimerDelaySec:
			d.see(string(k), val)
		}
	}
	if err := b.checkRecordFields(tc, v, uniq, props); err != nil {
		return nil, false, err
	}
	if v.QueueID() == BrokerPicksQueue {
		message.SetQueueID(rec, b.nextQueue(tc))
	}
	return rec, d.delayed(), nil
}

// checkRecordFields makes checkRecord's checks of one record.
func (b *Broker) checkRecordFields(tc metadata.TopicConfig, v message.View, uniq []byte, props int) error {
	switch {
	case string(v.Topic()) != tc.TopicName:
		return fmt.Errorf("%w: record is for topic %q, the send is for %q", ErrInvalidMessage, v.Topic(), tc.TopicName)
	case !v.HasCRC():
		return fmt.Errorf("%w: record has no __CRC32# tail (encode it with message.AppendUnsealed)", ErrInvalidMessage)
	case len(uniq) == 0:
		return fmt.Errorf("%w: record has no UNIQ_KEY", ErrInvalidMessage)
	case props > b.cfg.MaxPropertiesSize:
		return fmt.Errorf("%w: properties are %d bytes encoded, at most %d", ErrInvalidMessage, props, b.cfg.MaxPropertiesSize)
	}
	return b.checkBodyAndQueue(tc, len(v.Body()), v.QueueID())
}
