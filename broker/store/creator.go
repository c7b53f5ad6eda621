package store

import "context"

// A new consume queue's first file is not created by the dispatcher: the
// queue holds its first entries in memory, readable (consumequeue
// DeferCreate), and the creator goroutine creates the file (directory,
// file, first reservation, mapping) while the dispatcher goes on with
// other queues' records. Producing into thousands of new queues at once
// (a file each, about 0.15-0.5 ms) otherwise held back every other
// queue's messages for seconds (docs/BENCHMARKS.md). A queue the creator
// has not reached by the next flush is created by the flush, and one that
// gathers too many entries by its next Append.

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
// ends. A failure (a full disk) is left to the flush, which tries again
// and reports it.
func (s *Store) createLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-s.create:
			if err := q.Materialize(); err != nil {
				s.log.Debug("creating a consume-queue file failed; the flush retries", "queue", q.key.String(), "err", err)
			}
			q.queued.Store(false)
		}
	}
}
