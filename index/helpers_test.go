package index

import (
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/internal/fsx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is one filesystem the suite runs against.
type backend struct {
	name string
	fs   func(t *testing.T) (fsx.FS, string) // filesystem and a fresh dir
}

var backends = []backend{
	{"os", func(t *testing.T) (fsx.FS, string) { return fsx.OS, filepath.Join(t.TempDir(), "index") }},
	{"mem", func(t *testing.T) (fsx.FS, string) { return fsx.NewMemFS(), "/store/index" }},
}

// fakeClock returns the same instant until advanced; file names then
// collide and must be bumped.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func testConfig(t *testing.T, fsys fsx.FS, dir string, slots, entries int) Config {
	t.Helper()
	clk := &fakeClock{t: time.Date(2024, 5, 6, 7, 8, 9, 999e6, time.UTC)}
	return Config{
		Dir: dir, FS: fsys, SlotCount: slots, EntryCount: entries, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	return s
}

// refEntry is one Put of the reference model.
type refEntry struct {
	key string
	phy int64
	ts  int64
}

// model is the reference implementation: every Put, in order.
type model struct{ entries []refEntry }

func (m *model) put(t *testing.T, s *Store, key string, phy, ts int64) {
	t.Helper()
	require.NoError(t, s.Put(key, phy, ts))
	m.entries = append(m.entries, refEntry{key, phy, ts})
}

// lookup is what Store.Lookup must return when every timestamp is a whole
// second: entries with key's hash in [begin, end], newest first, distinct.
func (m *model) lookup(key string, begin, end int64, limit int) []int64 {
	h := KeyHash(key)
	var out []int64
	for i := len(m.entries) - 1; i >= 0 && len(out) < limit; i-- {
		e := m.entries[i]
		if KeyHash(e.key) == h && e.ts >= begin && e.ts <= end && !slices.Contains(out, e.phy) {
			out = append(out, e.phy)
		}
	}
	return out
}

// below keeps the entries with phy < end.
func (m *model) below(end int64) *model {
	var out model
	for _, e := range m.entries {
		if e.phy < end {
			out.entries = append(out.entries, e)
		}
	}
	return &out
}

// workload puts n records with 1..3 keys each from keys, at increasing
// offsets and whole-second timestamps starting at ts0.
func workload(t *testing.T, s *Store, m *model, r *rand.Rand, keys []string, n int, phy0, ts0 int64) (nextPhy, nextTS int64) {
	t.Helper()
	phy, ts := phy0, ts0
	for range n {
		for range 1 + r.IntN(3) {
			m.put(t, s, keys[r.IntN(len(keys))], phy, ts)
		}
		phy += 1 + int64(r.IntN(500))
		ts += int64(r.IntN(3)) * 1000
	}
	return phy, ts
}

func testKeys(n int) []string {
	keys := []string{"FB", "Ea", "polygenelubricants", "TopicTest#€", "T#😀"} // FB/Ea share a hash
	for i := range n {
		keys = append(keys, "TopicTest#key-"+string(rune('a'+i%26))+string(rune('0'+i/26)))
	}
	return keys
}

// checkAll compares Store.Lookup with the model for every key over a few
// time ranges and limits.
func checkAll(t *testing.T, s *Store, m *model, keys []string) {
	t.Helper()
	var lo, hi int64
	if len(m.entries) > 0 {
		lo, hi = m.entries[0].ts, m.entries[len(m.entries)-1].ts
	}
	mid := lo + (hi-lo)/2/1000*1000
	ranges := [][2]int64{{0, 1 << 62}, {lo, hi}, {mid, hi}, {lo, mid}, {mid, mid}, {hi + 1000, hi + 5000}}
	for _, k := range keys {
		for _, rg := range ranges {
			for _, limit := range []int{1, 3, 1 << 20} {
				got, err := s.Lookup(k, rg[0], rg[1], limit)
				require.NoError(t, err)
				require.Equal(t, m.lookup(k, rg[0], rg[1], limit), got, "key=%q range=%v limit=%d", k, rg, limit)
			}
		}
	}
}
