package broker

import (
	"context"
	"fmt"

	"github.com/gantrymq/gantry/broker/delivery"
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
// parked where they ask to be. Duplicates are answered as Send answers
// them; the other records go to the log as they came, in order.
func (b *Broker) SendRecords(ctx context.Context, topic string, chunks [][]byte) ([]SendResult, error) {
	return b.SendAttempt(ctx, topic, 0, chunks)
}

// SendAttempt is SendRecords for the attempt-th attempt of a send of
// Gantry's producer (SendRequest.attempt; 0: the sender does not say).
// A first attempt promises that no earlier request can have stored its
// records (their UNIQ_KEYs were made for it): those keyed by UNIQ_KEY are
// then checked only against retries, which wait for the first attempts in
// flight (docs/BROKER.md, "De-duplication of sends").
func (b *Broker) SendAttempt(ctx context.Context, topic string, attempt uint32, chunks [][]byte) ([]SendResult, error) {
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
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	if err := b.checkSendSize(size); err != nil {
		return nil, err
	}
	dedupOn := b.dedup != nil && dedupTopic(topic)
	var keys [][]byte // per record, when de-duplicating
	var recs []store.RecordInfo
	n, delayed, uniqKeyed := 0, false, true
	for _, c := range chunks {
		for off := 0; off < len(c); n++ {
			rec, d, info, key, err := b.checkRecord(tc, c[off:])
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", n, err)
			}
			delayed = delayed || d
			if dedupOn {
				keys = append(keys, key)
				uniqKeyed = uniqKeyed && string(key) == string(info.UniqKey)
			}
			recs = append(recs, info)
			off += len(rec)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidMessage)
	}
	batch := store.Batch{Topic: topic, Pieces: chunks, Records: recs}
	queueOf := func(i int) (int32, bool) { return recs[i].QueueID, true }
	if delayed {
		msgs, err := b.decodeDelayed(chunks, n)
		if err != nil {
			return nil, err
		}
		// Parked records change topic and properties: encoded again.
		enc, err := b.store.Encode(msgs)
		if err != nil {
			return nil, putError(topic, nil, err)
		}
		defer enc.Release()
		batch = enc
		queueOf = messagesQueueOf(topic, msgs)
	}
	adm, err := b.admitSend(topic, n, queueOf) // limits.go
	if err != nil {
		return nil, err
	}
	res, err := storeSend(ctx, b, topic, batch, dedupOn, keys, attempt, uniqKeyed)
	adm.done(res)
	return res, err
}

// putBatch stores a checked batch and counts it; topic names the send in
// errors. Every send, of records or of messages, ends here.
// A slave refuses it (nothing else may append to its log); a SYNC_MASTER
// refuses it before the append when too few slaves are in sync, and after
// the append waits for them (replicas.go).
func (b *Broker) putBatch(ctx context.Context, topic string, batch store.Batch) ([]store.PutResult, error) {
	if err := b.writable(); err != nil {
		return nil, err
	}
	need := b.slavesNeeded()
	var rep Replication
	if need > 0 {
		var err error
		if rep, err = b.checkInSync(need); err != nil {
			return nil, err
		}
	}
	res, err := b.store.PutBatch(ctx, batch)
	if len(res) > 0 {
		b.msgsPut.Add(int64(len(res)))
	}
	if err != nil {
		return res, putError(topic, res, err)
	}
	if need > 0 && len(res) > 0 {
		if err := b.waitReplicas(ctx, rep, topic, res, need); err != nil {
			return res, err
		}
	}
	if !b.leased() { // stored, but another master may have been elected meanwhile
		return res, fmt.Errorf("broker: send to %q: %w: the master lease expired before the send was acknowledged", topic, ErrReplicaTimeout)
	}
	return res, nil
}

// checkRecord checks the record at the front of b as checkMessage checks a
// message, picks its queue if asked, and returns the record's bytes,
// whether it may need parking (a DELAY other than 0, a timer property),
// its queue and UNIQ_KEY for the store, and its de-duplication key (its
// IDEMPOTENCY_KEY, else its UNIQ_KEY); keys are views of the record.
func (b *Broker) checkRecord(tc metadata.TopicConfig, buf []byte) (rec []byte, delayed bool, info store.RecordInfo, key []byte, err error) {
	v, err := message.NewView(buf)
	if err != nil {
		return nil, false, info, nil, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	rec = v.Bytes()
	props := v.PropertiesLen() - message.CRCTailSize
	var uniq, idem, ttl []byte
	var d delivery.DelayProps
	for k, val := range v.All() { // one pass; the last of a repeated key wins
		switch string(k) {
		case message.PropUniqKey:
			uniq = val
		case message.PropIdempotencyKey:
			idem = val
		case message.PropDelay, message.PropTimerDeliverMS, message.PropTimerDelaySec:
			d.See(string(k), val)
		case PropTTL:
			ttl = val
		}
	}
	if err := b.checkRecordFields(tc, v, uniq, props); err != nil {
		return nil, false, info, nil, err
	}
	if ttl != nil {
		if err := checkTTL(ttl); err != nil { // limits.go
			return nil, false, info, nil, err
		}
	}
	info = store.RecordInfo{QueueID: v.QueueID(), UniqKey: uniq}
	if info.QueueID == BrokerPicksQueue {
		info.QueueID = b.nextQueue(tc)
		message.SetQueueID(rec, info.QueueID)
	}
	if len(idem) == 0 {
		idem = uniq
	}
	return rec, d.Delayed(), info, idem, nil
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
