package index

import (
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// validFile returns the bytes of a small index file holding a few entries.
func validFile(f *testing.F) []byte {
	f.Helper()
	mem := fsx.NewMemFS()
	s, err := Open(f.Context(), Config{Dir: "/i", FS: mem, SlotCount: 4, EntryCount: 16})
	require.NoError(f, err)
	for i, k := range []string{"a", "b", "a", "FB", "Ea", "c", "a"} {
		require.NoError(f, s.Put(k, int64(i*10), t0+int64(i)*1500))
	}
	require.NoError(f, s.Close())
	names, err := mem.ReadDir("/i")
	require.NoError(f, err)
	b, err := mem.ReadAll("/i/" + names[0])
	require.NoError(f, err)
	return b
}

// FuzzOpenHeader opens arbitrary bytes as an index file: Open must not
// panic, and Lookup/Put/Truncate on whatever it kept must not panic or
// loop.
func FuzzOpenHeader(f *testing.F) {
	valid := validFile(f)
	f.Add(valid)
	f.Add(valid[:40])
	f.Add([]byte{})
	loop := append([]byte(nil), valid...)
	// entry 1's prevIndex -> 2, entry 2's -> 1: a cycle.
	loop[40+4*4+1*20+16+3], loop[40+4*4+2*20+16+3] = 2, 1
	f.Add(loop)
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := fsx.NewMemFS()
		require.NoError(t, mem.MkdirAll("/i", 0o755))
		fl, err := mem.OpenFile("/i/20240101000000000", os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		_, err = fl.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, fl.Close())

		s, err := Open(t.Context(), Config{Dir: "/i", FS: mem, SlotCount: 4, EntryCount: 16})
		require.NoError(t, err) // damage is repaired or dropped, never an error
		defer s.Close()
		keys := []string{"a", "b", "c", "FB", ""}
		for _, k := range keys {
			_, err := s.Lookup(k, math.MinInt64, math.MaxInt64, 1000)
			require.NoError(t, err)
		}
		end := max(s.EndPhyOffset(), 0)
		for i, k := range keys {
			require.NoError(t, s.Put(k, end+int64(i), t0))
		}
		for _, k := range keys {
			got, err := s.Lookup(k, math.MinInt64, math.MaxInt64, 1000)
			require.NoError(t, err)
			require.NotEmpty(t, got)
		}
		_, err = s.Truncate(end)
		require.NoError(t, err)
	})
}
