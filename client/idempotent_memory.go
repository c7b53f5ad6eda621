package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// MemoryStoreOption configures a MemoryIdempotencyStore.
type MemoryStoreOption func(*MemoryIdempotencyStore)

// DefaultIdempotencyMaxKeys is how many keys a MemoryIdempotencyStore
// holds by default.
const DefaultIdempotencyMaxKeys = 1 << 20

// IdempotencyKeyCost is the heap a MemoryIdempotencyStore's key costs, not
// counting the key's own bytes, at most: its map entry, its place in the
// expiry queue and their growth slack. WithMaxBytes counts each key as
// this plus its length.
const IdempotencyKeyCost = 128

// WithMaxKeys bounds how many keys a MemoryIdempotencyStore holds, done
// or claimed: past it, the oldest done key is forgotten. Default
// DefaultIdempotencyMaxKeys; n < 1 is taken as 1.
func WithMaxKeys(n int) MemoryStoreOption {
	return func(s *MemoryIdempotencyStore) { s.maxKeys = n }
}

// WithMaxBytes also bounds a MemoryIdempotencyStore by memory: past n
// bytes, counting each key as IdempotencyKeyCost plus its length, the
// oldest done key is forgotten. Default: no bound but WithMaxKeys.
func WithMaxBytes(n int64) MemoryStoreOption {
	return func(s *MemoryIdempotencyStore) { s.maxBytes = n }
}

// MemoryIdempotencyStore is a BatchIdempotencyStore in memory, for the
// Idempotent handlers of one process: a key is AlreadyDone for the TTL
// after its Done, and a claim holds a key until its lease ends.
//
// It is bounded: at most WithMaxKeys keys (DefaultIdempotencyMaxKeys),
// and optionally WithMaxBytes; past a bound the oldest done key is
// forgotten, so a redelivery of it is handled again. A claim is never
// forgotten before its lease ends: a claim past the key bound, with no
// done key left to forget, fails (and Idempotent retries the batch).
// Each key costs at most IdempotencyKeyCost bytes of heap plus its
// length (keys are copied: a key that is a view of a pull response does
// not keep the response alive); a million 32-byte keys take at most
// 160 MB. Expired keys are dropped by the calls themselves (no goroutine).
// It is safe for concurrent use.
type MemoryIdempotencyStore struct {
	ttl      time.Duration
	maxKeys  int
	maxBytes int64
	now      func() time.Time // injected by tests
	epoch    time.Time        // times are kept as nanoseconds since it (monotonic)

	mu        sync.Mutex
	done      map[string]int64 // key -> end of its TTL (without a TTL, only unique)
	order     []keyExpiry      // done keys in the order they were done, from head
	head      int
	lastUntil int64               // the until of the last Done
	claims    map[string]memClaim // keys claimed, their claims' lease not necessarily live
	sweepAt   int                 // len(claims) at which expired claims are swept
	keyBytes  int64               // the length of every key held, done or claimed
}

// keyExpiry is a key of MemoryIdempotencyStore.order and the end of its
// TTL then; a later Done of the key, or its removal, makes it stale.
type keyExpiry struct {
	key   string
	until int64
}

// memClaim is a claim of a key: its copy of the key (reused when it is
// done), the claim's token and the end of its lease.
type memClaim struct {
	key   string
	token string
	until int64
}

// minSweep is the fewest claims at which expired ones are swept.
const minSweep = 1024

// NewMemoryIdempotencyStore returns an empty store whose keys are
// AlreadyDone for ttl after their Done; ttl <= 0 keeps them until a bound
// pushes them out.
func NewMemoryIdempotencyStore(ttl time.Duration, opts ...MemoryStoreOption) *MemoryIdempotencyStore {
	s := &MemoryIdempotencyStore{ttl: ttl, maxKeys: DefaultIdempotencyMaxKeys, now: time.Now,
		done: map[string]int64{}, claims: map[string]memClaim{}, sweepAt: minSweep}
	for _, opt := range opts {
		opt(s)
	}
	s.maxKeys = max(s.maxKeys, 1)
	s.epoch = s.now()
	return s
}

var _ BatchIdempotencyStore = (*MemoryIdempotencyStore)(nil)

// Claim implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Claim(_ context.Context, key, token string, lease time.Duration) (ClaimState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	s.expire(now)
	return s.claim(now, key, token, lease)
}

// ClaimBatch implements BatchIdempotencyStore.
func (s *MemoryIdempotencyStore) ClaimBatch(_ context.Context, keys []string, token string, lease time.Duration) ([]ClaimState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	s.expire(now)
	states := make([]ClaimState, len(keys))
	for i, k := range keys {
		st, err := s.claim(now, k, token, lease)
		if err != nil {
			return nil, err
		}
		states[i] = st
	}
	return states, nil
}

// Done implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Done(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	s.expire(now)
	s.markDone(now, key)
	s.bound()
	return nil
}

// DoneBatch implements BatchIdempotencyStore.
func (s *MemoryIdempotencyStore) DoneBatch(_ context.Context, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	s.expire(now)
	for _, k := range keys {
		s.markDone(now, k)
	}
	s.bound()
	return nil
}

// Release implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Release(_ context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(key, token)
	return nil
}

// ReleaseBatch implements BatchIdempotencyStore.
func (s *MemoryIdempotencyStore) ReleaseBatch(_ context.Context, keys []string, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.release(k, token)
	}
	return nil
}

// Len returns how many keys the store holds, done or claimed (expired
// ones not yet dropped included).
func (s *MemoryIdempotencyStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.done) + len(s.claims)
}

// clock returns the time in nanoseconds since the store's epoch.
func (s *MemoryIdempotencyStore) clock() int64 { return int64(s.now().Sub(s.epoch)) }

func (s *MemoryIdempotencyStore) claim(now int64, key, token string, lease time.Duration) (ClaimState, error) {
	if until, ok := s.done[key]; ok {
		if s.ttl <= 0 || now < until {
			return AlreadyDone, nil
		}
		s.forget(key) // expired; expire drops such keys first, this is a safeguard
	}
	c, ok := s.claims[key]
	if ok && now < c.until && c.token != token {
		return HeldByOther, nil
	}
	if !ok {
		if len(s.claims) >= s.sweepAt {
			s.sweep(now)
		}
		for s.over(1, len(key)) && s.head < len(s.order) {
			s.pop()
		}
		if s.over(1, len(key)) {
			if s.maxBytes > 0 {
				return 0, fmt.Errorf("client: memory idempotency store: %d live claims fill its bound of %d keys or %d bytes",
					len(s.claims), s.maxKeys, s.maxBytes)
			}
			return 0, fmt.Errorf("client: memory idempotency store: %d live claims fill its bound of %d keys", len(s.claims), s.maxKeys)
		}
		c.key = strings.Clone(key)
		s.keyBytes += int64(len(key))
	}
	c.token, c.until = token, now+int64(lease)
	s.claims[c.key] = c // c.key: the map keeps the store's copy, not the caller's string
	return Claimed, nil
}

// over reports whether the store would be past a bound with n more keys
// of b bytes in all.
func (s *MemoryIdempotencyStore) over(n, b int) bool {
	keys := len(s.done) + len(s.claims) + n
	return keys > s.maxKeys || s.maxBytes > 0 && int64(keys)*IdempotencyKeyCost+s.keyBytes+int64(b) > s.maxBytes
}

func (s *MemoryIdempotencyStore) markDone(now int64, key string) {
	// Each Done gets a later until than the last, so that order stays
	// sorted and a stale entry of order never matches its key's until.
	until := s.lastUntil + 1
	if s.ttl > 0 {
		until = max(until, now+int64(s.ttl))
	}
	s.lastUntil = until
	k := key
	if c, ok := s.claims[key]; ok {
		k = c.key
		delete(s.claims, key)
	} else if _, ok := s.done[key]; ok {
		k = strings.Clone(key) // done again: the map's key is replaced by this one
	} else {
		k = strings.Clone(key)
		s.keyBytes += int64(len(key))
	}
	s.done[k] = until
	s.order = append(s.order, keyExpiry{key: k, until: until})
}

func (s *MemoryIdempotencyStore) release(key, token string) {
	if c, ok := s.claims[key]; ok && c.token == token {
		delete(s.claims, key)
		s.keyBytes -= int64(len(key))
	}
}

// bound forgets the oldest done keys while the store is past a bound, or
// order holds too many stale entries (keys done again).
func (s *MemoryIdempotencyStore) bound() {
	for s.head < len(s.order) && (s.over(0, 0) ||
		len(s.order)-s.head > 2*s.maxKeys) {
		s.pop()
	}
}

// expire drops the done keys whose TTL ended by now, oldest first.
func (s *MemoryIdempotencyStore) expire(now int64) {
	if s.ttl <= 0 {
		return
	}
	for s.head < len(s.order) && s.order[s.head].until <= now {
		s.pop()
	}
}

// sweep drops the claims whose lease ended (a claimant that neither
// finished nor released), so that they cannot pile up, and sets the next
// sweep at twice the claims left: the sweeps cost O(1) per claim.
func (s *MemoryIdempotencyStore) sweep(now int64) {
	for k, c := range s.claims {
		if c.until <= now {
			delete(s.claims, k)
			s.keyBytes -= int64(len(k))
		}
	}
	s.sweepAt = max(2*len(s.claims), minSweep)
}

// pop removes the oldest entry of order, and its key unless a later Done
// renewed it, compacting order once a quarter of it is popped.
func (s *MemoryIdempotencyStore) pop() {
	e := s.order[s.head]
	s.order[s.head] = keyExpiry{}
	s.head++
	if until, ok := s.done[e.key]; ok && until == e.until {
		s.forget(e.key)
	}
	if s.head > len(s.order)/4 && s.head > 64 { // copies 3 entries per pop at most; keeps order's slack small
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}

// forget removes a done key.
func (s *MemoryIdempotencyStore) forget(key string) {
	delete(s.done, key)
	s.keyBytes -= int64(len(key))
}
