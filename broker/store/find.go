package store

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/message"
)

// findCandidates bounds the index entries FindByKey examines: the newest
// ones of the range, which a key shared by thousands of records within it
// could push its oldest record out of.
const findCandidates = 4096

// DispatchedOffset returns the log offset below which every record is
// dispatched: in its consume queue and in the key index, where Get and
// FindByKey find it. It only grows while the store is open, and Open
// returns with every recovered record dispatched unless it opened stalled
// (Recovery().DispatchError): PutBatch refuses messages until then.
func (s *Store) DispatchedOffset() int64 { return s.dispatched.Load() }

// SettledDispatch returns the dispatch position once a dispatch under way
// has finished: every later one reads Config.DispatchLimit afresh, so a
// lowered limit holds from there on.
func (s *Store) SettledDispatch() int64 {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	return s.dispatched.Load()
}

// WaitDispatched waits until the dispatcher has passed off (a log offset:
// every record below it is then in its consume queue and the index), the
// context ends or d passes, and reports whether it did. It is for lookups
// that want to see what was acknowledged before them (admin queries by
// key). Wait for PutEnd, not the log's MaxOffset: an end-of-segment or
// block filler can hold the dispatch position short of the log's end
// until more records come.
func (s *Store) WaitDispatched(ctx context.Context, off int64, d time.Duration) bool {
	if s.dispatched.Load() >= off {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		moved := s.watchDispatch() // before the look, so a move in between is not missed
		if s.dispatched.Load() >= off {
			return true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
}

// watchDispatch returns a channel closed when the dispatcher next moves
// on (dispatchMoved).
func (s *Store) watchDispatch() <-chan struct{} {
	for {
		if ch := s.moved.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if s.moved.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// dispatchMoved wakes the waiters of WaitDispatched after the dispatch
// position grew. With nobody waiting it costs one atomic load.
func (s *Store) dispatchMoved() {
	if s.moved.Load() == nil {
		return
	}
	if ch := s.moved.Swap(nil); ch != nil {
		close(*ch)
	}
}

// FindByKey returns where the oldest record that the index holds under
// (topic, key), stored within [begin, end] (unix ms), and that match
// accepts was stored, as PutBatch reported it, and whether there is one. The
// index holds a record under its topic for each of its KEYS, its UNIQ_KEY
// and its IDEMPOTENCY_KEY, and under its REAL_TOPIC (a parked record) for
// its IDEMPOTENCY_KEY, else its UNIQ_KEY. Index hashes collide, so match
// must check the key in the record (a view of the log, valid only during
// the call). At most the newest 4,096 index entries of the range are
// examined. Records not yet dispatched (see DispatchedOffset) and those
// retention deleted are not found. Safe for concurrent use.
func (s *Store) FindByKey(topic string, key []byte, begin, end int64, match func(message.View) bool) (PutResult, bool, error) {
	// The key is only hashed: it is not copied into a string.
	offs, err := s.idx.LookupHash(index.TopicKeyHash(topic, unsafe.String(unsafe.SliceData(key), len(key))), begin, end, findCandidates)
	if err != nil {
		return PutResult{}, false, fmt.Errorf("store: find %q in %q: %w", string(key), topic, err)
	}
	for i := len(offs) - 1; i >= 0; i-- { // Lookup answers newest first
		if s.TopicDeletedAt(topic, offs[i]) { // a deleted topic's (deletetopic.go)
			continue
		}
		if r, ok := s.examine(offs[i], begin, end, match); ok {
			return r, true, nil
		}
	}
	return PutResult{}, false, nil
}

// examine reads the record at phys and returns its PutResult if it was
// stored within [begin, end] and match accepts it. A record retention
// deleted, or that cannot be read, is not accepted.
func (s *Store) examine(phys, begin, end int64, match func(message.View) bool) (PutResult, bool) {
	rec, err := s.recordAt(phys)
	if err != nil {
		return PutResult{}, false
	}
	defer rec.Release()
	v, err := message.NewView(rec.B)
	if err != nil {
		return PutResult{}, false
	}
	if ts := v.StoreTimestamp(); ts < begin || ts > end || !match(v) {
		return PutResult{}, false
	}
	return s.result(v, phys), true
}

// ResultAt returns the PutResult of the record at phys, as PutBatch reported
// it.
func (s *Store) ResultAt(phys int64) (PutResult, error) {
	rec, err := s.recordAt(phys)
	if err != nil {
		return PutResult{}, err
	}
	defer rec.Release()
	v, err := message.NewView(rec.B)
	if err != nil {
		return PutResult{}, fmt.Errorf("store: record at %d: %w", phys, err)
	}
	return s.result(v, phys), nil
}

// recordAt reads the record that starts at phys.
func (s *Store) recordAt(phys int64) (commitlog.Region, error) {
	rec, _, err := s.cl.ReadRecord(phys)
	if err != nil {
		return rec, err
	}
	if message.PhysicalOffsetOf(rec.B) != phys {
		rec.Release()
		return commitlog.Region{}, fmt.Errorf("store: no message starts at %d", phys)
	}
	return rec, nil
}

// result is the PutResult of the record v at phys.
func (s *Store) result(v message.View, phys int64) PutResult {
	uniq, _ := v.Property(message.PropUniqKey)
	return PutResult{
		MsgID: message.EncodeOffsetMsgID(s.cfg.StoreHost, phys), UniqKey: string(uniq),
		QueueID: v.QueueID(), QueueOffset: v.QueueOffset(), PhysicalOffset: phys, StoreTimestamp: v.StoreTimestamp(),
	}
}
