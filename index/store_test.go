package index

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

const t0 = int64(1_700_000_000_000) // ms, a whole second

func TestPutLookupRoundTrip(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys, dir := b.fs(t)
			s := openStore(t, testConfig(t, fsys, dir, 64, 256))
			assert.Equal(t, int64(-1), s.EndPhyOffset())
			assert.Equal(t, 0, s.Files())
			require.NoError(t, s.Put("T#a", 0, t0))
			require.NoError(t, s.Put("T#b", 0, t0))
			require.NoError(t, s.Put("T#a", 100, t0+1000))
			got, err := s.Lookup("T#a", 0, math.MaxInt64, 10)
			require.NoError(t, err)
			assert.Equal(t, []int64{100, 0}, got)
			got, err = s.Lookup("T#b", 0, math.MaxInt64, 10)
			require.NoError(t, err)
			assert.Equal(t, []int64{0}, got)
			got, err = s.Lookup("T#c", 0, math.MaxInt64, 10)
			require.NoError(t, err)
			assert.Empty(t, got)
			assert.Equal(t, int64(100), s.EndPhyOffset())
			assert.Equal(t, 1, s.Files())
			require.NoError(t, s.Flush())
			require.NoError(t, s.Close())

			s = openStore(t, testConfig(t, fsys, dir, 64, 256))
			defer s.Close()
			got, err = s.Lookup("T#a", 0, math.MaxInt64, 10)
			require.NoError(t, err)
			assert.Equal(t, []int64{100, 0}, got)
			assert.Equal(t, int64(100), s.EndPhyOffset())
		})
	}
}

func TestReferenceModel(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys, dir := b.fs(t)
			cfg := testConfig(t, fsys, dir, 7, 64) // tiny: slot chains mix keys, files roll often
			s := openStore(t, cfg)
			r := rand.New(rand.NewPCG(1, 2))
			keys := testKeys(40)
			var m model
			workload(t, s, &m, r, keys, 600, 0, t0)
			assert.GreaterOrEqual(t, s.Files(), 10)
			checkAll(t, s, &m, keys)
			require.NoError(t, s.Close())

			s = openStore(t, cfg) // reopen keeps everything
			defer s.Close()
			checkAll(t, s, &m, keys)
			assert.Equal(t, m.entries[len(m.entries)-1].phy, s.EndPhyOffset())
		})
	}
}

func TestTimeRange(t *testing.T) {
	fsys, dir := backends[1].fs(t)
	s := openStore(t, testConfig(t, fsys, dir, 64, 256))
	defer s.Close()
	require.NoError(t, s.Put("k", 10, 10_000))
	require.NoError(t, s.Put("k", 20, 12_500)) // stored as 12_000: whole seconds since 10_000
	require.NoError(t, s.Put("k", 30, 15_000))
	tests := []struct {
		name       string
		begin, end int64
		want       []int64
	}{
		{"all", 0, 20_000, []int64{30, 20, 10}},
		{"exact begin", 10_000, 10_000, []int64{10}},
		{"seconds granularity", 12_000, 12_000, []int64{20}},
		{"within the stored second", 12_100, 14_999, []int64{20}}, // 12_500 may be anywhere in [12_000, 12_999]
		{"past the stored second", 13_000, 14_999, nil},
		{"upper part", 11_000, 15_000, []int64{30, 20}},
		{"before everything", 0, 9_999, nil},
		{"after everything", 15_001, 99_999, nil},
		{"empty range", 20_000, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Lookup("k", tt.begin, tt.end, 10)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMaxLimit(t *testing.T) {
	fsys, dir := backends[1].fs(t)
	s := openStore(t, testConfig(t, fsys, dir, 4, 8)) // 7 entries a file
	defer s.Close()
	for i := range 30 {
		require.NoError(t, s.Put("k", int64(i), t0))
	}
	for _, limit := range []int{0, 1, 5, 7, 8, 30, 100} {
		got, err := s.Lookup("k", 0, math.MaxInt64, limit)
		require.NoError(t, err)
		require.Len(t, got, min(limit, 30), "limit=%d", limit)
		for i, p := range got {
			assert.Equal(t, int64(29-i), p)
		}
	}
}

func TestDuplicatesAreHidden(t *testing.T) {
	fsys, dir := backends[1].fs(t)
	s := openStore(t, testConfig(t, fsys, dir, 4, 8))
	defer s.Close()
	for range 3 {
		require.NoError(t, s.Put("k", 5, t0))
	}
	for i := range 40 { // more than the 16 checked linearly
		require.NoError(t, s.Put("k", 6+int64(i/2), t0))
	}
	got, err := s.Lookup("k", 0, math.MaxInt64, 100)
	require.NoError(t, err)
	assert.Len(t, got, 21)
	assert.Equal(t, int64(25), got[0])
	assert.Equal(t, int64(5), got[20])
}

func TestPutErrors(t *testing.T) {
	fsys, dir := backends[1].fs(t)
	s := openStore(t, testConfig(t, fsys, dir, 4, 8))
	require.NoError(t, s.Put("k", 100, t0))
	require.NoError(t, s.Put("k", 100, t0), "equal offsets are allowed")
	require.ErrorIs(t, s.Put("k", 99, t0), ErrOutOfOrder)
	require.ErrorIs(t, s.Put("k", -1, t0), ErrNegativeOffset)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), ErrClosed)
	require.ErrorIs(t, s.Put("k", 200, t0), ErrClosed)
	_, err := s.Lookup("k", 0, 1, 1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Truncate(0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.DeleteBelow(0)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Flush(), ErrClosed)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Dir: "x"}, true},
		{"no dir", Config{}, false},
		{"negative slots", Config{Dir: "x", SlotCount: -1}, false},
		{"one entry", Config{Dir: "x", EntryCount: 1}, false},
		{"huge entries", Config{Dir: "x", EntryCount: math.MaxInt32 + 1}, false},
		{"smallest", Config{Dir: "x", SlotCount: 1, EntryCount: 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.withDefaults().Validate()
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
	_, err := Open(t.Context(), Config{})
	require.Error(t, err)
}

func TestFileNames(t *testing.T) {
	mem := fsx.NewMemFS()
	s := openStore(t, testConfig(t, mem, "/idx", 4, 3)) // 2 entries a file
	for i := range 6 {
		require.NoError(t, s.Put("k", int64(i), t0))
	}
	require.NoError(t, s.Close())
	names, err := mem.ReadDir("/idx")
	require.NoError(t, err)
	// The clock stands still at 07:08:09.999: names are bumped by 1 ms.
	assert.Equal(t, []string{"20240506070809999", "20240506070810000", "20240506070810001"}, names)
	b, err := mem.ReadAll("/idx/20240506070809999")
	require.NoError(t, err)
	assert.Len(t, b, 40+4*4+3*20)
	h := decodeHeader(b)
	assert.Equal(t, header{beginTS: t0, endTS: t0, beginPhy: 0, endPhy: 1, slotCount: 4, count: 3}, h)
}

func TestTruncateAndReindex(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys, dir := b.fs(t)
			s := openStore(t, testConfig(t, fsys, dir, 5, 32))
			defer s.Close()
			r := rand.New(rand.NewPCG(3, 4))
			keys := testKeys(20)
			var m model
			workload(t, s, &m, r, keys, 300, 0, t0)
			files := s.Files()
			end := m.entries[len(m.entries)-1].phy + 1

			physEnd := m.entries[len(m.entries)/2].phy + 1
			from, err := s.Truncate(physEnd)
			require.NoError(t, err)
			assert.Less(t, s.Files(), files)
			assert.Less(t, s.EndPhyOffset(), physEnd)
			assert.Equal(t, physEnd, from, "the file holding physEnd is cut after its last entry below it")
			// Re-dispatch [from, physEnd): lookups equal the log cut at physEnd.
			cut := m.below(physEnd)
			for _, e := range m.entries {
				if e.phy >= from && e.phy < physEnd {
					require.NoError(t, s.Put(e.key, e.phy, e.ts))
				}
			}
			checkAll(t, s, cut, keys)
			// The rest of the log too: lookups equal the original.
			for _, e := range m.entries {
				if e.phy >= physEnd {
					require.NoError(t, s.Put(e.key, e.phy, e.ts))
				}
			}
			checkAll(t, s, &m, keys)

			from, err = s.Truncate(end) // nothing to drop
			require.NoError(t, err)
			assert.Equal(t, end-1, from)
			from, err = s.Truncate(0) // everything goes
			require.NoError(t, err)
			assert.Equal(t, int64(0), from)
			assert.Equal(t, 0, s.Files())
			assert.Equal(t, int64(-1), s.EndPhyOffset())
		})
	}
}

func TestDeleteBelow(t *testing.T) {
	fsys, dir := backends[1].fs(t)
	s := openStore(t, testConfig(t, fsys, dir, 4, 11)) // 10 entries a file
	defer s.Close()
	for i := range 50 {
		require.NoError(t, s.Put("k", int64(i), t0))
	}
	require.Equal(t, 5, s.Files())
	n, err := s.DeleteBelow(9) // file 0 ends at 9
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	n, err = s.DeleteBelow(25)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	got, err := s.Lookup("k", 0, math.MaxInt64, 100)
	require.NoError(t, err)
	assert.Len(t, got, 30)
	assert.Equal(t, int64(20), got[len(got)-1])
	n, err = s.DeleteBelow(math.MaxInt64)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "never the newest file")
	assert.Equal(t, 1, s.Files())
	assert.Equal(t, int64(49), s.EndPhyOffset())
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, names, 1)
}

func TestConcurrentLookupWhilePut(t *testing.T) {
	fsys, dir := backends[1].fs(t)
	s := openStore(t, testConfig(t, fsys, dir, 8, 64))
	defer s.Close()
	const nkeys = 16
	keys := testKeys(nkeys)[:nkeys]
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(rand.Uint64(), 0))
			for !done.Load() {
				k := r.IntN(nkeys)
				got, err := s.Lookup(keys[k], 0, math.MaxInt64, 50)
				if !assert.NoError(t, err) {
					return
				}
				for i, p := range got {
					// phy = i*nkeys + key index: every hit has the key's hash.
					if !assert.Equal(t, KeyHash(keys[k]), KeyHash(keys[p%nkeys])) ||
						(i > 0 && !assert.Less(t, p, got[i-1], "newest first")) {
						return
					}
				}
			}
		})
	}
	for i := range 5000 {
		k := i % nkeys
		require.NoError(t, s.Put(keys[k], int64(i), t0+int64(i)))
		if i%500 == 499 {
			require.NoError(t, s.Flush())
			_, err := s.DeleteBelow(int64(i - 1000))
			require.NoError(t, err)
		}
		if i%1500 == 1499 {
			from, err := s.Truncate(int64(i - 100))
			require.NoError(t, err)
			// Re-put what was dropped, as the dispatcher would.
			for j := max(from, 0); j <= int64(i); j++ {
				require.NoError(t, s.Put(keys[j%nkeys], j, t0+j))
			}
		}
	}
	done.Store(true)
	wg.Wait()
}

func TestOpenDropsImpossibleHeader(t *testing.T) {
	tests := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"zero slot count", func(b []byte) []byte { binary.BigEndian.PutUint32(b[offSlotCount:], 0); return b }},
		{"count too big", func(b []byte) []byte { binary.BigEndian.PutUint32(b[offCount:], 1000); return b }},
		{"count zero", func(b []byte) []byte { binary.BigEndian.PutUint32(b[offCount:], 0); return b }},
		{"phy range reversed", func(b []byte) []byte { binary.BigEndian.PutUint64(b[offBeginPhy:], 1<<40); return b }},
		{"short file", func(b []byte) []byte { return b[:20] }},
		{"size mismatch", func(b []byte) []byte { return b[:len(b)-7] }},
		{"overlaps previous", func(b []byte) []byte { binary.BigEndian.PutUint64(b[offBeginPhy:], 0); return b }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := testConfig(t, mem, "/idx", 4, 11)
			s := openStore(t, cfg)
			for i := range 40 { // 4 files of 10, 10, 10, 10
				require.NoError(t, s.Put("k", int64(i), t0))
			}
			require.NoError(t, s.Close())
			names, err := mem.ReadDir("/idx")
			require.NoError(t, err)
			require.Len(t, names, 4)
			require.NoError(t, mem.Mutate(filepath.Join("/idx", names[2]), tt.damage))

			s = openStore(t, cfg)
			defer s.Close()
			assert.Equal(t, 2, s.Files(), "the damaged file and the newer one are gone")
			assert.Equal(t, int64(19), s.EndPhyOffset(), "resume from the previous file's end")
			got, err := s.Lookup("k", 0, math.MaxInt64, 100)
			require.NoError(t, err)
			assert.Len(t, got, 20)
			left, err := mem.ReadDir("/idx")
			require.NoError(t, err)
			assert.Equal(t, names[:2], left)
		})
	}
}

func TestOpenRebuildsStaleHeader(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, mem, "/idx", 3, 64)
	s := openStore(t, cfg)
	var m model
	keys := testKeys(6)
	workload(t, s, &m, rand.New(rand.NewPCG(5, 6)), keys, 10, 0, t0)
	require.NoError(t, s.Close())
	names, err := mem.ReadDir("/idx")
	require.NoError(t, err)
	require.Len(t, names, 1)
	// A crash persisted slots and entries but a header from 5 entries ago.
	keep := len(m.entries) - 5
	require.NoError(t, mem.Mutate("/idx/"+names[0], func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[offCount:], uint32(keep+1))
		binary.BigEndian.PutUint64(b[offEndPhy:], uint64(m.entries[keep-1].phy))
		return b
	}))
	s = openStore(t, cfg)
	defer s.Close()
	lost := &model{entries: m.entries[:keep]}
	checkAll(t, s, lost, keys)
	workload(t, s, lost, rand.New(rand.NewPCG(7, 8)), keys, 10, m.entries[keep-1].phy, m.entries[keep-1].ts)
	checkAll(t, s, lost, keys)
}

// After a crash, every flushed entry is found, whether at most two files
// were written since the last Flush or more: a crash may keep the newer
// files' creation but none of the unflushed bytes of the file that was
// newest at the Flush, whose slots Flush never synced (they are synced
// once, when a file is full). It still holds after the Truncate the store
// makes to its dispatch checkpoint.
func TestCrashKeepsFlushed(t *testing.T) {
	for _, tc := range []struct {
		name              string
		flushed, unsynced int // entries put before and after the Flush (32 a file)
	}{
		{"at most two files unflushed", 80, 10},
		{"files fill between two flushes", 40, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := testConfig(t, mem, "/idx", 5, 32)
			s := openStore(t, cfg)
			keys := testKeys(10)
			r := rand.New(rand.NewPCG(9, 10))
			var m model
			phy, ts := workload(t, s, &m, r, keys, tc.flushed, 0, t0)
			require.NoError(t, s.Flush())
			flushed := &model{entries: slices.Clone(m.entries)}
			last := m.entries[len(m.entries)-1].phy
			workload(t, s, &m, r, keys, tc.unsynced, phy, ts)
			for seed := range uint64(40) {
				crashed := mem.Crash(rand.New(rand.NewPCG(seed, 0)))
				if seed == 0 {
					crashed = mem.Crash(nil)
				}
				c := cfg
				c.FS = crashed
				s2 := openStore(t, c)
				assert.GreaterOrEqual(t, s2.EndPhyOffset(), last, "seed %d", seed)
				for _, truncated := range []bool{false, true} {
					if truncated {
						_, err := s2.Truncate(last + 1)
						require.NoError(t, err)
					}
					for _, k := range keys {
						got, err := s2.Lookup(k, 0, math.MaxInt64, 1<<20)
						require.NoError(t, err)
						assert.Subset(t, got, flushed.lookup(k, 0, math.MaxInt64, 1<<20), "seed %d key %q truncated %v", seed, k, truncated)
					}
				}
				require.NoError(t, s2.Close())
			}
			require.NoError(t, s.Close())
		})
	}
}
