package consumequeue

import "fmt"

// Flush makes every entry below MaxOffset durable (msync of the dirty
// range, oldest file first), creating the queue's first file if Append
// holds its entries in memory (Materialize). It may run concurrently with
// Append.
func (q *Queue) Flush() error {
	if q.pend.Load() != nil {
		if err := q.Materialize(); err != nil {
			return err
		}
	}
	return q.flush()
}

func (q *Queue) flush() error {
	q.fmu.Lock()
	defer q.fmu.Unlock()
	q.rmu.RLock()
	defer q.rmu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	end := q.max.Load() * EntrySize
	if end <= q.flushed {
		q.flushed = end // a truncation moved the end back
		return nil
	}
	l := q.files.Load()
	if len(l.files) > 0 && q.flushed < l.files[0].base {
		q.flushed = l.files[0].base // files below were deleted
	}
	for pos := q.flushed; pos < end; {
		f := l.find(pos)
		if f == nil {
			return fmt.Errorf("consumequeue: flush: no file holds byte %d", pos) // broken invariant
		}
		hi := min(end, f.end())
		if err := f.sync(int(pos-f.base), int(hi-pos)); err != nil {
			return err
		}
		pos = hi
		q.flushed = pos
	}
	return nil
}
