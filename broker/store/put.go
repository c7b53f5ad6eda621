package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/gantrymq/gantry/message"
)

// Batch is records to store as one unit, checked where they entered the
// broker, with what the check learned of each: PutBatch does not read
// them again beyond their framing.
type Batch struct {
	// Topic is the topic of every record (a Batch from Encode may mix
	// topics: it knows each record's).
	Topic string
	// Pieces hold the records back to back, each piece whole records as
	// message.AppendUnsealed writes them (V1, a UNIQ_KEY, a __CRC32# tail
	// the log seals). PutBatch writes the store host into them in place.
	Pieces [][]byte
	// Records[i] is what record i holds.
	Records []RecordInfo

	topics []string // Encode's: each record's topic, when they differ
	enc    *encoded // Encode's pooled buffers, returned by Release
}

// RecordInfo is what the entry check learned of one record (kept small:
// a send of one record holds it on the stack).
type RecordInfo struct {
	// QueueID is the record's queue of the Batch's topic.
	QueueID int32
	// UniqKey is the record's UNIQ_KEY; a view of the record is fine:
	// PutBatch copies it.
	UniqKey []byte
}

// topic returns the topic of record i.
func (b Batch) topic(i int) string {
	if b.topics != nil {
		return b.topics[i]
	}
	return b.Topic
}

// Keep returns the records i of b for which stored(i) is true, in order
// (the others are duplicates of stored ones). Its pieces are views of b's.
func (b Batch) Keep(stored func(i int) bool) Batch {
	out := Batch{Topic: b.Topic, Records: make([]RecordInfo, 0, len(b.Records))}
	if b.topics != nil {
		out.topics = make([]string, 0, len(b.Records))
	}
	i := 0
	for _, piece := range b.Pieces {
		from := -1 // start of the run of kept records, if any
		for off := 0; off < len(piece) && i < len(b.Records); i++ {
			size, _, _ := message.RecordSize(piece[off:])
			if size <= 0 {
				break // PutBatch refuses the framing
			}
			keep := stored(i)
			switch {
			case keep && from < 0:
				from = off
			case !keep && from >= 0:
				out.Pieces = append(out.Pieces, piece[from:off])
				from = -1
			}
			if keep {
				out.Records = append(out.Records, b.Records[i])
				if b.topics != nil {
					out.topics = append(out.topics, b.topics[i])
				}
			}
			off += int(size)
		}
		if from >= 0 {
			out.Pieces = append(out.Pieces, piece[from:])
		}
	}
	return out
}

// Release hands back the buffers of a Batch made by Encode once it is
// stored (or given up); it does nothing for a Batch made otherwise. Keep
// the Batch from Encode apart from one that holds the caller's records:
// what Release takes leaks to the pool as far as the compiler can tell.
func (b Batch) Release() {
	if b.enc != nil {
		b.enc.release()
	}
}

// encoded holds Encode's buffers.
type encoded struct {
	buf    []byte
	pieces [1][]byte
	recs   []RecordInfo
	topics []string
}

// encodedPool recycles Encode's buffers; larger ones are dropped.
var encodedPool = sync.Pool{New: func() any { return &encoded{buf: make([]byte, 0, 64<<10)} }}

const maxPooledBatch = 4 << 20

func (e *encoded) release() {
	if cap(e.buf) > maxPooledBatch {
		return
	}
	clear(e.recs) // drop the keys' strings
	clear(e.topics)
	e.pieces[0] = nil
	encodedPool.Put(e)
}

// Encode encodes msgs, message structs, into a Batch of records with this
// store's host, once: a message without UNIQ_KEY gets one. The messages are
// not modified. Release the Batch once it is stored.
func (s *Store) Encode(msgs []*message.Message) (Batch, error) {
	if len(msgs) == 0 {
		return Batch{}, errors.New("store: put of no messages")
	}
	e := encodedPool.Get().(*encoded)
	buf, recs, topics := e.buf[:0], e.recs[:0], e.topics[:0]
	mixed := false
	for i, m := range msgs {
		mm := *m
		mm.StoreHost = s.cfg.StoreHost
		uniq := mm.UniqKey()
		var gen string
		if uniq == "" {
			uniq = message.NewUniqID()
			gen = uniq
		}
		var err error
		if buf, err = message.AppendUnsealed(buf, &mm, gen); err != nil { // the log seals it after stamping
			e.buf, e.recs, e.topics = buf, recs, topics
			e.release()
			return Batch{}, fmt.Errorf("store: message %d: %w", i, err)
		}
		// The key's bytes are a string's: PutBatch reads them only.
		recs = append(recs, RecordInfo{QueueID: m.QueueID, UniqKey: unsafe.Slice(unsafe.StringData(uniq), len(uniq))})
		topics = append(topics, m.Topic)
		mixed = mixed || m.Topic != msgs[0].Topic
	}
	e.buf, e.recs, e.topics = buf, recs, topics
	e.pieces[0] = buf
	b := Batch{Topic: msgs[0].Topic, Pieces: e.pieces[:], Records: recs, enc: e}
	if mixed {
		b.topics = topics
	}
	return b, nil
}

// PutResult says where a message was stored.
type PutResult struct {
	MsgID          string // offset message id (store host + physical offset)
	UniqKey        string
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	StoreTimestamp int64
}

// PutBatch stores b as one unit: each record gets the next queue offset
// of its (topic, QueueID), in order, the store host and the log's stamps;
// the log seals each __CRC32# tail. Under SyncFlush it returns once they
// are durable. The records are what the caller's check found
// (b.Records); the log still checks each one's framing and tail before
// it copies any, and PutBatch that there are as many as b.Records says.
// b's pieces are modified in place; the caller may reuse them once
// PutBatch returns.
//
// On commitlog.ErrFlushTimeout the results are filled in: the records are
// stored but not known durable. While the dispatcher is stalled (see
// MaxDispatchStall, MaxDispatchLagBytes) it stores nothing and fails with
// ErrDispatchStalled.
func (s *Store) PutBatch(ctx context.Context, b Batch) ([]PutResult, error) {
	recs := b.Records
	n := len(recs)
	if n == 0 {
		return nil, errors.New("store: put of no records")
	}
	if err := s.Refusal(); err != nil {
		return nil, err
	}
	results := make([]PutResult, n)
	// Encode's keys are strings' bytes, which results may hold as they
	// are; keys read from the caller's records are copied.
	size := 0
	if b.enc == nil {
		for _, r := range recs {
			size += len(r.UniqKey)
		}
	}
	// The UNIQ_KEYs back to back, then the message ids (stampResults):
	// the results' strings are views of it.
	text := make([]byte, 0, size+n*offsetMsgIDLen)
	i := 0
	for _, piece := range b.Pieces {
		for off := 0; off < len(piece); i++ {
			size, _, ok := message.RecordSize(piece[off:])
			switch {
			case !ok || size < message.MinRecordSize || int(size) > len(piece)-off:
				return nil, fmt.Errorf("store: record %d: size %d does not fit the %d bytes left", i, size, len(piece)-off)
			case i >= n:
				return nil, fmt.Errorf("store: more records in the batch than the %d announced", n)
			}
			rec := piece[off : off+int(size)]
			if !message.SetStoreHost(rec, s.cfg.StoreHost) {
				return nil, fmt.Errorf("store: record %d: store host %s does not fit its STOREHOST field", i, s.cfg.StoreHost)
			}
			if len(recs[i].UniqKey) == 0 {
				return nil, fmt.Errorf("store: record %d has no UNIQ_KEY", i)
			}
			key := recs[i].UniqKey
			if b.enc == nil {
				at := len(text)
				text = append(text, key...) // no reallocation: sized above
				key = text[at:]
			}
			results[i] = PutResult{QueueID: recs[i].QueueID, UniqKey: unsafe.String(&key[0], len(key))}
			off += int(size)
		}
	}
	if i != n {
		return nil, fmt.Errorf("store: %d records in the batch, %d announced", i, n)
	}
	i = 0
	res, err := s.cl.AppendV(ctx, b.Pieces, func(rec []byte, off int64) {
		var qo int64 // prepared and rolled-back transactional messages have no queue entry: offset 0, as in RocketMQ
		if tx := message.SysFlagOf(rec) & message.TransactionMask; tx != message.TransactionPrepared && tx != message.TransactionRollback {
			qo = s.nextOffset(b.topic(i), results[i].QueueID)
		}
		message.SetQueueOffset(rec, qo)
		results[i].QueueOffset, results[i].PhysicalOffset = qo, off
		i++
	})
	if i == 0 { // nothing was stored
		return nil, err
	}
	s.notePut(res.End)
	s.stampResults(results, res.StoreTimestamp, text)
	return results, err
}

// nextOffset returns the next queue offset of (topic, queueID) and counts
// it taken; the append lock is held. A new queue's key holds a copy of
// topic: the batch's topic is not kept, so that its records need not
// escape to the heap.
func (s *Store) nextOffset(topic string, queueID int32) int64 {
	p := s.next[QueueKey{Topic: topic, QueueID: queueID}]
	if p == nil {
		p = new(int64)
		s.next[QueueKey{Topic: strings.Clone(topic), QueueID: queueID}] = p
	}
	qo := *p
	*p = qo + 1
	return qo
}

// nextOf returns the next queue offset of k; setNext sets it. For Open,
// before any PutBatch.
func (s *Store) nextOf(k QueueKey) int64 {
	if p := s.next[k]; p != nil {
		return *p
	}
	return 0
}

func (s *Store) setNext(k QueueKey, off int64) {
	if p := s.next[k]; p != nil {
		*p = off
		return
	}
	s.next[k] = &off
}

// offsetMsgIDLen is the length of an offset message id with an IPv4 store
// host, in hex digits.
const offsetMsgIDLen = 32

// notePut raises PutEnd to end, the log offset past a PutBatch's records.
func (s *Store) notePut(end int64) {
	for {
		cur := s.putEnd.Load()
		if end <= cur || s.putEnd.CompareAndSwap(cur, end) {
			return
		}
	}
}

// PutEnd returns the log offset past the last record a PutBatch of this
// process stored (0 before the first): once DispatchedOffset reaches it,
// every message stored so far is in its consume queue and the key index.
// Unlike the log's MaxOffset it never counts a filler, which the
// dispatcher passes only when a record follows.
func (s *Store) PutEnd() int64 { return s.putEnd.Load() }

// stampResults sets the store time and the message id of every result,
// appending the ids to text: views of a buffer nothing writes again
// (append moves on to a new one when it grows, with an IPv6 store host).
func (s *Store) stampResults(results []PutResult, ts int64, text []byte) {
	for j := range results {
		at := len(text)
		text = message.AppendOffsetMsgID(text, s.cfg.StoreHost, results[j].PhysicalOffset)
		results[j].StoreTimestamp = ts
		results[j].MsgID = unsafe.String(&text[at], len(text)-at)
	}
}
