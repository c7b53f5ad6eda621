package consumequeue

import (
	"errors"
	"fmt"
)

// OffsetAtTime returns the first queue offset in [MinOffset, MaxOffset)
// whose message was stored at or after ts (milliseconds, as storeTime
// reports), MaxOffset if none was, and MinOffset if ts precedes everything.
// storeTime reads a record's store timestamp from the commit log; store
// times are assumed non-decreasing along the queue (binary search, about
// log2(n) calls).
//
// An error from storeTime is returned, wrapped, and ends the search: it
// usually means the log data of the first file's oldest entries is gone, so
// the caller should run DeleteBelow with the log's min offset and retry.
func (q *Queue) OffsetAtTime(ts int64, storeTime func(phys int64, size int32) (int64, error)) (int64, error) {
	lo, hi := q.MinOffset(), q.MaxOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.Get(mid)
		if errors.Is(err, ErrOffsetTooSmall) { // deleted meanwhile
			lo = q.MinOffset()
			continue
		}
		if err != nil {
			return 0, err
		}
		t, err := storeTime(e.Offset, e.Size)
		if err != nil {
			return 0, fmt.Errorf("consumequeue: store time of offset %d (log %d): %w", mid, e.Offset, err)
		}
		if t >= ts {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
