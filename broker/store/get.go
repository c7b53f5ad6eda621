package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/message"
)

// GetStatus says what a Get found (RocketMQ's GetMessageStatus).
type GetStatus int

const (
	Found               GetStatus = iota // messages returned
	NoMatchedMessage                     // in range, but the filter matched nothing scanned
	NoMessageInQueue                     // the queue is empty or unknown
	OffsetTooSmall                       // offset < MinOffset
	OffsetOverflowOne                    // offset == MaxOffset: nothing new (long-poll here)
	OffsetOverflowBadly                  // offset > MaxOffset
	OffsetFoundNull                      // the entry's log data is gone
)

var statusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL",
	"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL"}

func (s GetStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("GetStatus(%d)", int(s))
}

// GetResult is what Get returns. Records are views of the commit log's
// mapping: call Release when done with them.
type GetResult struct {
	Status     GetStatus
	Records    []commitlog.Region // raw records, in queue order
	NextOffset int64              // queue offset to read from next
	MinOffset  int64
	MaxOffset  int64
}

// Release releases the records.
func (r *GetResult) Release() {
	for _, rec := range r.Records {
		rec.Release()
	}
	r.Records = nil
}

// Filter decides from a consume-queue tags code whether a message may match.
// Nil matches everything. Tags hashing to the same code must still be told
// apart by the caller on the decoded message.
type Filter func(tagsCode int64) bool

// Get reads up to maxMsgs records (and about maxBytes) of a queue from
// offset, keeping those the filter accepts. Safe for concurrent use.
//
// Every entry read is cross-checked against the record it points at; an
// entry that disagrees with the log makes the store rebuild that queue
// from the log (the damaged files are kept under Root/corrupt) before it
// answers.
func (s *Store) Get(topic string, queueID int32, offset int64, maxMsgs, maxBytes int, filter Filter) (GetResult, error) {
	k := QueueKey{Topic: topic, QueueID: queueID}
	for attempt := 0; ; attempt++ {
		q, err := s.queue(k, false)
		if err != nil {
			return GetResult{}, err
		}
		res, problem, err := s.get(k, q, offset, maxMsgs, maxBytes, filter)
		if errors.Is(err, consumequeue.ErrClosed) && attempt < 3 { // swapped by a repair meanwhile
			continue
		}
		if problem == "" || err != nil {
			return res, err
		}
		if attempt > 0 {
			return GetResult{}, fmt.Errorf("%w: %s offset %d after rebuilding the queue: %s", errDamaged, k, offset, problem)
		}
		if err := s.repairQueue(context.Background(), k, q, problem); err != nil {
			return GetResult{}, err
		}
	}
}

// coming reports whether offset of queue k is up to the queue's end in
// the log at an Open that could not dispatch the log (RecoveredQueueEnd):
// not beyond the queue, as its messages are coming (nothing new yet), and
// a consumer must not move back.
func (s *Store) coming(k QueueKey, offset int64) bool {
	return offset > 0 && offset <= s.recoveredEnds[k]
}

func (s *Store) get(k QueueKey, q *cqueue, offset int64, maxMsgs, maxBytes int, filter Filter) (res GetResult, problem string, err error) {
	if q == nil {
		res.Status, res.NextOffset = NoMessageInQueue, offset
		switch {
		case s.coming(k, offset):
			res.Status = OffsetOverflowOne
		case offset != 0:
			res.Status, res.NextOffset = OffsetOverflowBadly, 0
		}
		return res, "", nil
	}
	res = GetResult{MinOffset: q.MinOffset(), MaxOffset: q.MaxOffset(), NextOffset: offset}
	switch {
	case offset > res.MaxOffset && s.coming(k, offset):
		res.Status = OffsetOverflowOne
		return res, "", nil
	case res.MaxOffset == 0:
		res.Status, res.NextOffset = NoMessageInQueue, 0
		if offset != 0 {
			res.Status = OffsetOverflowBadly
		}
		return res, "", nil
	case offset < res.MinOffset:
		res.Status, res.NextOffset = OffsetTooSmall, res.MinOffset
		return res, "", nil
	case offset == res.MaxOffset:
		res.Status = OffsetOverflowOne
		return res, "", nil
	case offset > res.MaxOffset:
		res.Status, res.NextOffset = OffsetOverflowBadly, res.MaxOffset
		return res, "", nil
	}
	maxMsgs = max(maxMsgs, 1)
	// The entry before offset too, so an entry pointing below its
	// predecessor is caught even at the front of the batch.
	from := offset
	if from > q.Queue.MinOffset() {
		from--
	}
	buf := entryPool.Get().(*[]consumequeue.Entry)
	defer entryPool.Put(buf)
	entries, err := q.Read(from, max(maxMsgs, 32)+int(offset-from), (*buf)[:0])
	if err != nil {
		return res, "", err
	}
	*buf = entries[:0]
	prevEnd := int64(-1)
	if from < offset {
		prevEnd = entries[0].End()
		entries = entries[1:]
	}
	bytes := 0
	res.Status = NoMatchedMessage
	cbuf := checkPool.Get().(*[]entryAt)
	defer checkPool.Put(cbuf)
	checks := (*cbuf)[:0] // each record's entry and queue offset
	for i, e := range entries {
		if len(checks) >= maxMsgs || (bytes > 0 && bytes+int(e.Size) > maxBytes) {
			break
		}
		qo := offset + int64(i)
		if e.Offset < prevEnd || e.Size <= 0 {
			return res, fmt.Sprintf("offset %d: entry (log offset %d, size %d) is not past the previous entry's end %d", qo, e.Offset, e.Size, prevEnd), nil
		}
		prevEnd = e.End()
		res.NextOffset++
		if s.cl.InHole(e.Offset) { // lost in a damaged range skipped at recovery
			continue
		}
		if filter != nil && !filter(e.TagsCode) {
			continue
		}
		checks = append(checks, entryAt{e, qo})
		bytes += int(e.Size)
	}
	if len(checks) == 0 {
		return res, "", nil
	}
	res.Records = make([]commitlog.Region, 0, len(checks))
	if !s.readCopied(&res, checks) {
		kept := checks[:0]
		for _, c := range checks {
			rec, err := s.cl.Read(c.e.Offset, int(c.e.Size))
			if errors.Is(err, commitlog.ErrOffsetTooSmall) { // deleted meanwhile by retention
				if len(res.Records) == 0 {
					res.Status = OffsetFoundNull
				}
				continue
			}
			if errors.Is(err, commitlog.ErrOffsetTooBig) || errors.Is(err, commitlog.ErrBadOffset) {
				res.Release()
				return res, fmt.Sprintf("offset %d: entry (log offset %d, size %d): %v", c.qo, c.e.Offset, c.e.Size, err), nil
			}
			if err != nil {
				res.Release()
				return res, "", err
			}
			res.Records = append(res.Records, rec)
			kept = append(kept, c)
			res.Status = Found
		}
		checks = kept
	}
	*cbuf = checks[:0]
	// Each record is checked against its entry. The records lie apart in
	// the log, and a check reads the front and the back of one: reading
	// those of all the batch's records first, loads that do not wait for
	// one another, has the memory fetch them side by side instead of one
	// after the other (the checks were a large share of the broker's CPU
	// for a pull read back from a log larger than the caches;
	// docs/decisions/0024-reading-the-commit-log.md).
	touchRecords(res.Records)
	for j, rec := range res.Records {
		if p := entryProblem(rec.B, checks[j].e, k, checks[j].qo, false); p != "" {
			res.Release()
			return res, fmt.Sprintf("offset %d: %s", checks[j].qo, p), nil
		}
	}
	return res, "", nil
}

// readCopied reads the records of checks into res with pread
// (commitlog.ReadCopy) when the log says its readers should copy
// (CopyReads: written with pwrite or O_DIRECT, its page cache holds small
// folios or nothing, which a read through the mapping faults in a page at
// a time; ReadCopy copies recent flushes from memory): one read for each run of
// records that lie close together, as a queue's messages do when they
// were sent in batches. It reports false, with res untouched, when they
// are to be read from the mapping.
func (s *Store) readCopied(res *GetResult, checks []entryAt) bool {
	if !s.cl.CopyReads() {
		return false
	}
	sbuf := spanPool.Get().(*[]commitlog.Span)
	defer spanPool.Put(sbuf)
	spans := (*sbuf)[:0]
	for _, c := range checks {
		if n := len(spans); n > 0 && c.e.Offset-spans[n-1].End <= copyGap {
			spans[n-1].End = c.e.End()
			continue
		}
		spans = append(spans, commitlog.Span{Off: c.e.Offset, End: c.e.End()})
	}
	*sbuf = spans[:0]
	cp, err := s.cl.ReadCopy(spans)
	if err != nil {
		return false // the mapping reads name the problem, or skip what retention deleted
	}
	at, j := 0, 0 // spans[j] starts at at in the copy
	for _, c := range checks {
		for c.e.Offset >= spans[j].End {
			at += int(spans[j].End - spans[j].Off)
			j++
		}
		p := at + int(c.e.Offset-spans[j].Off)
		res.Records = append(res.Records, cp.Region(p, p+int(c.e.Size)))
	}
	cp.Release()
	res.Status = Found
	return true
}

// copyGap is the most bytes of other records between two of a pull that
// are read with them rather than read apart.
const copyGap = 16 << 10

var spanPool = sync.Pool{New: func() any { b := make([]commitlog.Span, 0, 16); return &b }}

// touchRecords reads a byte of each cache line of the fixed fields at the
// front of each record (92 bytes with IPv4 hosts) and of its last 192
// bytes (topic and properties): entryProblem's reads, made ahead of it
// (see get).
//
//go:noinline
func touchRecords(recs []commitlog.Region) byte {
	var x byte
	for _, r := range recs {
		b := r.B
		if n := len(b); n > 0 {
			x ^= b[0] ^ b[min(45, n-1)] ^ b[min(91, n-1)]
			x ^= b[max(n-192, 0)] ^ b[max(n-128, 0)] ^ b[max(n-64, 0)] ^ b[n-1]
		}
	}
	return x
}

// entryAt is a consume queue entry and its queue offset.
type entryAt struct {
	e  consumequeue.Entry
	qo int64
}

var entryPool = sync.Pool{New: func() any { b := make([]consumequeue.Entry, 0, 33); return &b }}

var checkPool = sync.Pool{New: func() any { b := make([]entryAt, 0, 64); return &b }}

// MessageAt returns the record at a physical offset, decoded.
func (s *Store) MessageAt(phys int64) (*message.Message, error) {
	r, _, err := s.cl.ReadRecord(phys)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if got := message.PhysicalOffsetOf(r.B); got != phys {
		return nil, fmt.Errorf("store: no message starts at %d", phys)
	}
	m, _, err := message.Decode(r.B)
	return m, err
}

// BorrowMessageAt is MessageAt without copying the body: the message's
// Body points into the log's mapping and stays valid until release is
// called, which the caller must do once it no longer uses the message.
// The message itself (its Properties slice included) is recycled by
// release: copy what must outlive it (the property strings may be kept).
func (s *Store) BorrowMessageAt(phys int64) (m *message.Message, release func(), err error) {
	r, _, err := s.cl.ReadRecord(phys)
	if err != nil {
		return nil, nil, err
	}
	if got := message.PhysicalOffsetOf(r.B); got != phys {
		r.Release()
		return nil, nil, fmt.Errorf("store: no message starts at %d", phys)
	}
	m = borrowedPool.Get().(*message.Message)
	if _, err := message.DecodeInto(m, r.B, false); err != nil {
		r.Release()
		recycleBorrowed(m)
		return nil, nil, err
	}
	return m, func() { r.Release(); recycleBorrowed(m) }, nil
}

// borrowedPool recycles BorrowMessageAt's messages.
var borrowedPool = sync.Pool{New: func() any { return new(message.Message) }}

func recycleBorrowed(m *message.Message) {
	props := m.Properties
	clear(props)
	*m = message.Message{Properties: props[:0]}
	borrowedPool.Put(m)
}

// MessageByOffsetID returns the message an offset message id names.
func (s *Store) MessageByOffsetID(id string) (*message.Message, error) {
	host, phys, err := message.DecodeOffsetMsgID(id)
	if err != nil {
		return nil, err
	}
	if host != s.cfg.StoreHost {
		return nil, fmt.Errorf("store: message id %s names broker %s, this is %s", id, host, s.cfg.StoreHost)
	}
	return s.MessageAt(phys)
}

// MessagesByKey returns up to max messages of topic whose KEYS contain key
// or whose UNIQ_KEY is key, stored within [begin, end] (unix ms), newest
// first. Index hashes collide: each candidate's real key is compared.
func (s *Store) MessagesByKey(topic, key string, begin, end int64, max int) ([]*message.Message, error) {
	offs, err := s.idx.Lookup(topic+"#"+key, begin, end, max*2+8)
	if err != nil {
		return nil, err
	}
	var out []*message.Message
	for _, off := range offs {
		if len(out) >= max {
			break
		}
		m, err := s.MessageAt(off)
		if err != nil {
			continue // deleted by retention since
		}
		if m.Topic != topic || m.StoreTimestamp < begin || m.StoreTimestamp > end || !hasKey(m, key) || s.TopicDeletedAt(topic, off) {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

func hasKey(m *message.Message, key string) bool {
	if m.UniqKey() == key {
		return true
	}
	for _, k := range m.Keys() {
		if k == key {
			return true
		}
	}
	return false
}

// MessageByQueueOffset returns the message at a queue offset.
func (s *Store) MessageByQueueOffset(topic string, queueID int32, offset int64) (*message.Message, error) {
	q, err := s.queue(QueueKey{Topic: topic, QueueID: queueID}, false)
	if err != nil {
		return nil, err
	}
	if q == nil {
		return nil, fmt.Errorf("store: no queue %s/%d", topic, queueID)
	}
	e, err := q.Get(offset)
	if err != nil {
		return nil, err
	}
	if h, ok := s.cl.HoleAt(e.Offset); ok {
		return nil, fmt.Errorf("store: %s/%d offset %d: %w: the message was in the damaged range [%d, %d) skipped at recovery",
			topic, queueID, offset, ErrLost, h.Off, h.End)
	}
	return s.MessageAt(e.Offset)
}

// ErrLost means a queue offset's message is gone: it lay in a damaged
// range of the commit log that recovery skipped (commitlog.Config.SkipCorrupt).
var ErrLost = errors.New("store: message lost to a damaged range of the log")

// OffsetAtTime returns the first queue offset whose message was stored at or
// after ts (unix ms).
func (s *Store) OffsetAtTime(topic string, queueID int32, ts int64) (int64, error) {
	q, err := s.queue(QueueKey{Topic: topic, QueueID: queueID}, false)
	if err != nil || q == nil {
		return 0, err
	}
	return q.OffsetAtTime(ts, func(phys int64, size int32) (int64, error) {
		if h, ok := s.cl.HoleAt(phys); ok { // lost: the next record's time stands for it
			r, _, err := s.cl.ReadRecord(h.End)
			if err != nil {
				return 0, err
			}
			defer r.Release()
			return message.StoreTimestampOf(r.B), nil
		}
		r, err := s.cl.Read(phys, int(size))
		if err != nil {
			return 0, err
		}
		defer r.Release()
		return message.StoreTimestampOf(r.B), nil
	})
}

// QueueOffsets returns a queue's min and max (next) offsets.
func (s *Store) QueueOffsets(topic string, queueID int32) (minOff, maxOff int64) {
	q, _ := s.queue(QueueKey{Topic: topic, QueueID: queueID}, false)
	if q == nil {
		return 0, 0
	}
	return q.MinOffset(), q.MaxOffset()
}
