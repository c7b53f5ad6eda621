package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/message"
)

// errGap means a record's queue offset is past its queue's end: entries are
// missing, and the queue must be rebuilt from an earlier log offset.
var errGap = errors.New("store: consume queue is missing entries")

// dispatchLoop follows the commit log right behind the appender, woken by
// it (commitlog.Config.OnCommit), not by polling. A dispatch that fails
// (a full disk refusing the next consume-queue or index file) is retried
// after a pause, from 100 ms doubling to 2 s, and not at every append
// meanwhile (each try costs the failing allocation: a system call per
// message while the disk is full): records already in the log become
// readable at the first try that succeeds, even if nothing is appended
// after them. While it fails the store is stalled (stall.go): it says so
// in the log, with a pause doubling from 1 s to a minute, and PutBatch refuses
// messages once it has lasted MaxDispatchStall.
func (s *Store) dispatchLoop(ctx context.Context) {
	const firstPause, maxPause = 100 * time.Millisecond, 2 * time.Second
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	pause := time.Duration(0)
	if s.stall.since.Load() != 0 { // Open could not dispatch everything
		pause = firstPause
		retry.Reset(pause)
	}
	for {
		kick := s.kick
		if pause > 0 {
			kick = nil // failing: the retry timer decides
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry.C:
		}
		_, err := s.dispatch()
		switch {
		case err == nil && pause > 0:
			s.resumed(s.cfg.Now())
			pause = 0
			retry.Stop()
		case err != nil:
			s.failed(s.cfg.Now(), err)
			pause = min(max(2*pause, firstPause), maxPause)
			retry.Reset(pause)
		}
	}
}

// dispatch writes consume-queue and index entries for every record between
// the dispatch position and the log's readable end, and returns how many
// records it dispatched.
//
// When the log's readers should copy (commitlog.Log.CopyReads), it copies
// the records out with pread (CopyRecords) instead of paying the first
// read of each page through the log's mapping (a consumer reading the
// record later pays that read instead, but a produce that nothing reads
// at once does not): a produce then costs the broker less CPU
// (docs/decisions/0024-reading-the-commit-log.md). Under a log written through its mapping the appends
// already put the pages there, and the dispatcher's read spares the
// consumers theirs, so it reads them there.
func (s *Store) dispatch() (n int64, err error) {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	if err := s.retryCreates(); err != nil {
		return 0, err
	}
	copying := s.cl.CopyReads()
	if copying && s.dbuf == nil {
		s.dbuf = make([]byte, dispatchChunk)
	}
	end := s.dispatchEnd()
	for off := s.dispatched.Load(); off < end; {
		var (
			recs        []byte
			start, next int64
			r           commitlog.Region
		)
		if copying {
			recs, start, next, err = s.cl.CopyRecords(off, s.dbuf)
		} else {
			r, next, err = s.cl.ReadRecord(off)
			recs, start = r.B, next-int64(len(r.B))
		}
		switch {
		case errors.Is(err, commitlog.ErrOffsetTooBig):
			return n, nil
		case errors.Is(err, commitlog.ErrOffsetTooSmall): // retention passed the dispatcher (DeleteFloor forbids it)
			s.log.Warn("records deleted before they were dispatched; dispatching from the log's first record", "offset", off, "min", s.cl.MinOffset())
			off = s.cl.MinOffset()
			s.dispatchFrom = off
			continue
		case err != nil:
			return n, fmt.Errorf("store: dispatch read at %d: %w", off, err)
		}
		k, cut, err := s.dispatchRecords(recs, start, end)
		r.Release()
		n += k
		if k > 0 {
			s.dispatchMoved()
		}
		if err != nil || cut {
			return n, err
		}
		off = next
	}
	return n, nil
}

// dispatchChunk is how many bytes of records the dispatcher copies out of
// the log at a time.
const dispatchChunk = 256 << 10

// dispatchRecords dispatches records lying back to back in recs, the first
// at log offset start, advancing the dispatch position past each, up to
// the first that would end beyond limit (cut then reports it).
func (s *Store) dispatchRecords(recs []byte, start, limit int64) (n int64, cut bool, err error) {
	for p := 0; p < len(recs); {
		size, _, _ := message.RecordSize(recs[p:])
		phys := start + int64(p)
		if phys+int64(size) > limit {
			return n, true, nil
		}
		v, err := message.NewView(recs[p : p+int(size)])
		if err == nil {
			err = s.dispatchOne(v, phys)
		} else {
			err = fmt.Errorf("store: dispatch decode at %d: %w", phys, err)
		}
		if err != nil {
			return n, false, err
		}
		p += int(size)
		s.dispatched.Store(start + int64(p))
		n++
	}
	return n, false, nil
}

// dispatchOne adds the record's consume-queue entry (unless it is a
// prepared or rolled-back transactional message) and its index entries
// (indexKeys). It does not allocate for a known queue.
func (s *Store) dispatchOne(v message.View, phys int64) error {
	if s.isDeleted(v.Topic(), phys) { // of a deleted topic (deletetopic.go)
		return nil
	}
	var p indexedProps
	var tags []byte
	for k, val := range v.All() { // one pass; the last of a repeated key wins, as in Properties.Get
		switch string(k) {
		case message.PropTags:
			tags = val
		case message.PropKeys:
			p.keys = val
		case message.PropUniqKey:
			p.uniq = val
		case message.PropIdempotencyKey:
			p.idem = val
		case message.PropRealTopic:
			p.realTopic = val
		}
	}
	tx := v.SysFlag() & message.TransactionMask
	var topic string
	if tx != message.TransactionPrepared && tx != message.TransactionRollback {
		q, err := s.dispatchQueue(v.Topic(), v.QueueID())
		if err != nil {
			return err
		}
		topic = q.key.Topic
		qo := v.QueueOffset()
		e := consumequeue.Entry{Offset: phys, Size: int32(len(v.Bytes())), TagsCode: message.TagsCode(string(tags))}
		grew := qo >= q.MaxOffset() // not a re-dispatch of a stored entry
		err = q.Append(qo, e)
		if errors.Is(err, consumequeue.ErrConflict) { // a torn last entry: replace it
			if _, err = q.TruncatePhysical(phys); err == nil {
				err = q.Append(qo, e)
			}
		}
		if errors.Is(err, consumequeue.ErrNotContiguous) {
			if err = s.skipGone(q, qo, phys); err == nil {
				err = q.Append(qo, e)
			}
		}
		if err != nil {
			return fmt.Errorf("store: consume queue %s offset %d: %w", q.key, qo, err)
		}
		if grew && q.Deferred() {
			s.queueCreate(q)
		}
		if grew && s.cfg.OnDispatch != nil {
			s.cfg.OnDispatch(q.key.Topic, q.key.QueueID, qo+1)
		}
	} else {
		topic = string(v.Topic())
	}
	if tx == message.TransactionRollback || phys < s.indexFrom || parkedRetry(p.realTopic) {
		return nil
	}
	return s.indexKeys(topic, &p, phys, v.StoreTimestamp())
}

// skipGone restarts q at queue offset qo, the offset of the record the
// dispatcher is at, when every entry it holds (if any) points below the
// log's first offset and so do the messages from its max offset up to qo:
// retention deleted them (forced cleaning in a store written without
// DeleteFloor, which keeps the records the dispatcher has not passed), or
// the log was reset to start where its master's does (ResetLog). They are
// known to be gone when this dispatch run started at the log's first
// record: it would have found any of them the log still holds. Otherwise
// the queue lacks entries whose records may be in the log: errGap, which
// makes recovery rebuild the queues from the log's first record.
func (s *Store) skipGone(q *cqueue, qo, phys int64) error {
	maxOff := q.MaxOffset()
	_, last, ok := q.LastEntry()
	logMin := s.cl.MinOffset()
	if ok && last.End() > logMin && s.dispatchFrom <= last.End() {
		return s.fillLost(q.key, q.Queue, qo, phys) // this run read everything after the last entry: they were in a damaged range
	}
	if ok && last.End() > logMin || s.dispatchFrom > logMin {
		return fmt.Errorf("%w: %s ends at %d, the log's next record of it has queue offset %d", errGap, q.key, maxOff, qo)
	}
	if err := q.RestartAt(qo); err != nil {
		return fmt.Errorf("store: consume queue %s: %w", q.key, err)
	}
	s.skipped.Add(qo - maxOff)
	s.log.Warn("consume queue resumes after messages deleted before they were dispatched", "queue", q.key.String(),
		"from", maxOff, "to", qo, "lost", qo-maxOff)
	return nil
}

// fillLost gives each queue offset of q from its max offset up to qo an
// entry in a damaged range of the log skipped at recovery (SkipCorrupt)
// that lies between q's last entry and phys, the record of qo: the
// messages were there, and are lost. The entries point at distinct bytes
// of the range, one byte long each; readers skip entries that point into
// such a range (Get, gantry verify). Without such a range the queue lacks
// entries whose records may be in the log: errGap.
func (s *Store) fillLost(k QueueKey, q *consumequeue.Queue, qo, phys int64) error {
	maxOff := q.MaxOffset()
	from := int64(0)
	if _, last, ok := q.LastEntry(); ok {
		from = last.End()
	}
	n := qo - maxOff
	var hole commitlog.Span
	for _, h := range s.cl.Holes() {
		if h.Off >= from && h.End <= phys && h.End-h.Off >= n {
			hole = h // the last one before phys: the likeliest to have held them
		}
	}
	if hole.End == 0 {
		return fmt.Errorf("%w: %s ends at %d, the log's next record of it has queue offset %d", errGap, k, maxOff, qo)
	}
	for i := range n {
		if err := q.Append(maxOff+i, consumequeue.Entry{Offset: hole.Off + i, Size: 1}); err != nil {
			return fmt.Errorf("store: consume queue %s: %w", k, err)
		}
	}
	s.skipped.Add(n)
	s.log.Warn("consume queue skips messages lost to a damaged range of the log", "queue", k.String(),
		"from", maxOff, "to", qo, "lost", n, "range", fmt.Sprintf("[%d, %d)", hole.Off, hole.End))
	return nil
}

// RetryTopicPrefix starts a consumer group's retry topic, %RETRY%<group>.
const RetryTopicPrefix = "%RETRY%"

// parkedRetry reports whether a record's REAL_TOPIC is a retry topic: a
// message a consumer sent back, parked until its retry is due. It gets no
// index entries: its keys are indexed under its first topic already and
// under the retry topic once it is delivered there, nothing looks it up
// under the schedule topic, and a retry storm spends less per failure.
func parkedRetry(realTopic []byte) bool {
	return bytes.HasPrefix(realTopic, []byte(RetryTopicPrefix))
}

// indexedProps are the properties of a record that the index holds it
// under.
type indexedProps struct {
	keys      []byte // KEYS: space-separated
	uniq      []byte // UNIQ_KEY
	idem      []byte // IDEMPOTENCY_KEY
	realTopic []byte // REAL_TOPIC: the topic of a parked record
}

// indexKeys adds the index entries of the record at phys, stored at ts
// in topic: under topic, one for each of its KEYS, its UNIQ_KEY and its
// IDEMPOTENCY_KEY (unless one of the others spells it: a key is indexed
// once per record); and if it is parked (its REAL_TOPIC is another
// topic), one under REAL_TOPIC for its de-duplication key, its
// IDEMPOTENCY_KEY or else its UNIQ_KEY, so that a repeat of a delayed
// send is found under the topic it was sent to (FindByKey).
func (s *Store) indexKeys(topic string, p *indexedProps, phys, ts int64) error {
	put := func(topic string, key []byte, what string) error {
		if err := s.idx.PutHash(index.TopicKeyHash(topic, string(key)), phys, ts); err != nil {
			return fmt.Errorf("store: index %s %q at %d: %w", what, key, phys, err)
		}
		return nil
	}
	idemIndexed := len(p.idem) == 0 || bytes.Equal(p.idem, p.uniq)
	for key := range bytes.SplitSeq(p.keys, []byte{' '}) {
		if len(key) == 0 {
			continue
		}
		idemIndexed = idemIndexed || bytes.Equal(key, p.idem)
		if err := put(topic, key, "key"); err != nil {
			return err
		}
	}
	if len(p.uniq) > 0 {
		if err := put(topic, p.uniq, "UNIQ_KEY"); err != nil {
			return err
		}
	}
	if !idemIndexed {
		if err := put(topic, p.idem, "IDEMPOTENCY_KEY"); err != nil {
			return err
		}
	}
	if len(p.realTopic) == 0 || string(p.realTopic) == topic {
		return nil
	}
	key := p.idem
	if len(key) == 0 {
		key = p.uniq
	}
	if len(key) == 0 {
		return nil
	}
	return put(string(p.realTopic), key, "key of a parked record")
}

// dispatchQueue returns the consume queue of (topic, queueID), creating
// it, from a cache the dispatcher owns (under dispatchMu) so that a
// record's topic bytes need no string.
func (s *Store) dispatchQueue(topic []byte, queueID int32) (*cqueue, error) {
	if q := s.dcache[string(topic)][queueID]; q != nil {
		return q, nil
	}
	k := QueueKey{Topic: string(topic), QueueID: queueID}
	q, err := s.queue(k, true)
	if err != nil {
		return nil, fmt.Errorf("store: open consume queue %s: %w", k, err)
	}
	byID := s.dcache[k.Topic]
	if byID == nil {
		byID = map[int32]*cqueue{}
		s.dcache[k.Topic] = byID
	}
	byID[queueID] = q
	return q, nil
}

// tagsCode is the consume-queue tags code of a record (dispatchOne
// computes the same from its one pass over the properties).
func tagsCode(v message.View) int64 {
	tags, _ := v.Property(message.PropTags)
	return message.TagsCode(string(tags))
}
