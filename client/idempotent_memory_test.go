package client

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The memory store forgets a done key its TTL after Done (lazily, on the
// next call) and holds at most its key bound, dropping the oldest.
func TestMemoryIdempotencyStore(t *testing.T) {
	clk := newFakeClock()
	s := newClockedStore(clk, time.Minute, WithMaxKeys(3))
	ctx := t.Context()
	state := func(k string) ClaimState { return probe(t, s, k) }

	require.NoError(t, s.Done(ctx, "a"))
	clk.Add(30 * time.Second)
	require.NoError(t, s.Done(ctx, "b"))
	assert.Equal(t, AlreadyDone, state("a"))
	assert.Equal(t, Claimed, state("c"))

	clk.Add(30 * time.Second) // a's TTL is over
	assert.Equal(t, Claimed, state("a"))
	assert.Equal(t, AlreadyDone, state("b"))
	assert.Equal(t, 1, s.Len(), "a was dropped")

	require.NoError(t, s.DoneBatch(ctx, []string{"c", "d", "e"}))
	assert.Equal(t, []string{"c", "d", "e"}, heldKeys(s), "b, the oldest, went over the bound")
	assert.Equal(t, AlreadyDone, state("e"))

	clk.Add(time.Second)
	require.NoError(t, s.Done(ctx, "c")) // done again: its TTL starts over
	clk.Add(59 * time.Second)
	assert.Equal(t, AlreadyDone, state("c"))
	clk.Add(time.Second)
	assert.Equal(t, Claimed, state("c"))
	assert.Zero(t, s.Len())

	forever := NewMemoryIdempotencyStore(0, WithMaxKeys(2))
	for range 10 { // keys done again do not pile up
		require.NoError(t, forever.Done(ctx, "x"))
	}
	assert.LessOrEqual(t, len(forever.order)-forever.head, 4)
	assert.Equal(t, AlreadyDone, probe(t, forever, "x"))
}

// A claim holds its key against other tokens until its lease ends; its own
// token renews it; Release ends only the claim of its token; Done ends
// any claim and records the key.
func TestMemoryIdempotencyStoreClaims(t *testing.T) {
	clk := newFakeClock()
	s := newClockedStore(clk, time.Hour)
	ctx := t.Context()
	claim := func(key, token string) ClaimState {
		st, err := s.Claim(ctx, key, token, time.Minute)
		require.NoError(t, err)
		return st
	}

	assert.Equal(t, Claimed, claim("k", "A"))
	assert.Equal(t, HeldByOther, claim("k", "B"))
	clk.Add(30 * time.Second)
	assert.Equal(t, Claimed, claim("k", "A"), "renewed to 1m from now")
	clk.Add(59 * time.Second)
	assert.Equal(t, HeldByOther, claim("k", "B"))
	clk.Add(time.Second)
	assert.Equal(t, Claimed, claim("k", "B"), "A's lease ended")
	require.NoError(t, s.Release(ctx, "k", "A"))
	assert.Equal(t, HeldByOther, claim("k", "C"), "A's Release does not end B's claim")
	require.NoError(t, s.Release(ctx, "k", "B"))
	assert.Equal(t, Claimed, claim("k", "C"))
	require.NoError(t, s.Done(ctx, "k")) // by anyone
	assert.Equal(t, AlreadyDone, claim("k", "A"))
	require.NoError(t, s.ReleaseBatch(ctx, []string{"k"}, "C"))
	assert.Equal(t, AlreadyDone, claim("k", "A"), "a release leaves Done")
	assert.Equal(t, 1, s.Len())

	states, err := s.ClaimBatch(ctx, []string{"k", "m", "n"}, "D", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []ClaimState{AlreadyDone, Claimed, Claimed}, states)
	states, err = s.ClaimBatch(ctx, []string{"n", "o"}, "E", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []ClaimState{HeldByOther, Claimed}, states)
	assert.Equal(t, 4, s.Len())
}

// Claims are never forgotten for room: done keys are, and a claim past
// the bound with no done key left fails. Claims whose lease ended without
// a Done or Release are swept away.
func TestMemoryIdempotencyStoreClaimBound(t *testing.T) {
	clk := newFakeClock()
	ctx := t.Context()
	s := newClockedStore(clk, time.Hour, WithMaxKeys(2))
	require.NoError(t, s.Done(ctx, "d"))
	_, err := s.ClaimBatch(ctx, []string{"a", "b"}, "A", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, heldKeys(s), "the done key made room")
	_, err = s.Claim(ctx, "c", "A", time.Minute)
	require.ErrorContains(t, err, "2 live claims fill its bound of 2 keys")
	clk.Add(time.Minute)
	st, err := s.Claim(ctx, "a", "B", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, Claimed, st, "an ended lease is taken over")

	many := newClockedStore(clk, time.Hour)
	for i := range minSweep {
		_, err := many.Claim(ctx, fmt.Sprint(i), "A", time.Minute)
		require.NoError(t, err)
	}
	clk.Add(time.Minute) // every lease ends, none released
	_, err = many.Claim(ctx, "new", "B", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 1, many.Len(), "the ended claims were swept")
	assert.Equal(t, int64(len("new")), many.keyBytes)
}

// WithMaxBytes forgets the oldest done keys once the keys' stated cost
// passes it.
func TestMemoryIdempotencyStoreMaxBytes(t *testing.T) {
	ctx := t.Context()
	s := NewMemoryIdempotencyStore(0, WithMaxBytes(3*(IdempotencyKeyCost+9)))
	for i := range 5 {
		require.NoError(t, s.Done(ctx, fmt.Sprintf("key-%05d", i))) // 9 bytes each
	}
	assert.Equal(t, []string{"key-00002", "key-00003", "key-00004"}, heldKeys(s))
	assert.Equal(t, int64(27), s.keyBytes)
	long := "a key of 40 bytes pushes out two others."
	require.NoError(t, s.Done(ctx, long))
	assert.Equal(t, []string{long, "key-00004"}, heldKeys(s))
	assert.Equal(t, int64(49), s.keyBytes)
}

// heldKeys returns the keys s holds, done or claimed, sorted.
func heldKeys(s *MemoryIdempotencyStore) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := slices.Collect(maps.Keys(s.done))
	keys = slices.AppendSeq(keys, maps.Keys(s.claims))
	slices.Sort(keys)
	return keys
}

// The store copies the keys it keeps: a key that is a view of a buffer
// (as keys decoded from a pull response are) neither keeps the buffer
// alive nor changes when the buffer is reused.
func TestMemoryIdempotencyStoreCopiesKeys(t *testing.T) {
	ctx := t.Context()
	s := NewMemoryIdempotencyStore(time.Hour)
	buf := []byte("claim-1done-1")
	claimKey, doneKey := unsafe.String(&buf[0], 7), unsafe.String(&buf[7], 6)
	st, err := s.Claim(ctx, claimKey, "A", time.Minute)
	require.NoError(t, err)
	require.Equal(t, Claimed, st)
	require.NoError(t, s.Done(ctx, doneKey))
	copy(buf, "XXXXXXXXXXXXX") // the response's buffer is reused
	assert.Equal(t, HeldByOther, probe(t, s, "claim-1"))
	assert.Equal(t, AlreadyDone, probe(t, s, "done-1"))
	require.NoError(t, s.Done(ctx, "claim-1"))
	assert.Equal(t, AlreadyDone, probe(t, s, "claim-1"))
}

// idempotencyKeys returns n distinct keys of 32 bytes, the length of a
// UNIQ_KEY.
func idempotencyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("7F0000010A6818B4AAC2%012X", i)
	}
	return keys
}

// A done key costs at most IdempotencyKeyCost bytes of heap plus its own
// length, measured as the heap a store holds per key: 100,000 keys in a
// store that never forgets, and a store bounded at 50,000 keys after
// 150,000 went through it (its map and expiry queue in steady state).
func TestMemoryIdempotencyStoreCostPerKey(t *testing.T) {
	for _, c := range []struct{ keys, bound int }{{100_000, DefaultIdempotencyMaxKeys}, {150_000, 50_000}} {
		keys := idempotencyKeys(c.keys)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewMemoryIdempotencyStore(time.Hour, WithMaxKeys(c.bound))
		for _, k := range keys {
			st, err := s.Claim(t.Context(), k, "A", time.Minute)
			require.NoError(t, err)
			require.Equal(t, Claimed, st)
			require.NoError(t, s.Done(t.Context(), k))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perKey := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(s.Len())
		t.Logf("%d keys through a store of %d: %.1f bytes of heap per 32-byte key held", c.keys, s.Len(), perKey)
		assert.Equal(t, min(c.keys, c.bound), s.Len())
		assert.LessOrEqual(t, perKey, float64(IdempotencyKeyCost+32))
		assert.Greater(t, perKey, 32.0, "the keys are copied")
		runtime.KeepAlive(keys)
		runtime.KeepAlive(s)
	}
}

// BenchmarkMemoryIdempotencyStore claims and records 32-byte keys, as
// Idempotent does per key, in a store bounded at 100,000 keys (so the
// oldest are forgotten as it goes), and reports the heap each key held.
func BenchmarkMemoryIdempotencyStore(b *testing.B) {
	const bound = 100_000
	keys := idempotencyKeys(1 << 18)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewMemoryIdempotencyStore(time.Hour, WithMaxKeys(bound))
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		i++
		if _, err := s.Claim(ctx, k, "A", time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := s.Done(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(s.Len()), "heapB/key")
	runtime.KeepAlive(keys)
}
