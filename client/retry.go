package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// failedBrokers remembers the brokers that recently failed a send, so the
// next attempts go elsewhere. Entries expire after failedBrokerExpiry.
type failedBrokers struct {
	now func() time.Time

	mu    sync.Mutex
	until map[string]time.Time // broker address → end of avoidance
}

func newFailedBrokers() *failedBrokers {
	return &failedBrokers{now: time.Now, until: map[string]time.Time{}}
}

// add marks addr as failed now.
func (f *failedBrokers) add(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for a, t := range f.until { // keep the set small
		if !now.Before(t) {
			delete(f.until, a)
		}
	}
	f.until[addr] = now.Add(failedBrokerExpiry)
}

// filter returns the queues whose broker has not failed recently.
func (f *failedBrokers) filter(queues []Queue) []Queue {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.until) == 0 {
		return queues
	}
	now := f.now()
	out := make([]Queue, 0, len(queues))
	for _, q := range queues {
		if t, ok := f.until[q.Broker]; !ok || !now.Before(t) {
			out = append(out, q)
		}
	}
	return out
}

// errBackoffPastDeadline: the next attempt would start after the context's
// deadline, so the producer gives up with the last error.
var errBackoffPastDeadline = errors.New("client: backoff would pass the deadline")

// backoffDelay returns the full-jitter delay before retry n (n >= 1): a
// random duration in [0, min(max, base·2^(n-1))).
func (o *producerOptions) backoffDelay(n int) time.Duration {
	ceil := o.backoffBase
	for i := 1; i < n && ceil < o.backoffMax; i++ {
		ceil *= 2
	}
	ceil = min(ceil, o.backoffMax)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(o.random(int64(ceil)))
}

// sleep waits d unless that would pass ctx's deadline (then it returns
// errBackoffPastDeadline at once), ctx ends or quit is closed (ErrClosed).
func sleep(ctx context.Context, d time.Duration, quit <-chan struct{}) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return errBackoffPastDeadline
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-quit:
		return ErrClosed
	}
}
