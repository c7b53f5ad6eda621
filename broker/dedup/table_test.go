package dedup

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
)

// testTable is a dedup table with a 10 s window on a settable clock (ms)
// and a settable dispatch position.
type testTable struct {
	*Table
	mu         sync.Mutex
	now        int64
	dispatchAt atomic.Int64
}

func newTestTable() *testTable {
	tt := &testTable{now: 1_700_000_000_000}
	tt.Table = newTable(10*time.Second, tt.clock, tt.dispatchAt.Load)
	return tt
}

// kid is the id of key k of topic T.
func (tt *testTable) kid(k string) keyID { return idOf(tt.Table, topicPart(tt.Table, "T"), k) }

// claimed reports whether a send in flight holds key k of topic T.
func (tt *testTable) claimed(k string) bool {
	tt.Table.mu.Lock()
	defer tt.Table.mu.Unlock()
	s, ok := tt.keys[tt.kid(k)]
	return ok && s.fl != nil
}

// claims counts the keys claimed by sends in flight.
func (tt *testTable) claims() int {
	tt.Table.mu.Lock()
	defer tt.Table.mu.Unlock()
	return len(tt.keys) - tt.recent
}

func (tt *testTable) clock() time.Time {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return time.UnixMilli(tt.now)
}

func (tt *testTable) advance(d time.Duration) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.now += d.Milliseconds()
}

// claim claims keys of topic T and returns the flight and results.
func (tt *testTable) claim(t *testing.T, ctx context.Context, keys ...string) (*Flight, []Result, error) {
	t.Helper()
	out := make([]Result, len(keys))
	fl, err := claimKeys(ctx, tt.Table, "T", keys, out)
	return fl, out, err
}

// stored lands fl as stored at now with physical offsets from phys on.
func (tt *testTable) stored(fl *Flight, out []Result, phys int64) {
	var res []store.PutResult
	for range fl.stores {
		res = append(res, store.PutResult{UniqKey: "u", PhysicalOffset: phys, StoreTimestamp: tt.clock().UnixMilli()})
		phys++
	}
	tt.land(fl, res, out)
}

// A send of a key another send holds in flight waits for it, holding no
// claim meanwhile, and is a duplicate if that one stored, else stores.
func TestDedupWaitsForFlight(t *testing.T) {
	tt := newTestTable()
	fl1, out1, err := tt.claim(t, t.Context(), "A")
	require.NoError(t, err)

	got := make(chan []Result)
	go func() {
		fl2, out2, err := tt.claim(t, t.Context(), "B", "A")
		assert.NoError(t, err)
		assert.Equal(t, []int32{markNew, markDup}, fl2.marks)
		tt.stored(fl2, out2, 100)
		got <- out2
	}()
	require.Eventually(t, func() bool {
		tt.Table.mu.Lock()
		defer tt.Table.mu.Unlock()
		return fl1.done != nil
	}, 5*time.Second, time.Millisecond, "the second send waits")
	assert.False(t, tt.claimed("B"), "a waiting send holds no claim")

	tt.stored(fl1, out1, 7)
	out2 := <-got
	assert.Equal(t, Result{PutResult: store.PutResult{UniqKey: "u", PhysicalOffset: 100, StoreTimestamp: tt.now}}, out2[0])
	assert.True(t, out2[1].Duplicate)
	assert.Equal(t, int64(7), out2[1].PhysicalOffset)

	// A flight that stores nothing releases its keys: the waiter stores.
	fl3, _, err := tt.claim(t, t.Context(), "C")
	require.NoError(t, err)
	go func() {
		fl4, _, err := tt.claim(t, t.Context(), "C")
		assert.NoError(t, err)
		assert.Equal(t, []int32{markNew}, fl4.marks)
		tt.land(fl4, nil, make([]Result, 1))
		got <- nil
	}()
	require.Eventually(t, func() bool {
		tt.Table.mu.Lock()
		defer tt.Table.mu.Unlock()
		return fl3.done != nil
	}, 5*time.Second, time.Millisecond)
	tt.land(fl3, nil, make([]Result, 1))
	<-got
	assert.Equal(t, 2, tt.Recent(), "A and B; C was never stored")

	// A waiter gives up with its context.
	fl5, _, err := tt.claim(t, t.Context(), "D")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, _, err = tt.claim(t, ctx, "D")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	tt.land(fl5, nil, make([]Result, 1))
}

// look claims keys and lands nothing (the claims go), returning the
// results: a duplicate's is set.
func (tt *testTable) look(t *testing.T, keys ...string) []Result {
	t.Helper()
	fl, out, err := tt.claim(t, t.Context(), keys...)
	require.NoError(t, err)
	tt.land(fl, nil, out)
	return out
}

// A landed key is remembered until the dispatcher has passed its record
// (the index holds it then), dropped in the order keys landed, and counts
// within the window only; a claim in flight is never dropped.
func TestDedupRecentUntilIndexed(t *testing.T) {
	tt := newTestTable()
	fl, out, err := tt.claim(t, t.Context(), "A", "B")
	require.NoError(t, err)
	tt.stored(fl, out, 10) // at 10 and 11
	inflight, _, err := tt.claim(t, t.Context(), "F")
	require.NoError(t, err)
	fl, out, err = tt.claim(t, t.Context(), "C")
	require.NoError(t, err)
	tt.stored(fl, out, 5) // landed after A and B, stored before them
	assert.Equal(t, 3, tt.Recent())

	tt.dispatchAt.Store(11) // past A and C, not B
	out = tt.look(t, "A", "B", "C")
	assert.False(t, out[0].Duplicate, "A is left to the index")
	assert.True(t, out[1].Duplicate, "B is not dispatched yet")
	assert.Equal(t, int64(11), out[1].PhysicalOffset)
	assert.True(t, out[2].Duplicate, "C waits for B, landed before it")
	assert.Equal(t, 2, tt.Recent())

	tt.advance(9999 * time.Millisecond)
	assert.True(t, tt.look(t, "B")[0].Duplicate, "within the window")
	tt.advance(time.Millisecond)
	assert.False(t, tt.look(t, "B")[0].Duplicate, "the window is over")
	assert.Equal(t, 1, tt.Recent(), "an expired key goes when claimed")

	fl, out, err = tt.claim(t, t.Context(), "B") // a new original, at 20
	require.NoError(t, err)
	tt.stored(fl, out, 20)
	tt.dispatchAt.Store(12) // past the first B and C: the second B stays
	out = tt.look(t, "B")
	assert.True(t, out[0].Duplicate)
	assert.Equal(t, int64(20), out[0].PhysicalOffset)
	assert.Equal(t, 1, tt.Recent())

	tt.dispatchAt.Store(21)
	tt.look(t, "Y")
	assert.Zero(t, tt.Recent())
	assert.Empty(t, tt.landed, "the landing order is reset once empty")
	assert.True(t, tt.claimed("F"), "F, in flight, is kept")
	tt.stored(inflight, make([]Result, 1), 30)
	out = tt.look(t, "F")
	assert.True(t, out[0].Duplicate)
	assert.Equal(t, int64(30), out[0].PhysicalOffset)
}

// A claimed key found in the index is a duplicate: not stored, its claim
// held until the send lands (a send waiting for it then looks again), and
// an earlier message of the batch it repeats gets its result.
func TestDedupFoundInIndex(t *testing.T) {
	tt := newTestTable()
	fl, out, err := tt.claim(t, t.Context(), "A", "N", "A")
	require.NoError(t, err)
	require.Equal(t, []int32{markNew, markNew, 0}, fl.marks)
	orig := store.PutResult{MsgID: "M", UniqKey: "A", PhysicalOffset: 3, StoreTimestamp: tt.now - 1000}
	fl.found(0, orig, out)
	assert.Equal(t, 1, fl.stores)

	waited := make(chan *Flight)
	go func() {
		fl2, _, err := tt.claim(t, t.Context(), "A")
		assert.NoError(t, err)
		waited <- fl2
	}()
	require.Eventually(t, func() bool {
		tt.Table.mu.Lock()
		defer tt.Table.mu.Unlock()
		return fl.done != nil
	}, 5*time.Second, time.Millisecond, "a found key stays claimed")

	tt.stored(fl, out, 10)
	assert.Equal(t, Result{PutResult: orig, Duplicate: true}, out[0])
	assert.Equal(t, Result{PutResult: orig, Duplicate: true}, out[2])
	assert.False(t, out[1].Duplicate)
	assert.Equal(t, int64(10), out[1].PhysicalOffset)
	fl2 := <-waited
	assert.Equal(t, []int32{markNew}, fl2.marks, "not remembered as recent: the waiter looks in the index")
	assert.Equal(t, 1, tt.Recent(), "N only")
	tt.land(fl2, nil, make([]Result, 1))

	// A send of found keys only stores nothing.
	fl, out, err = tt.claim(t, t.Context(), "B", "B")
	require.NoError(t, err)
	fl.found(0, orig, out)
	assert.Zero(t, fl.stores)
	tt.land(fl, nil, out)
	assert.Equal(t, []bool{true, true}, []bool{out[0].Duplicate, out[1].Duplicate})
	assert.Equal(t, orig, out[1].PutResult)
	assert.Zero(t, tt.claims())
}

// A key's id: the bytes of a UNIQ_KEY in upper-case hex, else a hash;
// the same for a string and its bytes; XOR the topic's hash.
func TestDedupID(t *testing.T) {
	tt := newTestTable()
	u := "0A1B2C3D4E5F60718293A4B5C6D7E8F9"
	assert.Equal(t, keyID{0x0A, 0x1B, 0x2C, 0x3D, 0x4E, 0x5F, 0x60, 0x71, 0x82, 0x93, 0xA4, 0xB5, 0xC6, 0xD7, 0xE8, 0xF9}, keyPart(tt.Table, u))
	assert.Equal(t, keyPart(tt.Table, u), keyPart(tt.Table, []byte(u)))
	lower := "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	assert.NotEqual(t, keyPart(tt.Table, u), keyPart(tt.Table, lower), "lower case is another key")
	assert.Equal(t, keyPart(tt.Table, lower), keyPart(tt.Table, []byte(lower)))
	assert.NotEqual(t, keyPart(tt.Table, "order-1"), keyPart(tt.Table, "order-2"))
	assert.Equal(t, keyPart(tt.Table, "order-1"), keyPart(tt.Table, []byte("order-1")))

	tT, tU := topicPart(tt.Table, "T"), topicPart(tt.Table, "U")
	assert.NotEqual(t, idOf(tt.Table, tT, u), idOf(tt.Table, tU, u), "keys count per topic")
	assert.NotEqual(t, idOf(tt.Table, tT, "T"), idOf(tt.Table, tU, "U"), "a key and a topic are hashed apart")
	assert.Equal(t, idOf(tt.Table, tT, u), idOf(tt.Table, tT, []byte(u)))
	assert.Equal(t, tt.kid(u), idOf(tt.Table, tT, u))
}

// BenchmarkDedupClaimLand is the table's part of a one-message send of a
// new key (claim, land; not the index lookup), the dispatcher 1,000
// records behind.
//
//	go test -run=^$ -bench=DedupClaimLand -benchmem ./broker
func BenchmarkDedupClaimLand(b *testing.B) {
	tt := newTestTable()
	tt.window = int64(24 * time.Hour / time.Millisecond)
	key := []byte("0A1B2C3D4E5F60718293A4B5C6D70000")
	keys := [][]byte{key}
	out := make([]Result, 1)
	res := []store.PutResult{{}}
	b.ReportAllocs()
	n := uint64(0)
	for b.Loop() {
		n++
		for i := range 8 {
			key[31-i] = "0123456789ABCDEF"[n>>(4*i)&0xF]
		}
		fl, err := claimKeys(b.Context(), tt.Table, "T", keys, out)
		if err != nil {
			b.Fatal(err)
		}
		res[0].PhysicalOffset = int64(n)
		tt.land(fl, res, out)
		tt.dispatchAt.Store(int64(n) - 1000)
	}
	b.ReportMetric(float64(tt.Recent()), "recent-keys")
}

// A retry waits for the first attempts that started before it registered
// its keys to land, then for the dispatcher to pass the last record they
// stored (not the log's end, which a filler may hold the dispatch position
// short of); a first attempt that starts after it does not hold it up, and
// goes the checked way if it has the retry's key.
func TestWaitFirstAttempts(t *testing.T) {
	tt := newTestTable()
	seq, ok := startFirstAttempt(tt.Table, "T", []string{"A"})
	require.True(t, ok)
	done := make(chan error, 1)
	go func() { done <- waitFirstAttempts(t.Context(), tt.Table, "T", []string{"A", "B"}) }()
	require.Eventually(t, func() bool {
		tt.Table.mu.Lock()
		defer tt.Table.mu.Unlock()
		return len(tt.retried) == 2 && tt.firstLanded != nil
	}, 5*time.Second, time.Millisecond, "the retry registers its keys and waits")

	_, ok = startFirstAttempt(tt.Table, "T", []string{"B"})
	assert.False(t, ok, "a first attempt of a retry's key goes the checked way")
	later, ok := startFirstAttempt(tt.Table, "T", []string{"C"})
	require.True(t, ok, "other keys still go the quick way")

	tt.landFirstAttempt(seq, []store.PutResult{{PhysicalOffset: 40}, {PhysicalOffset: 90}})
	tt.dispatchAt.Store(90)
	select {
	case err := <-done:
		t.Fatalf("returned before the dispatcher indexed the first attempt: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	tt.dispatchAt.Store(95) // past the record at 90, short of a filler after it
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting once the first attempt landed and was indexed (the later one is in flight)")
	}
	tt.landFirstAttempt(later, nil)

	// A retry gives up when its context ends.
	seq, ok = startFirstAttempt(tt.Table, "T", []string{"D"})
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, waitFirstAttempts(ctx, tt.Table, "T", []string{"E"}), context.DeadlineExceeded)
	tt.landFirstAttempt(seq, nil)
}

// The keys retries register are dropped when their window ends; past
// maxRetried a retry registers no more, and first attempts go the checked
// way until a window has passed.
func TestRetriedKeys(t *testing.T) {
	tt := newTestTable()
	require.NoError(t, waitFirstAttempts(t.Context(), tt.Table, "T", []string{"A"}))
	tt.advance(5 * time.Second)
	require.NoError(t, waitFirstAttempts(t.Context(), tt.Table, "T", []string{"A", "B"})) // A again: a later window
	tt.advance(5 * time.Second)
	_, ok := startFirstAttempt(tt.Table, "T", []string{"A"})
	assert.False(t, ok, "A's second registration holds")
	tt.advance(5 * time.Second)
	seq, ok := startFirstAttempt(tt.Table, "T", []string{"A"})
	require.True(t, ok)
	tt.landFirstAttempt(seq, nil)
	assert.Empty(t, tt.retried)

	keys := make([]string, maxRetried+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("K%d", i)
	}
	require.NoError(t, waitFirstAttempts(t.Context(), tt.Table, "T", keys))
	assert.Len(t, tt.retried, maxRetried)
	_, ok = startFirstAttempt(tt.Table, "T", []string{"new"})
	assert.False(t, ok, "retries overflowed: first attempts are checked")
	tt.advance(10*time.Second + time.Millisecond)
	seq, ok = startFirstAttempt(tt.Table, "T", []string{"new"})
	assert.True(t, ok, "a window after the overflow")
	tt.landFirstAttempt(seq, nil)
	assert.Empty(t, tt.retried)
}
