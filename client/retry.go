package client

import (
	"context"
	"errors"
	"fmt"
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

// retryState is what the retry loop remembers between attempts.
type retryState struct {
	last      error
	refreshed bool  // the route was refreshed after NOT_FOUND
	stick     Queue // set after an indeterminate failure: the queue to try again
	// ind is an indeterminate failure of an earlier attempt: the send stays
	// indeterminate whatever the later attempts answer, short of success.
	ind *IndeterminateError
}

// note remembers err if it is indeterminate.
func (r *retryState) note(err error) {
	var ind *IndeterminateError
	if errors.As(err, &ind) {
		r.ind = ind
	}
}

// final is the send's error when its last attempt failed with err.
func (r *retryState) final(err error) error {
	var ind *IndeterminateError
	if r.ind == nil || errors.As(err, &ind) {
		return err
	}
	return &IndeterminateError{Broker: r.ind.Broker, Queue: r.ind.Queue, UniqKeys: r.ind.UniqKeys,
		Err: fmt.Errorf("an earlier attempt is indeterminate (%w), and the last one failed: %w", r.ind.Err, err)}
}

// retryable decides whether to try again after err from queue q (the zero
// Queue when no queue was picked), and prepares the next attempt: a broker
// that failed is avoided, a broker's NOT_FOUND refreshes the route once.
func (p *Producer) retryable(ctx context.Context, r *retryState, err error, q Queue, writable []Queue) bool {
	if ctx.Err() != nil {
		return false
	}
	var ind *IndeterminateError
	if errors.As(err, &ind) {
		if p.opts.retryIndeterminate && !errors.Is(err, context.Canceled) {
			// The same queue again: the broker that may have stored the
			// messages is the one that can answer the retry as a duplicate.
			r.stick = q
			return true
		}
		return false
	}
	switch {
	case errors.Is(err, ErrTopicNotFound):
		if r.refreshed || q.Broker == "" {
			// Not again; nor when the nameservers said so just now (no
			// queue was picked): a missing topic is a definite error.
			return false
		}
		r.refreshed = true
		_, rerr := p.c.routes.refresh(ctx, q.Topic)
		return rerr == nil || IsRetryable(rerr)
	case errors.Is(err, ErrDiskFull):
		if q.Broker == "" {
			return false
		}
		p.failed.add(q.Broker)
		return len(p.failed.filter(writable)) > 0 // never the same broker again
	case errors.Is(err, ErrUnavailable):
		if q.Broker != "" {
			p.failed.add(q.Broker)
		}
		return true
	case errors.Is(err, ErrNoQueue):
		// A group between masters (a failover) has no writable queue in
		// the route until the new master registers: read it again.
		_, rerr := p.c.routes.refresh(ctx, q.Topic)
		return rerr == nil || IsRetryable(rerr)
	case errors.Is(err, ErrNotMaster):
		// A failover moved the master: the route names the new one (or no
		// master yet, when the next attempt waits with its backoff).
		if q.Broker != "" {
			p.failed.add(q.Broker)
		}
		_, rerr := p.c.routes.refresh(ctx, q.Topic)
		return rerr == nil || IsRetryable(rerr)
	}
	return false
}
