package client

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/message"
)

// ClaimState is what an IdempotencyStore answers to a claim of a key.
type ClaimState int

const (
	// Claimed: the key is the caller's until its lease ends (or the
	// caller's Done or Release): no other claim of it succeeds meanwhile.
	Claimed ClaimState = iota + 1
	// AlreadyDone: the key is recorded as handled; nothing was claimed.
	AlreadyDone
	// HeldByOther: another claim of the key (another token) has a lease
	// that has not ended; nothing was claimed.
	HeldByOther
)

func (s ClaimState) String() string {
	switch s {
	case Claimed:
		return "Claimed"
	case AlreadyDone:
		return "AlreadyDone"
	case HeldByOther:
		return "HeldByOther"
	}
	return "ClaimState(" + strconv.Itoa(int(s)) + ")"
}

// IdempotencyStore records which keys are being handled (claims, each with
// a lease) and which were handled (Done), for Idempotent. A store shared
// by the members of a group (a database table, a cache) keeps two of them
// from handling one key at once and lets each skip the others' handled
// keys; MemoryIdempotencyStore is one for a single process.
//
// A claim is made with a token, unique to the Idempotent call making it,
// so that a Release after the claim's lease ended cannot end the claim
// another caller made since. A claim outlives a crashed process only until
// its lease ends; then another caller may claim the key.
//
// Implementations must be safe for concurrent use, and each method must be
// atomic for its key (a conditional insert or update, a compare-and-set).
type IdempotencyStore interface {
	// Claim claims key for token until lease has passed: AlreadyDone if
	// key is recorded Done, HeldByOther if another token's claim of it
	// has not ended, else Claimed (a claim by the same token is renewed).
	Claim(ctx context.Context, key, token string, lease time.Duration) (ClaimState, error)
	// Done records key as handled, for as long as the store keeps
	// records, and ends any claim of it.
	Done(ctx context.Context, key string) error
	// Release ends token's claim of key if the claim is still token's; a
	// key recorded Done stays Done.
	Release(ctx context.Context, key, token string) error
}

// BatchIdempotencyStore is an IdempotencyStore that also takes the keys of
// a batch at once. Idempotent uses these methods when the store has them:
// a handler call then costs one ClaimBatch and one DoneBatch or
// ReleaseBatch, one round trip each for a database store. keys are
// distinct and not "". ClaimBatch returns one state per key, in order;
// each key's claim is atomic, the batch need not be. After a ClaimBatch
// error, Idempotent releases every key of the batch with token.
type BatchIdempotencyStore interface {
	IdempotencyStore
	ClaimBatch(ctx context.Context, keys []string, token string, lease time.Duration) ([]ClaimState, error)
	DoneBatch(ctx context.Context, keys []string) error
	ReleaseBatch(ctx context.Context, keys []string, token string) error
}

// DefaultClaimLease is how long an Idempotent claim lasts by default: the
// push consumer's default consume timeout, past which it counts a call as
// failed and delivers the messages again, so the lease covers every call
// the consumer lets finish.
const DefaultClaimLease = DefaultConsumeTimeout

// idempotencyRecordTimeout bounds each Done or Release after a handler
// call: it runs without the call's context (ended or not), so it needs a
// bound of its own, short next to a lease.
const idempotencyRecordTimeout = 10 * time.Second

// IdempotentOption configures Idempotent.
type IdempotentOption func(*idempotentOptions)

type idempotentOptions struct {
	key   func(*MessageExt) string
	lease time.Duration
	log   *slog.Logger
}

// WithIdempotencyKeyFunc makes Idempotent key messages with f instead of
// IdempotencyKeyOf. A message whose key is "" is always handled.
func WithIdempotencyKeyFunc(f func(*MessageExt) string) IdempotentOption {
	return func(o *idempotentOptions) { o.key = f }
}

// WithClaimLease sets how long Idempotent's claims last (default
// DefaultClaimLease; d <= 0 keeps it). Make it at least the push
// consumer's WithConsumeTimeout: a handler call still running when its
// lease ends may see another member claim and handle its keys. A shorter
// lease lets another member take over sooner the keys of a member that
// crashed while handling them.
func WithClaimLease(d time.Duration) IdempotentOption {
	return func(o *idempotentOptions) {
		if d > 0 {
			o.lease = d
		}
	}
}

// WithIdempotencyLogger makes Idempotent log the store's failures to l
// (default: discard, as Config.Logger's nil).
func WithIdempotencyLogger(l *slog.Logger) IdempotentOption {
	return func(o *idempotentOptions) { o.log = l }
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
// WithIdempotencyKeyFunc), recording keys in store:
//
//   - Each call claims the keys of its batch (each key once) for the lease
//     (WithClaimLease). Messages whose key is AlreadyDone are skipped and
//     count as handled; a batch all of whose messages are skipped is
//     ConsumeSuccess without calling h.
//   - If another member holds a claim of one of the keys (HeldByOther),
//     the call releases what it claimed and returns ConsumeRetryLater
//     without calling h: the batch comes again, by then Done or free. h
//     never gets part of a batch while another part waits, which keeps an
//     ordered consumer's order.
//   - Within one Idempotent handler, a call meeting a key that another of
//     its calls is handling waits for that call (until ctx ends: then
//     ConsumeRetryLater) instead, and then skips the key if it was done.
//   - h gets the claimed messages (and those whose key is ""). When it
//     returns ConsumeSuccess their keys are recorded Done, except those of
//     messages it settled apart (RetryAfter, DeadLetter), which are
//     released; on any other result, or a panic, they are all released so
//     that a redelivery handles them. The result is returned as it is.
//
// Done and Release run with ctx's values but not its cancellation, each
// bounded by a few seconds of its own: a call whose context ended (the
// consume timeout, Shutdown) still records what h handled. A store error
// on Claim makes the call ConsumeRetryLater without calling h. A Done or
// Release error is logged (WithIdempotencyLogger) and not returned: the
// messages were handled, and their claims end with their lease.
//
// Store calls use the batch methods when store is a BatchIdempotencyStore,
// else one call per key.
func Idempotent(store IdempotencyStore, h MessageHandler, opts ...IdempotentOption) MessageHandler {
	o := idempotentOptions{key: IdempotencyKeyOf, lease: DefaultClaimLease}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	w := &idempotent{store: store, h: h, opts: o, inflight: map[string]chan struct{}{},
		tokenPrefix: fmt.Sprintf("%016x-", rand.Uint64())}
	w.batch, _ = store.(BatchIdempotencyStore)
	return w.handle
}

// idempotent is the state of an Idempotent handler.
type idempotent struct {
	store IdempotencyStore
	batch BatchIdempotencyStore // store, if it takes batches
	h     MessageHandler
	opts  idempotentOptions

	tokenPrefix string        // random, so that tokens differ between processes
	calls       atomic.Uint64 // numbers the calls' tokens

	mu       sync.Mutex
	inflight map[string]chan struct{} // keys being handled -> their call's channel, closed when it ends
}

func (w *idempotent) handle(ctx context.Context, msgs []*MessageExt) ConsumeResult {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = w.opts.key(m)
	}
	local, err := w.claimLocal(ctx, keys)
	if err != nil {
		return ConsumeRetryLater
	}
	if len(local) == 0 { // no keys: nothing to skip or record
		return w.h(ctx, msgs)
	}
	defer w.releaseLocal(local)

	token := w.tokenPrefix + strconv.FormatUint(w.calls.Add(1), 10)
	states, err := w.claim(ctx, local, token)
	if err != nil {
		w.opts.log.Warn("idempotent: claiming keys failed; the batch will be retried", "keys", len(local), "err", err)
		w.release(ctx, local, token) // a failed batch may have claimed some
		return ConsumeRetryLater
	}
	claimed := make([]string, 0, len(local))
	state := make(map[string]ClaimState, len(local))
	held := false
	for i, k := range local {
		state[k] = states[i]
		switch states[i] {
		case Claimed:
			claimed = append(claimed, k)
		case HeldByOther:
			held = true
		}
	}
	if held {
		w.release(ctx, claimed, token)
		return ConsumeRetryLater
	}
	todo := make([]*MessageExt, 0, len(msgs))
	for i, m := range msgs {
		k := keys[i]
		if k == "" {
			todo = append(todo, m)
		} else if state[k] == Claimed {
			todo = append(todo, m)
			state[k] = AlreadyDone // later repeats of k in the batch are skipped
		}
	}
	if len(todo) == 0 {
		return ConsumeSuccess
	}
	finished := false
	defer func() {
		if !finished { // h panicked: let a redelivery handle them
			w.release(ctx, claimed, token)
		}
	}()
	r := w.h(ctx, todo)
	finished = true
	if r != ConsumeSuccess {
		w.release(ctx, claimed, token)
		return r
	}
	done, apart := splitSettled(todo, claimed, w.opts.key)
	w.done(ctx, done)
	w.release(ctx, apart, token) // retried or dead-lettered: not handled
	return r
}

// splitSettled splits the claimed keys of a successful call into those
// handled and those of messages the handler settled apart (RetryAfter,
// DeadLetter), which must stay unrecorded so that their redelivery (or a
// resend from the DLQ) is handled.
func splitSettled(todo []*MessageExt, claimed []string, key func(*MessageExt) string) (done, apart []string) {
	var settled map[string]bool
	for _, m := range todo {
		if m.settle != nil {
			if settled == nil {
				settled = map[string]bool{}
			}
			settled[key(m)] = true
		}
	}
	if settled == nil {
		return claimed, nil
	}
	for _, k := range claimed {
		if settled[k] {
			apart = append(apart, k)
		} else {
			done = append(done, k)
		}
	}
	return done, apart
}

// claim claims keys in the store, checking that it answers a known state
// per key.
func (w *idempotent) claim(ctx context.Context, keys []string, token string) ([]ClaimState, error) {
	var states []ClaimState
	if w.batch != nil {
		var err error
		if states, err = w.batch.ClaimBatch(ctx, keys, token, w.opts.lease); err != nil {
			return nil, err
		}
		if len(states) != len(keys) {
			return nil, fmt.Errorf("idempotency store answered %d claim states for %d keys", len(states), len(keys))
		}
	} else {
		states = make([]ClaimState, len(keys))
		for i, k := range keys {
			s, err := w.store.Claim(ctx, k, token, w.opts.lease)
			if err != nil {
				return nil, err
			}
			states[i] = s
		}
	}
	for i, s := range states {
		if s < Claimed || s > HeldByOther {
			return nil, fmt.Errorf("idempotency store answered %v for key %q", s, keys[i])
		}
	}
	return states, nil
}

// done records keys Done, bounded by its own timeout rather than ctx.
func (w *idempotent) done(ctx context.Context, keys []string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idempotencyRecordTimeout)
	defer cancel()
	var err error
	if w.batch != nil {
		err = w.batch.DoneBatch(ctx, keys)
	} else {
		for _, k := range keys {
			if e := w.store.Done(ctx, k); e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		w.opts.log.Error("idempotent: recording handled keys failed; they may be handled again once their claims end",
			"keys", len(keys), "err", err)
	}
}

// release ends token's claims of keys, bounded by its own timeout rather
// than ctx.
func (w *idempotent) release(ctx context.Context, keys []string, token string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idempotencyRecordTimeout)
	defer cancel()
	var err error
	if w.batch != nil {
		err = w.batch.ReleaseBatch(ctx, keys, token)
	} else {
		for _, k := range keys {
			if e := w.store.Release(ctx, k, token); e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		w.opts.log.Warn("idempotent: releasing keys failed; they stay claimed until their lease ends",
			"keys", len(keys), "err", err)
	}
}

// claimLocal marks the batch's keys as being handled by this call and
// returns them (each once, "" left out). If another call holds one, it
// takes none, waits for that call to end and starts over, so calls never
// wait for each other in a cycle.
func (w *idempotent) claimLocal(ctx context.Context, keys []string) ([]string, error) {
	for {
		claimed, wait := w.tryClaimLocal(keys)
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

// tryClaimLocal claims every key and returns them, or claims none and
// returns the channel of a key another call holds.
func (w *idempotent) tryClaimLocal(keys []string) ([]string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		if ch, ok := w.inflight[k]; ok && k != "" {
			return nil, ch
		}
	}
	var claimed []string
	var ch chan struct{} // one for all the call's keys
	for _, k := range keys {
		if _, ok := w.inflight[k]; k != "" && !ok {
			if ch == nil {
				ch = make(chan struct{})
			}
			w.inflight[k] = ch
			claimed = append(claimed, k)
		}
	}
	return claimed, nil
}

// releaseLocal ends this call's local claims, waking the calls waiting
// for them.
func (w *idempotent) releaseLocal(claimed []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.inflight[claimed[0]])
	for _, k := range claimed {
		delete(w.inflight, k)
	}
}
