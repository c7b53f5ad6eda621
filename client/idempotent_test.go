package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// ext is a delivered message with UNIQ_KEY uniq and, if idem is set, an
// IDEMPOTENCY_KEY.
func ext(uniq, idem string) *MessageExt {
	m := &message.Message{}
	if idem != "" {
		m.Properties = message.Properties{{Key: message.PropIdempotencyKey, Value: idem}}
	}
	return &MessageExt{Message: m, UniqKey: uniq, Body: []byte(uniq + "/" + idem)}
}

// recorder is a handler that records what it is given and answers with
// result(call number, 1-based).
type recorder struct {
	mu     sync.Mutex
	calls  [][]string // bodies per call
	result func(n int) ConsumeResult
}

func (r *recorder) handle(_ context.Context, msgs []*MessageExt) ConsumeResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, string(m.Body))
	}
	r.calls = append(r.calls, bodies)
	if r.result == nil {
		return ConsumeSuccess
	}
	return r.result(len(r.calls))
}

// fakeClock is a settable clock for the memory store.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newClockedStore returns a memory store that reads clk.
func newClockedStore(clk *fakeClock, ttl time.Duration, opts ...MemoryStoreOption) *MemoryIdempotencyStore {
	s := NewMemoryIdempotencyStore(ttl, opts...)
	s.now, s.epoch = clk.Now, clk.Now()
	return s
}

// probe claims key with a token of its own and releases the claim at
// once, returning what the claim answered: what another member would see.
func probe(t *testing.T, s IdempotencyStore, key string) ClaimState {
	t.Helper()
	st, err := s.Claim(t.Context(), key, "probe", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(t.Context(), key, "probe"))
	return st
}

// Each key is handed over once among the calls that succeeded: repeats
// across and within batches are skipped, a failed call records nothing,
// an IDEMPOTENCY_KEY wins over the UNIQ_KEY, a message without a key is
// always handled.
func TestIdempotentHandlesEachKeyOnce(t *testing.T) {
	r := &recorder{result: func(n int) ConsumeResult {
		if n == 2 {
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	}}
	h := Idempotent(NewMemoryIdempotencyStore(time.Hour), r.handle)
	ctx := t.Context()
	steps := []struct {
		msgs []*MessageExt
		want ConsumeResult
	}{
		{[]*MessageExt{ext("A", ""), ext("B", ""), ext("A", "")}, ConsumeSuccess}, // call 1: A, B
		{[]*MessageExt{ext("A", ""), ext("C", "")}, ConsumeRetryLater},            // call 2: C fails
		{[]*MessageExt{ext("A", ""), ext("B", "")}, ConsumeSuccess},               // all done: no call
		{[]*MessageExt{ext("C", ""), ext("", "")}, ConsumeSuccess},                // call 3: C again, and the keyless one
		{[]*MessageExt{ext("X", "pay-1"), ext("Y", "pay-1"), ext("", "")}, ConsumeSuccess},
		{[]*MessageExt{ext("Z", "pay-1"), ext("", "")}, ConsumeSuccess},
		{[]*MessageExt{ext("", "")}, ConsumeSuccess}, // no keys at all: handled as it is
	}
	for i, s := range steps {
		assert.Equal(t, s.want, h(ctx, s.msgs), "step %d", i)
	}
	assert.Equal(t, [][]string{{"A/", "B/"}, {"C/"}, {"C/", "/"}, {"X/pay-1", "/"}, {"/"}, {"/"}}, r.calls)
}

// errStore fails Claim.
type errStore struct{ IdempotencyStore }

func (errStore) Claim(context.Context, string, string, time.Duration) (ClaimState, error) {
	return 0, errors.New("store down")
}

// badBatchStore answers ClaimBatch with the states it is given.
type badBatchStore struct {
	*MemoryIdempotencyStore
	states []ClaimState
}

func (s badBatchStore) ClaimBatch(context.Context, []string, string, time.Duration) ([]ClaimState, error) {
	return s.states, nil
}

// A store that cannot say, or says something that is not a state per key,
// makes the call ConsumeRetryLater without handling anything; a custom key
// function replaces the default.
func TestIdempotentStoreErrorAndKeyFunc(t *testing.T) {
	r := &recorder{}
	two := []*MessageExt{ext("A", ""), ext("B", "")}
	for name, s := range map[string]IdempotencyStore{
		"error":      errStore{NewMemoryIdempotencyStore(time.Hour)},
		"too few":    badBatchStore{NewMemoryIdempotencyStore(time.Hour), []ClaimState{Claimed}},
		"zero state": badBatchStore{NewMemoryIdempotencyStore(time.Hour), []ClaimState{Claimed, 0}},
		"unknown":    badBatchStore{NewMemoryIdempotencyStore(time.Hour), []ClaimState{HeldByOther + 1, Claimed}},
	} {
		assert.Equal(t, ConsumeRetryLater, Idempotent(s, r.handle)(t.Context(), two), name)
	}
	assert.Empty(t, r.calls)

	byBody := Idempotent(NewMemoryIdempotencyStore(time.Hour), r.handle,
		WithIdempotencyKeyFunc(func(m *MessageExt) string { return string(m.Body[:1]) }))
	assert.Equal(t, ConsumeSuccess, byBody(t.Context(), []*MessageExt{ext("A", ""), ext("A", "x"), ext("B", "")}))
	assert.Equal(t, [][]string{{"A/", "B/"}}, r.calls)
}

// Concurrent calls of one handler with one key hand it over once; the
// others wait and skip it.
func TestIdempotentConcurrentSameKey(t *testing.T) {
	var handled atomic.Int32
	h := Idempotent(NewMemoryIdempotencyStore(time.Hour), func(context.Context, []*MessageExt) ConsumeResult {
		handled.Add(1)
		time.Sleep(5 * time.Millisecond) // lets the others arrive while it holds the keys
		return ConsumeSuccess
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			assert.Equal(t, ConsumeSuccess, h(t.Context(), []*MessageExt{ext("K", ""), ext("L", "")}))
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), handled.Load())

	// A waiter gives up with its context.
	started, release := make(chan struct{}), make(chan struct{})
	slow := Idempotent(NewMemoryIdempotencyStore(time.Hour), func(context.Context, []*MessageExt) ConsumeResult {
		close(started)
		<-release
		return ConsumeSuccess
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		slow(t.Context(), []*MessageExt{ext("S", "")})
	}()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.Equal(t, ConsumeRetryLater, slow(ctx, []*MessageExt{ext("S", "")}))
	close(release)
	<-done
}

// blockingHandler handles a call by reporting it on entered and returning
// what it then reads from results.
type blockingHandler struct {
	entered chan []string // the UNIQ_KEYs of each call
	results chan ConsumeResult
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{entered: make(chan []string), results: make(chan ConsumeResult)}
}

func (b *blockingHandler) handle(_ context.Context, msgs []*MessageExt) ConsumeResult {
	var keys []string
	for _, m := range msgs {
		keys = append(keys, m.UniqKey)
	}
	b.entered <- keys
	return <-b.results
}

// call runs h in a goroutine; its result arrives on the channel.
func call(ctx context.Context, h MessageHandler, msgs ...*MessageExt) <-chan ConsumeResult {
	out := make(chan ConsumeResult, 1)
	go func() { out <- h(ctx, msgs) }()
	return out
}

// Two processes (two Idempotent handlers over one store): while A's lease
// on K is live, B does not handle K (nor the rest of its batch) and leaves
// nothing claimed; once the lease ends B takes K, and A's late Release
// does not end B's claim; B's Done makes A skip K.
func TestIdempotentTwoProcessesLease(t *testing.T) {
	clk := newFakeClock()
	store := newClockedStore(clk, time.Hour)
	a, b := newBlockingHandler(), newBlockingHandler()
	ha := Idempotent(store, a.handle, WithClaimLease(time.Minute))
	hb := Idempotent(store, b.handle, WithClaimLease(time.Minute))
	ctx := t.Context()

	resA := call(ctx, ha, ext("K", ""))
	assert.Equal(t, []string{"K"}, <-a.entered)

	assert.Equal(t, ConsumeRetryLater, hb(ctx, []*MessageExt{ext("L", ""), ext("K", "")}), "K is A's")
	assert.Equal(t, HeldByOther, probe(t, store, "K"))
	assert.Equal(t, Claimed, probe(t, store, "L"), "B released L")

	clk.Add(59 * time.Second)
	assert.Equal(t, ConsumeRetryLater, hb(ctx, []*MessageExt{ext("K", "")}), "A's lease is still live")

	clk.Add(time.Second) // A's lease ends: A may have crashed
	resB := call(ctx, hb, ext("K", ""))
	assert.Equal(t, []string{"K"}, <-b.entered)

	a.results <- ConsumeRetryLater // A fails late and releases with its own token
	assert.Equal(t, ConsumeRetryLater, <-resA)
	assert.Equal(t, HeldByOther, probe(t, store, "K"), "B's claim survives A's Release")

	b.results <- ConsumeSuccess
	assert.Equal(t, ConsumeSuccess, <-resB)
	assert.Equal(t, AlreadyDone, probe(t, store, "K"))
	assert.Equal(t, ConsumeSuccess, ha(ctx, []*MessageExt{ext("K", "")}), "A skips K: no call entered")
}

// Many calls of two processes over shared keys, retried until they
// succeed: no key is ever in two handler calls at once, and each is
// handled exactly once.
func TestIdempotentTwoProcessesConcurrent(t *testing.T) {
	store := NewMemoryIdempotencyStore(time.Hour)
	var mu sync.Mutex
	active, handled := map[string]int{}, map[string]int{}
	h := func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		for _, m := range msgs {
			active[m.UniqKey]++
			handled[m.UniqKey]++
			assert.Equal(t, 1, active[m.UniqKey], "key %s handled twice at once", m.UniqKey)
		}
		mu.Unlock()
		time.Sleep(100 * time.Microsecond) // hold the keys a while
		mu.Lock()
		for _, m := range msgs {
			active[m.UniqKey]--
		}
		mu.Unlock()
		return ConsumeSuccess
	}
	procs := []MessageHandler{Idempotent(store, h), Idempotent(store, h)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				batch := []*MessageExt{ext(fmt.Sprint("k", (g+i)%10), ""), ext(fmt.Sprint("k", (g*i)%10), "")}
				for procs[g%2](t.Context(), batch) != ConsumeSuccess {
					runtime.Gosched() // the other process holds a key: as a redelivery would, come again
				}
			}
		})
	}
	wg.Wait()
	for k, n := range handled {
		assert.Equal(t, 1, n, "key %s", k)
	}
	assert.Len(t, handled, 10)
}

// A failed or panicking call releases its claims: another process handles
// the redelivery at once, without waiting for the lease.
func TestIdempotentReleaseOnFailure(t *testing.T) {
	store := NewMemoryIdempotencyStore(time.Hour)
	fail := Idempotent(store, func(context.Context, []*MessageExt) ConsumeResult { return ConsumeRetryLater })
	panics := Idempotent(store, func(context.Context, []*MessageExt) ConsumeResult { panic("boom") })
	r := &recorder{}
	other := Idempotent(store, r.handle)

	assert.Equal(t, ConsumeRetryLater, fail(t.Context(), []*MessageExt{ext("F", "")}))
	assert.Equal(t, Claimed, probe(t, store, "F"))
	assert.Panics(t, func() { panics(t.Context(), []*MessageExt{ext("P", "")}) })
	assert.Equal(t, Claimed, probe(t, store, "P"))

	assert.Equal(t, ConsumeSuccess, other(t.Context(), []*MessageExt{ext("F", ""), ext("P", "")}))
	assert.Equal(t, [][]string{{"F/", "P/"}}, r.calls)
	assert.Equal(t, 2, store.Len(), "only the two done keys are held")
}

// A message the handler settles apart (RetryAfter, DeadLetter) in a
// successful call is not handled: its key stays unrecorded, so its
// redelivery (or a resend from the DLQ) is handled, while the rest of the
// batch is recorded Done.
func TestIdempotentSettledApartIsNotDone(t *testing.T) {
	store := NewMemoryIdempotencyStore(time.Hour)
	h := Idempotent(store, func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			switch m.UniqKey {
			case "R":
				m.RetryAfter(time.Second)
			case "D":
				m.DeadLetter("bad payload")
			}
		}
		return ConsumeSuccess
	})
	assert.Equal(t, ConsumeSuccess, h(t.Context(), []*MessageExt{ext("A", ""), ext("R", ""), ext("D", "")}))
	assert.Equal(t, AlreadyDone, probe(t, store, "A"))
	assert.Equal(t, Claimed, probe(t, store, "R"), "retried: its redelivery must be handled")
	assert.Equal(t, Claimed, probe(t, store, "D"), "dead-lettered: a resend must be handled")
}

// ctxStore refuses every call whose context has ended, as a database
// client does, and records the last Done context.
type ctxStore struct {
	*MemoryIdempotencyStore
	mu       sync.Mutex
	doneCtxs []context.Context
}

func (s *ctxStore) Claim(ctx context.Context, key, token string, lease time.Duration) (ClaimState, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.MemoryIdempotencyStore.Claim(ctx, key, token, lease)
}

func (s *ctxStore) Done(ctx context.Context, key string) error {
	s.mu.Lock()
	s.doneCtxs = append(s.doneCtxs, ctx)
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.Done(ctx, key)
}

func (s *ctxStore) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.Release(ctx, key, token)
}

func (s *ctxStore) ClaimBatch(ctx context.Context, keys []string, token string, lease time.Duration) ([]ClaimState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.MemoryIdempotencyStore.ClaimBatch(ctx, keys, token, lease)
}

func (s *ctxStore) DoneBatch(ctx context.Context, keys []string) error {
	s.mu.Lock()
	s.doneCtxs = append(s.doneCtxs, ctx)
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.DoneBatch(ctx, keys)
}

func (s *ctxStore) ReleaseBatch(ctx context.Context, keys []string, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.ReleaseBatch(ctx, keys, token)
}

type ctxKey struct{}

// A handler whose context ends as it returns (the consume timeout, a
// Shutdown) still gets its keys recorded Done, or released when it
// failed: Done and Release do not take the call's cancellation, but keep
// its values and get a deadline of their own.
func TestIdempotentRecordsAfterContextEnds(t *testing.T) {
	for _, batch := range []bool{true, false} {
		store := &ctxStore{MemoryIdempotencyStore: NewMemoryIdempotencyStore(time.Hour)}
		var s IdempotencyStore = store
		if !batch {
			s = perKeyStore{store}
		}
		result := ConsumeSuccess
		var handled []string
		h := Idempotent(s, func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
			handled = append(handled, msgs[0].UniqKey)
			ctx.Value(ctxKey{}).(context.CancelFunc)() // the call's context ends as it returns
			return result
		})
		run := func(key string) ConsumeResult {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			return h(context.WithValue(ctx, ctxKey{}, cancel), []*MessageExt{ext(key, "")})
		}

		assert.Equal(t, ConsumeSuccess, run("D"))
		assert.Equal(t, AlreadyDone, probe(t, store, "D"), "recorded although the context ended (batch %v)", batch)
		require.Len(t, store.doneCtxs, 1)
		dctx := store.doneCtxs[0]
		assert.NotNil(t, dctx.Value(ctxKey{}), "the call's values are kept")
		deadline, ok := dctx.Deadline()
		assert.True(t, ok, "Done has a bound of its own")
		assert.WithinDuration(t, time.Now().Add(idempotencyRecordTimeout), deadline, idempotencyRecordTimeout)

		result = ConsumeRetryLater
		assert.Equal(t, ConsumeRetryLater, run("R"))
		assert.Equal(t, Claimed, probe(t, store, "R"), "released although the context ended (batch %v)", batch)
		assert.Equal(t, []string{"D", "R"}, handled)
	}
}

// countingStore counts the calls of each method of the store it wraps.
type countingStore struct {
	*MemoryIdempotencyStore
	mu sync.Mutex
	n  map[string]int
}

func newCountingStore() *countingStore {
	return &countingStore{MemoryIdempotencyStore: NewMemoryIdempotencyStore(time.Hour), n: map[string]int{}}
}

func (s *countingStore) count(m string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[m]++
}

func (s *countingStore) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.n
	s.n = map[string]int{}
	return out
}

func (s *countingStore) Claim(ctx context.Context, key, token string, lease time.Duration) (ClaimState, error) {
	s.count("Claim")
	return s.MemoryIdempotencyStore.Claim(ctx, key, token, lease)
}

func (s *countingStore) Done(ctx context.Context, key string) error {
	s.count("Done")
	return s.MemoryIdempotencyStore.Done(ctx, key)
}

func (s *countingStore) Release(ctx context.Context, key, token string) error {
	s.count("Release")
	return s.MemoryIdempotencyStore.Release(ctx, key, token)
}

func (s *countingStore) ClaimBatch(ctx context.Context, keys []string, token string, lease time.Duration) ([]ClaimState, error) {
	s.count("ClaimBatch")
	return s.MemoryIdempotencyStore.ClaimBatch(ctx, keys, token, lease)
}

func (s *countingStore) DoneBatch(ctx context.Context, keys []string) error {
	s.count("DoneBatch")
	return s.MemoryIdempotencyStore.DoneBatch(ctx, keys)
}

func (s *countingStore) ReleaseBatch(ctx context.Context, keys []string, token string) error {
	s.count("ReleaseBatch")
	return s.MemoryIdempotencyStore.ReleaseBatch(ctx, keys, token)
}

// perKeyStore hides the batch methods of the store it holds.
type perKeyStore struct{ IdempotencyStore }

// A store with batch methods gets one ClaimBatch and one DoneBatch (or
// ReleaseBatch) per handler call, whatever the batch's size; one without
// gets a call per distinct key.
func TestIdempotentBatchStore(t *testing.T) {
	batch := func(keys ...string) []*MessageExt {
		var msgs []*MessageExt
		for _, k := range keys {
			msgs = append(msgs, ext(k, ""))
		}
		return msgs
	}
	result := ConsumeSuccess
	h := func(context.Context, []*MessageExt) ConsumeResult { return result }

	s := newCountingStore()
	bh := Idempotent(s, h)
	assert.Equal(t, ConsumeSuccess, bh(t.Context(), batch("A", "B", "A", "", "C")))
	assert.Equal(t, map[string]int{"ClaimBatch": 1, "DoneBatch": 1}, s.counts())
	assert.Equal(t, ConsumeSuccess, bh(t.Context(), batch("A", "B", "C")), "all done")
	assert.Equal(t, map[string]int{"ClaimBatch": 1}, s.counts())
	result = ConsumeRetryLater
	assert.Equal(t, ConsumeRetryLater, bh(t.Context(), batch("D", "E", "A")))
	assert.Equal(t, map[string]int{"ClaimBatch": 1, "ReleaseBatch": 1}, s.counts())

	result = ConsumeSuccess
	s = newCountingStore()
	ph := Idempotent(perKeyStore{s}, h)
	assert.Equal(t, ConsumeSuccess, ph(t.Context(), batch("A", "B", "A", "", "C")))
	assert.Equal(t, map[string]int{"Claim": 3, "Done": 3}, s.counts())
}

func TestClaimStateString(t *testing.T) {
	for s, want := range map[ClaimState]string{Claimed: "Claimed", AlreadyDone: "AlreadyDone", HeldByOther: "HeldByOther", 9: "ClaimState(9)"} {
		assert.Equal(t, want, s.String())
	}
}

// BenchmarkIdempotent runs batches of 32 new keys through an Idempotent
// handler over a memory store: the wrapper's cost per message.
func BenchmarkIdempotent(b *testing.B) {
	keys := idempotencyKeys(1 << 16)
	msgs := make([]*MessageExt, len(keys))
	for i, k := range keys {
		msgs[i] = &MessageExt{UniqKey: k}
	}
	h := Idempotent(NewMemoryIdempotencyStore(time.Hour, WithMaxKeys(1<<15)),
		func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i+32 > len(msgs) {
			i = 0 // the store forgot these: they are handled again
		}
		if h(ctx, msgs[i:i+32]) != ConsumeSuccess {
			b.Fatal("not handled")
		}
		i += 32
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/msg")
}
