package client

import (
	"context"
	"sync"
	"time"

	"github.com/gantrymq/gantry/message"
)

// IdempotencyStore records the keys of the messages an Idempotent handler
// has handled. Implementations must be safe for concurrent use; a shared
// one (a database, a cache) lets the members of a group skip each other's
// handled messages.
type IdempotencyStore interface {
	// Seen reports whether key is recorded as handled.
	Seen(ctx context.Context, key string) (bool, error)
	// Done records key as handled.
	Done(ctx context.Context, key string) error
}

// IdempotentOption configures Idempotent.
type IdempotentOption func(*idempotentOptions)

type idempotentOptions struct {
	key func(*MessageExt) string
}

// WithIdempotencyKeyFunc makes Idempotent key messages with f instead of
// IdempotencyKeyOf. A message whose key is "" is always handled.
func WithIdempotencyKeyFunc(f func(*MessageExt) string) IdempotentOption {
	return func(o *idempotentOptions) { o.key = f }
}

// IdempotencyKeyOf returns the key Idempotent handles a message once by:
// its IDEMPOTENCY_KEY property (Message.IdempotencyKey) if set, else its
// UNIQ_KEY, the id the producer gave it, which its retries, the broker's
// redeliveries through the retry topic and dead-letter resends all keep.
// It is "" for a message with neither.
func IdempotencyKeyOf(m *MessageExt) string {
	if m.Message != nil {
		if k := m.Property(message.PropIdempotencyKey); k != "" {
			return k
		}
	}
	return m.UniqKey
}

// Idempotent wraps h so that it handles each message at most once among
// the calls that succeeded, by key (IdempotencyKeyOf, or
// WithIdempotencyKeyFunc): a message whose key store reports Seen is
// skipped and counts as handled; the others (each key once per batch) go
// to h, and when h returns ConsumeSuccess their keys are recorded Done.
// Any other result is returned as it is and records nothing, so the
// messages come again and are handled again. A batch all of whose messages
// are skipped is ConsumeSuccess without calling h.
//
// Within one process a key is handled by one call at a time: a call
// meeting a key that another call is handling waits for it (until ctx
// ends: then ConsumeRetryLater) and skips the key if that call succeeded.
// Across processes sharing a store, Seen then Done is not atomic: two
// members handling one key at the same moment may both handle it.
//
// A Seen error makes the call ConsumeRetryLater without calling h. A Done
// error after h succeeded is not reported (the store's implementation
// should log it): the messages are handled, so the call still succeeds,
// and a redelivery of them would be handled again.
func Idempotent(store IdempotencyStore, h MessageHandler, opts ...IdempotentOption) MessageHandler {
	o := idempotentOptions{key: IdempotencyKeyOf}
	for _, opt := range opts {
		opt(&o)
	}
	w := &idempotent{store: store, h: h, key: o.key, inflight: map[string]chan struct{}{}}
	return w.handle
}

// idempotent is the state of an Idempotent handler.
type idempotent struct {
	store IdempotencyStore
	h     MessageHandler
	key   func(*MessageExt) string

	mu       sync.Mutex
	inflight map[string]chan struct{} // keys being handled, closed when their call ends
}

func (w *idempotent) handle(ctx context.Context, msgs []*MessageExt) ConsumeResult {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = w.key(m)
	}
	claimed, err := w.claim(ctx, keys)
	if err != nil {
		return ConsumeRetryLater
	}
	defer w.release(claimed)
	todo, todoKeys := make([]*MessageExt, 0, len(msgs)), make([]string, 0, len(msgs))
	checked := make(map[string]bool, len(claimed))
	for i, m := range msgs {
		if k := keys[i]; k != "" {
			if checked[k] {
				continue // a repeat of a key earlier in the batch
			}
			checked[k] = true
			seen, err := w.store.Seen(ctx, k)
			if err != nil {
				return ConsumeRetryLater
			}
			if seen {
				continue
			}
			todoKeys = append(todoKeys, k)
		}
		todo = append(todo, m)
	}
	if len(todo) == 0 {
		return ConsumeSuccess
	}
	r := w.h(ctx, todo)
	if r == ConsumeSuccess {
		for _, k := range todoKeys {
			_ = w.store.Done(ctx, k) // see Idempotent: a failure is the store's to report
		}
	}
	return r
}

// claim marks the batch's keys as being handled by this call and returns
// them (each once). If another call holds one, it takes none, waits for
// that call to end and starts over, so calls never wait for each other in
// a cycle.
func (w *idempotent) claim(ctx context.Context, keys []string) ([]string, error) {
	for {
		claimed, wait := w.tryClaim(keys)
		if wait == nil {
			return claimed, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// tryClaim claims every key and returns them, or claims none and returns
// the channel of a key another call holds.
func (w *idempotent) tryClaim(keys []string) ([]string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		if ch, ok := w.inflight[k]; ok && k != "" {
			return nil, ch
		}
	}
	claimed := make([]string, 0, len(keys))
	for _, k := range keys {
		if _, ok := w.inflight[k]; k != "" && !ok {
			w.inflight[k] = make(chan struct{})
			claimed = append(claimed, k)
		}
	}
	return claimed, nil
}

// release ends this call's claims, waking the calls waiting for them.
func (w *idempotent) release(claimed []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range claimed {
		close(w.inflight[k])
		delete(w.inflight, k)
	}
}

// MemoryStoreOption configures a MemoryIdempotencyStore.
type MemoryStoreOption func(*MemoryIdempotencyStore)

// DefaultIdempotencyMaxKeys is how many keys a MemoryIdempotencyStore
// holds by default.
const DefaultIdempotencyMaxKeys = 1 << 20

// WithMaxKeys bounds how many keys a MemoryIdempotencyStore holds: past
// it, the oldest is forgotten. Default DefaultIdempotencyMaxKeys.
func WithMaxKeys(n int) MemoryStoreOption {
	return func(s *MemoryIdempotencyStore) { s.max = n }
}

// MemoryIdempotencyStore is an IdempotencyStore in memory, for one
// process: a key is Seen for the TTL after its Done, and at most MaxKeys
// keys are kept (the oldest go first). Expired keys are dropped by the
// calls themselves (no goroutine). Each key costs about 100 bytes plus its
// length. It is safe for concurrent use.
type MemoryIdempotencyStore struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu    sync.Mutex
	until map[string]int64 // key -> end of its TTL (unix ns)
	order []keyExpiry      // keys in the order they were done, from head
	head  int
}

// keyExpiry is a key of MemoryIdempotencyStore.order and the end of its
// TTL then; a later Done of the key makes it stale.
type keyExpiry struct {
	key   string
	until int64
}

// NewMemoryIdempotencyStore returns an empty store whose keys are Seen for
// ttl after their Done; ttl <= 0 keeps them until the key bound pushes
// them out.
func NewMemoryIdempotencyStore(ttl time.Duration, opts ...MemoryStoreOption) *MemoryIdempotencyStore {
	s := &MemoryIdempotencyStore{ttl: ttl, max: DefaultIdempotencyMaxKeys, now: time.Now, until: map[string]int64{}}
	for _, opt := range opts {
		opt(s)
	}
	s.max = max(s.max, 1)
	return s
}

// Seen implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Seen(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.expire(now)
	until, ok := s.until[key]
	return ok && (s.ttl <= 0 || now < until), nil
}

// Done implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Done(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.expire(now)
	until := now + int64(s.ttl)
	s.until[key] = until
	s.order = append(s.order, keyExpiry{key: key, until: until})
	for len(s.until) > s.max || len(s.order)-s.head > 2*s.max { // stale entries (keys done again) count too
		s.pop()
	}
	return nil
}

// Len returns how many keys the store holds (expired ones not yet dropped
// included).
func (s *MemoryIdempotencyStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.until)
}

// expire drops the keys whose TTL ended by now, oldest first.
func (s *MemoryIdempotencyStore) expire(now int64) {
	if s.ttl <= 0 {
		return
	}
	for s.head < len(s.order) && s.order[s.head].until <= now {
		s.pop()
	}
}

// pop forgets the oldest entry of order (and its key, unless a later Done
// renewed it), compacting order once half of it is popped.
func (s *MemoryIdempotencyStore) pop() {
	e := s.order[s.head]
	s.order[s.head] = keyExpiry{}
	s.head++
	if s.until[e.key] == e.until {
		delete(s.until, e.key)
	}
	if s.head > len(s.order)/2 && s.head > 64 {
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}
