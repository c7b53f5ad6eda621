package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gantrymq/gantry/message"
)

// Batch is records to store as one unit, checked where they entered the
// broker, with what the check learned of each: PutBatch does not read
// them again beyond their framing.
type Batch struct {
	// Pieces hold the records back to back, each piece whole records as
	// message.AppendUnsealed writes them (V1, a UNIQ_KEY, a __CRC32# tail
	// the log seals). PutBatch writes the store host into them in place.
	Pieces [][]byte
	// Records[i] is what record i holds.
	Records []RecordInfo

	enc *encoded // Encode's pooled buffers, returned by Release
}

// RecordInfo is what the entry check learned of one record.
type RecordInfo struct {
	// Topic and QueueID name the consume queue the record goes to.
	Topic   string
	QueueID int32
	// UniqKey is the record's UNIQ_KEY; a view of the record is fine:
	// PutBatch copies it.
	UniqKey []byte
}

// Release hands back the buffers of a Batch made by Encode once it is
// stored (or given up); it does nothing for a Batch made otherwise. The
// Batch must not be used after.
func (b *Batch) Release() {
	if b.enc != nil {
		b.enc.release()
		b.enc = nil
	}
}

// encoded holds Encode's buffers.
type encoded struct {
	buf    []byte
	pieces [1][]byte
	recs   []RecordInfo
}

// encodedPool recycles Encode's buffers; larger ones are dropped.
var encodedPool = sync.Pool{New: func() any { return &encoded{buf: make([]byte, 0, 64<<10)} }}

const maxPooledBatch = 4 << 20

func (e *encoded) release() {
	if cap(e.buf) > maxPooledBatch {
		return
	}
	clear(e.recs) // drop the topics
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
	buf, recs := e.buf[:0], e.recs[:0]
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
			e.buf, e.recs = buf, recs
			e.release()
			return Batch{}, fmt.Errorf("store: message %d: %w", i, err)
		}
		// The key's bytes are only read (PutBatch copies them).
		recs = append(recs, RecordInfo{Topic: m.Topic, QueueID: m.QueueID, UniqKey: unsafe.Slice(unsafe.StringData(uniq), len(uniq))})
	}
	e.buf, e.recs = buf, recs
	e.pieces[0] = buf
	return Batch{Pieces: e.pieces[:], Records: recs, enc: e}, nil
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
// of its (Topic, QueueID), in order, the store host and the log's stamps;
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
	size := 0
	for _, r := range recs {
		size += len(r.UniqKey)
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
			at := len(text)
			text = append(text, recs[i].UniqKey...)
			results[i] = PutResult{QueueID: recs[i].QueueID, UniqKey: unsafe.String(&text[at], len(text)-at)} // no reallocation: sized above
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
			k := QueueKey{Topic: recs[i].Topic, QueueID: results[i].QueueID}
			qo = s.next[k]
			s.next[k] = qo + 1
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
