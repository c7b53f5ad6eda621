package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/message"
)

// errGap means a record's queue offset is past its queue's end: entries are
// missing, and the queue must be rebuilt from an earlier log offset.
var errGap = errors.New("store: consume queue is missing entries")

// dispatchLoop follows the commit log right behind the appender, woken by
// it (commitlog.Config.OnCommit), not by polling.
func (s *Store) dispatchLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			if err := s.dispatch(); err != nil {
				s.log.Error("dispatch stopped", "offset", s.dispatched.Load(), "err", err)
			}
		}
	}
}

// dispatch writes consume-queue and index entries for every record between
// the dispatch position and the log's readable end.
func (s *Store) dispatch() error {
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	var m message.Message
	for off := s.dispatched.Load(); off < s.cl.MaxOffset(); {
		r, next, err := s.cl.ReadRecord(off)
		switch {
		case errors.Is(err, commitlog.ErrOffsetTooBig):
			return nil
		case errors.Is(err, commitlog.ErrOffsetTooSmall): // retention passed the dispatcher
			off = s.cl.MinOffset()
			continue
		case err != nil:
			return fmt.Errorf("store: dispatch read at %d: %w", off, err)
		}
		start := next - int64(len(r.B))
		if _, err := message.DecodeInto(&m, r.B, false); err != nil {
			r.Release()
			return fmt.Errorf("store: dispatch decode at %d: %w", start, err)
		}
		err = s.dispatchOne(&m, start, int32(len(r.B)))
		r.Release()
		if err != nil {
			return err
		}
		s.dispatched.Store(next)
		s.report.DispatchedRecords++
		off = next
	}
	return nil
}

// dispatchOne adds the record's consume-queue entry (unless it is a
// prepared or rolled-back transactional message) and its index entries.
func (s *Store) dispatchOne(m *message.Message, phys int64, size int32) error {
	tx := m.SysFlag & message.TransactionMask
	if tx != message.TransactionPrepared && tx != message.TransactionRollback {
		k := QueueKey{Topic: m.Topic, QueueID: m.QueueID}
		q, err := s.queue(k, true)
		if err != nil {
			return fmt.Errorf("store: open consume queue %s: %w", k, err)
		}
		e := consumequeue.Entry{Offset: phys, Size: size, TagsCode: tagsCode(m)}
		err = q.Append(m.QueueOffset, e)
		if errors.Is(err, consumequeue.ErrConflict) { // a torn last entry: replace it
			if _, err = q.TruncatePhysical(phys); err == nil {
				err = q.Append(m.QueueOffset, e)
			}
		}
		if errors.Is(err, consumequeue.ErrNotContiguous) {
			return fmt.Errorf("%w: %s ends at %d, the record at log offset %d has queue offset %d", errGap, k, q.MaxOffset(), phys, m.QueueOffset)
		}
		if err != nil {
			return fmt.Errorf("store: consume queue %s offset %d: %w", k, m.QueueOffset, err)
		}
		if s.cfg.OnDispatch != nil {
			s.cfg.OnDispatch(k.Topic, k.QueueID, m.QueueOffset+1)
		}
	}
	if tx == message.TransactionRollback || phys < s.indexFrom {
		return nil
	}
	keys, _ := m.Properties.Get(message.PropKeys)
	for key := range strings.SplitSeq(keys, " ") {
		if key == "" {
			continue
		}
		if err := s.idx.PutHash(index.TopicKeyHash(m.Topic, key), phys, m.StoreTimestamp); err != nil {
			return fmt.Errorf("store: index key %q at %d: %w", key, phys, err)
		}
	}
	if u := m.UniqKey(); u != "" {
		if err := s.idx.PutHash(index.TopicKeyHash(m.Topic, u), phys, m.StoreTimestamp); err != nil {
			return fmt.Errorf("store: index UNIQ_KEY %q at %d: %w", u, phys, err)
		}
	}
	return nil
}
