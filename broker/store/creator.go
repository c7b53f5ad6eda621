package store

import (
	"context"
	"fmt"
	"slices"
)

// A new consume queue's first file is not created by the dispatcher: the
// queue holds its first entries in memory, readable (consumequeue
// DeferCreate), and the creator goroutine creates the file (directory,
// file, first reservation, mapping) while the dispatcher goes on with
// other queues' records: producing into thousands of new queues at once
// would otherwise hold back every other queue's messages behind their
// files (docs/decisions/0004-consume-queue-creation-off-dispatch.md). A queue the creator
// has not reached by the next flush is created by the flush, and one that
// gathers too many entries by its next Append. Open creates those its own
// dispatch started before it returns.

// createBacklog is how many new queues may wait for the creator; more
// wait for the flush.
const createBacklog = 16 << 10

// queueCreate hands q, whose entries are held in memory, to the creator
// unless it has it already. The dispatcher calls it; it never blocks.
func (s *Store) queueCreate(q *cqueue) {
	if !q.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case s.create <- q:
	default:
		q.queued.Store(false) // the flush creates it
	}
}

// createLoop creates the first file of each queue handed to it until ctx
// ends. A queue whose file it cannot create (a full disk) goes to the
// dispatcher, which creates it itself before it dispatches anything else,
// and stalls (retrying) while it cannot: as when it created every file.
func (s *Store) createLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-s.create:
			if err := q.Materialize(); err != nil {
				s.createFailed(q)
				s.wake()
			}
			q.queued.Store(false)
		}
	}
}

// createFailed records q as a queue whose file could not be created.
func (s *Store) createFailed(q *cqueue) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if !slices.Contains(s.failedCreates, q) {
		s.failedCreates = append(s.failedCreates, q)
	}
	s.failedCount.Store(int64(len(s.failedCreates)))
}

// retryCreates creates the files of the queues whose creation failed; the
// dispatcher calls it first, under dispatchMu, and stops (a stall) at the
// first failure.
func (s *Store) retryCreates() error {
	if s.failedCount.Load() == 0 {
		return nil
	}
	s.failMu.Lock()
	defer s.failMu.Unlock()
	for len(s.failedCreates) > 0 {
		q := s.failedCreates[0]
		if err := q.Materialize(); err != nil {
			return fmt.Errorf("store: create consume queue %s: %w", q.key, err)
		}
		s.failedCreates = s.failedCreates[1:]
		s.failedCount.Store(int64(len(s.failedCreates)))
	}
	return nil
}

// createPending creates, 16 at a time, the files of the queues the
// dispatch at Open started; Open calls it before the creator runs, and
// one it cannot create makes Open stall as a failed dispatch would.
func (s *Store) createPending() error {
	var qs []*cqueue
	for _, q := range s.queues {
		if q.Deferred() {
			qs = append(qs, q)
		}
	}
	return parallel(len(qs), func(i int) error {
		if err := qs[i].Materialize(); err != nil {
			s.createFailed(qs[i])
			return fmt.Errorf("store: create consume queue %s: %w", qs[i].key, err)
		}
		return nil
	})
}
