package index

import (
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Sizes of a file spanning several reservation chunks: 1,024 slots and
// 1,000,000 entries (about 20 MB).
const (
	spanSlots   = 1024
	spanEntries = 1_000_000
)

// chunkEntries is how many entries (numbered from 1) fit in the first
// reservation chunk of a file of spanSlots slots.
var chunkEntries = int((reserveChunk-headerSize-spanSlots*slotSize)/entrySize) - 1

// A full disk stops Put with a clean ENOSPC, before any byte of the entry
// is written, both when the free space is below the next chunk
// (fsx.CheckRoom) and when fallocate itself fails; once there is room
// again, Put goes on and every entry is found.
func TestPutOnFullDiskFailsCleanly(t *testing.T) {
	for _, tc := range []struct {
		name string
		fill func(mem *fsx.MemFS, faults *fsx.Faults) (free func())
	}{
		{"no room for the next chunk", func(mem *fsx.MemFS, _ *fsx.Faults) func() {
			mem.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 1 << 30, Free: reserveChunk - 1} })
			return func() { mem.SetUsage(nil) }
		}},
		{"fallocate fails", func(_ *fsx.MemFS, faults *fsx.Faults) func() {
			return faults.Add(fsx.Fault{Op: fsx.OpAllocate, Err: syscall.ENOSPC})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			faults := &fsx.Faults{}
			var allocs int
			mem.SetHook(func(op fsx.Op, _ string) {
				if op == fsx.OpAllocate {
					allocs++
				}
			})
			s := openStore(t, testConfig(t, fsx.WithFaults(mem, faults), "/idx", spanSlots, spanEntries))
			defer s.Close()
			for i := range chunkEntries {
				require.NoError(t, s.Put("k", int64(i), t0))
			}
			require.Equal(t, 1, allocs, "the first chunk was reserved with the file")
			names, err := mem.ReadDir("/idx")
			require.NoError(t, err)
			path := "/idx/" + names[0]
			before, err := mem.ReadAll(path)
			require.NoError(t, err)

			free := tc.fill(mem, faults)
			for range 3 {
				err := s.Put("k", int64(chunkEntries), t0)
				require.ErrorIs(t, err, syscall.ENOSPC)
				assert.ErrorContains(t, err, "index: reserve")
			}
			after, err := mem.ReadAll(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing was written")
			assert.Equal(t, int64(chunkEntries-1), s.EndPhyOffset())

			free()
			for i := chunkEntries; i < chunkEntries+10; i++ {
				require.NoError(t, s.Put("k", int64(i), t0))
			}
			got, err := s.Lookup("k", 0, math.MaxInt64, math.MaxInt32)
			require.NoError(t, err)
			assert.Len(t, got, chunkEntries+10)
		})
	}
}

// Put reserves the blocks under every entry before writing it, in chunks
// ahead of the writer, and a reopened file is reserved again from its
// start (its earlier reservation is not trusted) without needing room
// for what it already holds.
func TestReservationCoversWrites(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, mem, "/idx", spanSlots, spanEntries)
	s := openStore(t, cfg)
	check := func(s *Store) {
		t.Helper()
		f := s.files[len(s.files)-1]
		end := int64(f.entryOff(f.count.Load()))
		assert.GreaterOrEqual(t, f.reserved, end, "written bytes are reserved")
		assert.Less(t, f.reserved, end+reserveChunk, "at most a chunk ahead")
		assert.Zero(t, f.reserved%reserveChunk, "whole chunks")
	}
	keys := benchKeys(30) // no two share a hash
	n := 0
	put := func(s *Store, count int) {
		t.Helper()
		for range count {
			require.NoError(t, s.Put(keys[n%len(keys)], int64(n), t0+int64(n)))
			n++
		}
	}
	put(s, chunkEntries+5)
	check(s)
	require.NoError(t, s.Close())

	// Reopened with less room than a chunk: what the file holds needs
	// none, so Put goes on up to the end of its chunk.
	mem.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 1 << 30, Free: reserveChunk / 2} })
	s = openStore(t, cfg)
	defer s.Close()
	assert.Equal(t, roundUp(s.files[0].inUse, reserveChunk), s.files[0].reserved,
		"Open reserved the chunks of the entries in use again")
	put(s, 10)
	check(s)
	mem.SetUsage(nil)
	put(s, chunkEntries)
	check(s)
	for i, k := range keys {
		got, err := s.Lookup(k, 0, math.MaxInt64, math.MaxInt32)
		require.NoError(t, err)
		assert.Equal(t, (n-i+len(keys)-1)/len(keys), len(got), "key %q", k)
	}
}
