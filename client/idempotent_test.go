package client

import (
	"context"
	"errors"
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
	}
	for i, s := range steps {
		assert.Equal(t, s.want, h(ctx, s.msgs), "step %d", i)
	}
	assert.Equal(t, [][]string{{"A/", "B/"}, {"C/"}, {"C/", "/"}, {"X/pay-1", "/"}, {"/"}}, r.calls)
}

// errStore fails Seen.
type errStore struct{ IdempotencyStore }

func (errStore) Seen(context.Context, string) (bool, error) { return false, errors.New("store down") }

// A store that cannot say makes the call ConsumeRetryLater without
// handling anything; a custom key function replaces the default.
func TestIdempotentStoreErrorAndKeyFunc(t *testing.T) {
	r := &recorder{}
	h := Idempotent(errStore{NewMemoryIdempotencyStore(time.Hour)}, r.handle)
	assert.Equal(t, ConsumeRetryLater, h(t.Context(), []*MessageExt{ext("A", "")}))
	assert.Empty(t, r.calls)

	byBody := Idempotent(NewMemoryIdempotencyStore(time.Hour), r.handle,
		WithIdempotencyKeyFunc(func(m *MessageExt) string { return string(m.Body[:1]) }))
	assert.Equal(t, ConsumeSuccess, byBody(t.Context(), []*MessageExt{ext("A", ""), ext("A", "x"), ext("B", "")}))
	assert.Equal(t, [][]string{{"A/", "B/"}}, r.calls)
}

// Concurrent calls with one key hand it over once; the others wait and
// skip it.
func TestIdempotentConcurrentSameKey(t *testing.T) {
	var handled atomic.Int32
	h := Idempotent(NewMemoryIdempotencyStore(time.Hour), func(context.Context, []*MessageExt) ConsumeResult {
		handled.Add(1)
		time.Sleep(5 * time.Millisecond)
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
	go slow(t.Context(), []*MessageExt{ext("S", "")})
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	assert.Equal(t, ConsumeRetryLater, slow(ctx, []*MessageExt{ext("S", "")}))
	close(release)
}

// The memory store forgets a key its TTL after Done (lazily, on the next
// call) and holds at most its key bound, dropping the oldest.
func TestMemoryIdempotencyStore(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewMemoryIdempotencyStore(time.Minute, WithMaxKeys(3))
	s.now = func() time.Time { return now }
	ctx := t.Context()
	seen := func(k string) bool {
		ok, err := s.Seen(ctx, k)
		require.NoError(t, err)
		return ok
	}
	require.NoError(t, s.Done(ctx, "a"))
	now = now.Add(30 * time.Second)
	require.NoError(t, s.Done(ctx, "b"))
	assert.True(t, seen("a"))
	assert.False(t, seen("c"))

	now = now.Add(30 * time.Second) // a's TTL is over
	assert.False(t, seen("a"))
	assert.True(t, seen("b"))
	assert.Equal(t, 1, s.Len(), "a was dropped")

	for _, k := range []string{"c", "d", "e"} {
		require.NoError(t, s.Done(ctx, k))
	}
	assert.Equal(t, 3, s.Len())
	assert.False(t, seen("b"), "the oldest went over the bound")
	assert.True(t, seen("c") && seen("d") && seen("e"))

	require.NoError(t, s.Done(ctx, "c")) // done again: its TTL starts over
	now = now.Add(59 * time.Second)
	assert.True(t, seen("c"))
	now = now.Add(time.Second)
	assert.False(t, seen("c"))
	assert.Zero(t, s.Len())

	forever := NewMemoryIdempotencyStore(0, WithMaxKeys(2))
	for range 10 { // keys done again do not pile up
		require.NoError(t, forever.Done(ctx, "x"))
	}
	assert.LessOrEqual(t, len(forever.order)-forever.head, 4)
	ok, err := forever.Seen(ctx, "x")
	require.NoError(t, err)
	assert.True(t, ok)
}
