package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
)

// testTable is a dedup table with a 10 s window on a settable clock (ms).
type testTable struct {
	*dedupTable
	mu  sync.Mutex
	now int64
}

func newTestTable() *testTable {
	tt := &testTable{now: 1_700_000_000_000}
	tt.dedupTable = newDedupTable(10*time.Second, tt.clock)
	return tt
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
func (tt *testTable) claim(t *testing.T, ctx context.Context, keys ...string) (*dedupFlight, []SendResult, error) {
	t.Helper()
	out := make([]SendResult, len(keys))
	fl, err := claimKeys(ctx, tt.dedupTable, "T", keys, out)
	return fl, out, err
}

// stored lands fl as stored at now with physical offsets from phys on.
func (tt *testTable) stored(fl *dedupFlight, out []SendResult, phys int64) {
	var res []store.PutResult
	for range fl.stores {
		res = append(res, store.PutResult{UniqKey: "u", PhysicalOffset: phys, StoreTimestamp: tt.clock().UnixMilli()})
		phys++
	}
	tt.land("T", fl, res, out)
}

// A send of a key another send holds in flight waits for it, holding no
// claim meanwhile, and is a duplicate if that one stored, else stores.
func TestDedupWaitsForFlight(t *testing.T) {
	tt := newTestTable()
	fl1, out1, err := tt.claim(t, t.Context(), "A")
	require.NoError(t, err)

	got := make(chan []SendResult)
	go func() {
		fl2, out2, err := tt.claim(t, t.Context(), "B", "A")
		assert.NoError(t, err)
		assert.Equal(t, []int32{markNew, markDup}, fl2.marks)
		tt.stored(fl2, out2, 100)
		got <- out2
	}()
	require.Eventually(t, func() bool {
		tt.dedupTable.mu.Lock()
		defer tt.dedupTable.mu.Unlock()
		return fl1.done != nil
	}, 5*time.Second, time.Millisecond, "the second send waits")
	tt.dedupTable.mu.Lock()
	_, claimedB := tt.inflight[flightKey{"T", id(tt.dedupTable, "B")}]
	tt.dedupTable.mu.Unlock()
	assert.False(t, claimedB, "a waiting send holds no claim")

	tt.stored(fl1, out1, 7)
	out2 := <-got
	assert.Equal(t, SendResult{PutResult: store.PutResult{UniqKey: "u", PhysicalOffset: 100, StoreTimestamp: tt.now}}, out2[0])
	assert.True(t, out2[1].Duplicate)
	assert.Equal(t, int64(7), out2[1].PhysicalOffset)

	// A flight that stores nothing releases its keys: the waiter stores.
	fl3, _, err := tt.claim(t, t.Context(), "C")
	require.NoError(t, err)
	go func() {
		fl4, _, err := tt.claim(t, t.Context(), "C")
		assert.NoError(t, err)
		assert.Equal(t, []int32{markNew}, fl4.marks)
		tt.land("T", fl4, nil, make([]SendResult, 1))
		got <- nil
	}()
	require.Eventually(t, func() bool {
		tt.dedupTable.mu.Lock()
		defer tt.dedupTable.mu.Unlock()
		return fl3.done != nil
	}, 5*time.Second, time.Millisecond)
	tt.land("T", fl3, nil, make([]SendResult, 1))
	<-got
	assert.Equal(t, 2, tt.size(), "A and B; C was never stored")

	// A waiter gives up with its context.
	fl5, _, err := tt.claim(t, t.Context(), "D")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, _, err = tt.claim(t, ctx, "D")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	tt.land("T", fl5, nil, make([]SendResult, 1))
}

// Keys expire after the window; generations drop whole, but a claim in
// flight survives any number of rotations.
func TestDedupGenerations(t *testing.T) {
	tt := newTestTable()
	fl, out, err := tt.claim(t, t.Context(), "A", "B")
	require.NoError(t, err)
	tt.stored(fl, out, 1)
	inflight, _, err := tt.claim(t, t.Context(), "F")
	require.NoError(t, err)

	tt.advance(9999 * time.Millisecond)
	_, out, err = tt.claim(t, t.Context(), "A")
	require.NoError(t, err)
	assert.True(t, out[0].Duplicate, "within the window")

	for range 3 { // rotations: the generation of A and B is dropped
		tt.advance(10 * time.Second)
		fl, out, err := tt.claim(t, t.Context(), "X")
		require.NoError(t, err)
		tt.land("T", fl, nil, out)
	}
	assert.Zero(t, tt.size(), "the generation of A and B is gone")
	assert.Len(t, tt.inflight, 1, "F, in flight, is kept")
	_, out, err = tt.claim(t, t.Context(), "B")
	require.NoError(t, err)
	assert.False(t, out[0].Duplicate)

	tt.stored(inflight, make([]SendResult, 1), 9)
	_, out, err = tt.claim(t, t.Context(), "F")
	require.NoError(t, err)
	assert.True(t, out[0].Duplicate, "a claim landed after rotations is remembered")
	assert.Equal(t, int64(9), out[0].PhysicalOffset)
}

// keepRecords keeps the runs of stored records of each chunk, in order.
func TestDedupKeepRecords(t *testing.T) {
	rec := func(b byte, n int) []byte { // a fake record: size, magic, filler
		r := make([]byte, n)
		r[3] = byte(n)
		for i := 8; i < n; i++ {
			r[i] = b
		}
		return r
	}
	a, b, c, d := rec('a', 9), rec('b', 10), rec('c', 11), rec('d', 12)
	chunks := [][]byte{append(append(append([]byte{}, a...), b...), c...), d}
	fl := &dedupFlight{marks: []int32{markNew, markDup, markNone, 0}, stores: 2}
	assert.Equal(t, [][]byte{a, c}, fl.keepRecords(chunks))
	fl = &dedupFlight{marks: []int32{markDup, markNew, markNew, markNew}, stores: 3}
	assert.Equal(t, [][]byte{append(append([]byte{}, b...), c...), d}, fl.keepRecords(chunks))
	fl.marks[0], fl.stores = markNone, 4
	assert.Equal(t, chunks, fl.keepRecords(chunks))
}

// A key's id: the bytes of a UNIQ_KEY in upper-case hex, else a hash; the
// same for a string and its bytes.
func TestDedupID(t *testing.T) {
	tt := newTestTable()
	u := "0A1B2C3D4E5F60718293A4B5C6D7E8F9"
	assert.Equal(t, dedupID{0x0A, 0x1B, 0x2C, 0x3D, 0x4E, 0x5F, 0x60, 0x71, 0x82, 0x93, 0xA4, 0xB5, 0xC6, 0xD7, 0xE8, 0xF9}, id(tt.dedupTable, u))
	assert.Equal(t, id(tt.dedupTable, u), id(tt.dedupTable, []byte(u)))
	lower := "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	assert.NotEqual(t, id(tt.dedupTable, u), id(tt.dedupTable, lower), "lower case is another key")
	assert.Equal(t, id(tt.dedupTable, lower), id(tt.dedupTable, []byte(lower)))
	assert.NotEqual(t, id(tt.dedupTable, "order-1"), id(tt.dedupTable, "order-2"))
	assert.Equal(t, id(tt.dedupTable, "order-1"), id(tt.dedupTable, []byte("order-1")))
}

// BenchmarkDedupClaimLand is the table's part of a one-message send of a
// new key (claim, land), the table holding every key sent before.
//
//	go test -run=^$ -bench=DedupClaimLand -benchmem ./broker
func BenchmarkDedupClaimLand(b *testing.B) {
	tt := newTestTable()
	tt.window = int64(24 * time.Hour / time.Millisecond)
	key := []byte("0A1B2C3D4E5F60718293A4B5C6D70000")
	keys := [][]byte{key}
	out := make([]SendResult, 1)
	res := []store.PutResult{{}}
	b.ReportAllocs()
	n := uint64(0)
	for b.Loop() {
		n++
		for i := range 8 {
			key[31-i] = "0123456789ABCDEF"[n>>(4*i)&0xF]
		}
		fl, err := claimKeys(b.Context(), tt.dedupTable, "T", keys, out)
		if err != nil {
			b.Fatal(err)
		}
		res[0].PhysicalOffset = int64(n)
		tt.land("T", fl, res, out)
	}
}
