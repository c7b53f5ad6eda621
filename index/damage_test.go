package index

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// damage changes the closed file at path in place, as a crash or the disk
// would: through the OS for a real file.
func damage(t *testing.T, fsys fsx.FS, path string, f func(b []byte) []byte) {
	t.Helper()
	if mem, ok := fsys.(*fsx.MemFS); ok {
		require.NoError(t, mem.Mutate(path, f))
		return
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, f(b), 0o644))
}

// checkSlots asserts that every slot of every file of dir is empty or
// names an entry in use whose key hash belongs to it, and that every
// entry's prevIndex names an older entry of its slot: no junk left.
func checkSlots(t *testing.T, fsys fsx.FS, dir string) {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		hashes := map[int32]int32{}
		var slots []ScanSlot
		var entries []ScanEntry
		h, err := ScanFile(fsys, filepath.Join(dir, n), func(s ScanSlot) error {
			slots = append(slots, s)
			return nil
		}, func(e ScanEntry) error {
			hashes[e.Number] = e.KeyHash
			entries = append(entries, e)
			return nil
		})
		require.NoError(t, err)
		for _, e := range entries {
			if e.PrevIndex != 0 {
				assert.Less(t, e.PrevIndex, e.Number, "%s: entry %d", n, e.Number)
				assert.Equal(t, e.KeyHash%h.SlotCount, hashes[e.PrevIndex]%h.SlotCount, "%s: entry %d chains to entry %d of another slot", n, e.Number, e.PrevIndex)
			}
		}
		for _, s := range slots {
			hash, ok := hashes[s.Value]
			if assert.True(t, ok, "%s: slot %d holds %d, not an entry in use", n, s.Slot, s.Value) {
				assert.Equal(t, s.Slot, hash%h.SlotCount, "%s: slot %d holds entry %d of another slot", n, s.Slot, s.Value)
			}
		}
	}
}

// Open rebuilds the slots of the two newest files from their entries,
// whatever a crash left in the slot tables (values past indexCount,
// negative ones, entries of other slots) and with a header older than the
// entries: lookups equal the entries the header covers, before and after
// more Puts and a Truncate. The slot table of a file that is not full is
// zeroed through the filesystem (fsx.File.ZeroRange); when that fails, it
// is reserved again and cleared through the mapping.
func TestOpenRepairsDamagedSlots(t *testing.T) {
	for _, b := range backends {
		for _, zeroFails := range []bool{false, true} {
			t.Run(b.name+map[bool]string{false: "", true: "/zero range fails"}[zeroFails], func(t *testing.T) {
				fsys, dir := b.fs(t)
				faults := &fsx.Faults{}
				cfg := testConfig(t, fsx.WithFaults(fsys, faults), dir, 7, 64)
				s := openStore(t, cfg)
				var m model
				keys := testKeys(12)
				r := rand.New(rand.NewPCG(11, 12))
				phy, ts := workload(t, s, &m, r, keys, 60, 0, t0)
				require.Equal(t, 2, s.Files(), "a full file and the newest")
				require.False(t, s.files[1].full())
				require.NoError(t, s.Close())
				names, err := fsys.ReadDir(dir)
				require.NoError(t, err)
				require.Len(t, names, 2)

				// The newest file's header is 3 entries behind its entries.
				newest := filepath.Join(dir, names[1])
				var count int32
				damage(t, fsys, newest, func(b []byte) []byte {
					count = int32(binary.BigEndian.Uint32(b[offCount:])) - 3
					binary.BigEndian.PutUint32(b[offCount:], uint32(count))
					binary.BigEndian.PutUint64(b[offEndPhy:], uint64(m.entries[len(m.entries)-4].phy))
					return b
				})
				m.entries = m.entries[:len(m.entries)-3]
				for _, n := range names {
					damage(t, fsys, filepath.Join(dir, n), func(b []byte) []byte {
						for sl := range 7 {
							binary.BigEndian.PutUint32(b[headerSize+sl*slotSize:], uint32(int32(r.IntN(2*64))-5))
						}
						return b
					})
				}
				if zeroFails {
					faults.Add(fsx.Fault{Op: fsx.OpZeroRange, Err: syscall.EIO})
				}
				var zeroes int
				if mem, ok := fsys.(*fsx.MemFS); ok {
					mem.SetHook(func(op fsx.Op, _ string) {
						if op == fsx.OpZeroRange {
							zeroes++
						}
					})
				}

				s = openStore(t, cfg)
				defer s.Close()
				if _, ok := fsys.(*fsx.MemFS); ok && !zeroFails {
					assert.Equal(t, 1, zeroes, "the newest file's slots are zeroed by the filesystem; the full one's in memory")
				}
				checkSlots(t, fsys, dir)
				checkAll(t, s, &m, keys)
				workload(t, s, &m, r, keys, 40, phy, ts)
				checkAll(t, s, &m, keys)

				// Truncate cuts the newest file (zeroing its slots again) and
				// re-dispatch brings the rest back.
				physEnd := m.entries[len(m.entries)*3/4].phy
				from, err := s.Truncate(physEnd)
				require.NoError(t, err)
				checkSlots(t, fsys, dir)
				for _, e := range m.entries {
					if e.phy >= from && e.phy < physEnd {
						require.NoError(t, s.Put(e.key, e.phy, e.ts))
					}
				}
				checkAll(t, s, m.below(physEnd), keys)
				for _, e := range m.entries {
					if e.phy >= physEnd {
						require.NoError(t, s.Put(e.key, e.phy, e.ts))
					}
				}
				checkAll(t, s, &m, keys)
			})
		}
	}
}

// When the slots can neither be zeroed through the filesystem nor be
// reserved again (a full disk), Open fails with the error instead of
// writing through the mapping into pages that may not be backed.
func TestOpenFailsWhenSlotsCannotBeCleared(t *testing.T) {
	mem := fsx.NewMemFS()
	faults := &fsx.Faults{}
	cfg := testConfig(t, fsx.WithFaults(mem, faults), "/idx", 7, 64)
	s := openStore(t, cfg)
	require.NoError(t, s.Put("k", 1, t0))
	require.NoError(t, s.Close())
	faults.Add(fsx.Fault{Op: fsx.OpZeroRange, Err: syscall.EIO})
	faults.Add(fsx.Fault{Op: fsx.OpAllocate, Err: syscall.ENOSPC, After: 1}) // after reserveWritten
	_, err := Open(t.Context(), cfg)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorIs(t, err, syscall.EIO)
	assert.ErrorContains(t, err, "index: clear the slots of")

	faults.Clear()
	s = openStore(t, cfg)
	defer s.Close()
	got, err := s.Lookup("k", 0, t0, 10)
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, got)
}
