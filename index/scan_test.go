package index

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// scanAll scans every index file of dir and returns their headers, slots
// and entries.
func scanAll(t *testing.T, fsys fsx.FS, dir string) ([]ScanHeader, []ScanSlot, []ScanEntry) {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	var hs []ScanHeader
	var slots []ScanSlot
	var entries []ScanEntry
	for _, n := range names {
		require.True(t, IsFileName(n), n)
		h, err := ScanFile(fsys, dir+"/"+n,
			func(s ScanSlot) error { slots = append(slots, s); return nil },
			func(e ScanEntry) error { entries = append(entries, e); return nil })
		require.NoError(t, err)
		hs = append(hs, h)
	}
	return hs, slots, entries
}

func TestScanFile(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys, dir := b.fs(t)
			s := openStore(t, testConfig(t, fsys, dir, 7, 50))
			var m model
			r := rand.New(rand.NewPCG(1, 2))
			workload(t, s, &m, r, testKeys(20), 100, 1000, 1_700_000_000_000)
			require.NoError(t, s.Close())

			hs, slots, entries := scanAll(t, fsys, dir)
			require.Len(t, entries, len(m.entries))
			for i, e := range entries {
				assert.Equal(t, KeyHash(m.entries[i].key), e.KeyHash, "entry %d", i)
				assert.Equal(t, m.entries[i].phy, e.PhyOffset, "entry %d", i)
				assert.Less(t, e.PrevIndex, e.Number)
			}
			total := 0
			for _, h := range hs {
				assert.Equal(t, int32(7), h.SlotCount)
				assert.Equal(t, int32(50), h.EntryCapacity)
				total += int(h.Count - 1)
			}
			assert.Equal(t, len(m.entries), total)
			assert.NotEmpty(t, slots)
			for _, sl := range slots {
				assert.Equal(t, hs[0].SlotOffset(sl.Slot), sl.FileOffset)
				assert.Positive(t, sl.Value)
			}
		})
	}
}

func TestScanFileOffsetsMatchLayout(t *testing.T) {
	fsys, dir := fsx.NewMemFS(), "/idx"
	s := openStore(t, testConfig(t, fsys, dir, 5, 10))
	require.NoError(t, s.Put("T#a", 100, 1_700_000_000_000))
	require.NoError(t, s.Put("T#b", 200, 1_700_000_002_000))
	require.NoError(t, s.Close())
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1)
	path := dir + "/" + names[0]
	raw, err := fsys.ReadAll(path)
	require.NoError(t, err)

	var got []ScanEntry
	h, err := ScanFile(fsys, path, nil, func(e ScanEntry) error { got = append(got, e); return nil })
	require.NoError(t, err)
	assert.Equal(t, ScanHeader{
		BeginTimestamp: 1_700_000_000_000, EndTimestamp: 1_700_000_002_000, BeginPhyOffset: 100, EndPhyOffset: 200,
		SlotCount: 5, Count: 3, EntryCapacity: 10,
	}, h)
	require.Len(t, got, 2)
	e := got[1]
	assert.Equal(t, int64(40+5*4+2*20), e.FileOffset)
	assert.Equal(t, int64(200), int64(binary.BigEndian.Uint64(raw[e.FileOffset+4:])))
	assert.Equal(t, int32(2), e.TimeDiff)
}

func TestScanFileBadHeader(t *testing.T) {
	fsys, dir := fsx.NewMemFS(), "/idx"
	s := openStore(t, testConfig(t, fsys, dir, 5, 10))
	require.NoError(t, s.Put("T#a", 100, 1_700_000_000_000))
	require.NoError(t, s.Close())
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	path := dir + "/" + names[0]

	for name, mutate := range map[string]func(b []byte) []byte{
		"short":      func(b []byte) []byte { return b[:30] },
		"slot count": func(b []byte) []byte { binary.BigEndian.PutUint32(b[offSlotCount:], 0); return b },
		"count":      func(b []byte) []byte { binary.BigEndian.PutUint32(b[offCount:], 11); return b },
		"truncated":  func(b []byte) []byte { return b[:len(b)-1] },
	} {
		t.Run(name, func(t *testing.T) {
			snap := fsys.Snapshot()
			require.NoError(t, snap.Mutate(path, func(b []byte) []byte { return mutate(append([]byte(nil), b...)) }))
			called := false
			_, err := ScanFile(snap, path, func(ScanSlot) error { called = true; return nil }, nil)
			require.ErrorIs(t, err, ErrBadHeader)
			assert.False(t, called)
		})
	}
}

func TestScanFileStopsAtCallbackError(t *testing.T) {
	fsys, dir := fsx.NewMemFS(), "/idx"
	s := openStore(t, testConfig(t, fsys, dir, 5, 10))
	for i := range 5 {
		require.NoError(t, s.Put("T#a", int64(100*i), 1_700_000_000_000))
	}
	require.NoError(t, s.Close())
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	stop := errors.New("stop")
	n := 0
	_, err = ScanFile(fsys, dir+"/"+names[0], nil, func(ScanEntry) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 2, n)

	_, err = ScanFile(fsys, dir+"/missing", nil, nil)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrBadHeader)
}

func FuzzScanFile(f *testing.F) {
	fsys, dir := fsx.NewMemFS(), "/idx"
	s, err := Open(f.Context(), Config{Dir: dir, FS: fsys, SlotCount: 3, EntryCount: 6})
	require.NoError(f, err)
	require.NoError(f, s.Put("T#a", 100, 1_700_000_000_000))
	require.NoError(f, s.Put("T#b", 120, 1_700_000_001_000))
	require.NoError(f, s.Close())
	names, err := fsys.ReadDir(dir)
	require.NoError(f, err)
	seed, err := fsys.ReadAll(dir + "/" + names[0])
	require.NoError(f, err)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		m := fsx.NewMemFS()
		fl, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		_, err = fl.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, fl.Close())
		h, err := ScanFile(m, "/f",
			func(s ScanSlot) error { require.Less(t, s.Slot, h0(t, b)); return nil },
			func(e ScanEntry) error { require.Positive(t, e.Number); return nil })
		if err == nil {
			require.Positive(t, h.EntryCapacity)
		}
	})
}

// h0 is the slot count a fuzzed file claims.
func h0(t *testing.T, b []byte) int32 {
	t.Helper()
	return int32(binary.BigEndian.Uint32(b[offSlotCount:]))
}
