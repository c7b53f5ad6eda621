package epoch_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/replication/epoch"
)

// put writes b as the epoch file path on mem, durably.
func put(t *testing.T, mem *fsx.MemFS, path string, b []byte) {
	t.Helper()
	require.NoError(t, mem.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, fsx.WriteFileAtomic(mem, path, b))
}

func TestOpenMissingIsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "epoch")
	f, err := epoch.Open(nil, path)
	require.NoError(t, err)
	assert.Empty(t, f.Entries())
	_, ok := f.Last()
	assert.False(t, ok)
	assert.NoFileExists(t, path, "Open creates nothing")
}

func TestAppendAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "epoch")
	f, err := epoch.Open(fsx.OS, path)
	require.NoError(t, err)
	require.NoError(t, f.Append(1, 0))
	require.NoError(t, f.Append(2, 4096))
	require.NoError(t, f.Append(5, 4096)) // epochs may skip; an epoch may end with no data
	require.NoError(t, f.Append(6, 9000))
	want := es(1, 0, 2, 4096, 5, 4096, 6, 9000)
	assert.Equal(t, want, f.Entries())
	last, ok := f.Last()
	require.True(t, ok)
	assert.Equal(t, epoch.Entry{Epoch: 6, StartOffset: 9000}, last)
	assert.Equal(t, int64(4096), f.EndOf(1, 10000))
	assert.Equal(t, int64(10000), f.EndOf(3, 10000))

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, b, 16+4*16, "a 16-byte header and 16 bytes an entry")
	assert.Equal(t, epoch.Encode(want), b)
	assert.NoFileExists(t, path+".tmp")

	g, err := epoch.Open(fsx.OS, path)
	require.NoError(t, err)
	assert.Equal(t, want, g.Entries())
}

func TestAppendRules(t *testing.T) {
	tests := []struct {
		name    string
		epoch   int32
		start   int64
		wantErr string // "" accepts
	}{
		{"next epoch, later start", 4, 200, ""},
		{"skipped epochs, same start", 9, 100, ""},
		{"same epoch", 3, 200, "epoch 3 is not greater than the previous entry's 3"},
		{"older epoch", 2, 200, "epoch 2 is not greater"},
		{"start below the last", 4, 99, "start offset 99 is below the previous entry's 100"},
		{"negative start", 4, -1, "start offset -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			path := "/store/epoch"
			put(t, mem, path, epoch.Encode(es(1, 0, 3, 100)))
			f, err := epoch.Open(mem, path)
			require.NoError(t, err)
			err = f.Append(tt.epoch, tt.start)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, append(es(1, 0, 3, 100), epoch.Entry{Epoch: tt.epoch, StartOffset: tt.start}), f.Entries())
				return
			}
			require.ErrorIs(t, err, epoch.ErrInvalidEntry)
			assert.ErrorContains(t, err, tt.wantErr)
			assert.ErrorContains(t, err, path)
			assert.Equal(t, es(1, 0, 3, 100), f.Entries())
			b, rerr := mem.ReadAll(path)
			require.NoError(t, rerr)
			assert.Equal(t, epoch.Encode(es(1, 0, 3, 100)), b, "nothing written")
			assert.False(t, fsx.Exists(mem, path+".tmp"), "nothing written")
		})
	}
	t.Run("negative first epoch", func(t *testing.T) {
		f, err := epoch.Open(fsx.NewMemFS(), "/epoch")
		require.NoError(t, err)
		require.ErrorIs(t, f.Append(-1, 0), epoch.ErrInvalidEntry)
	})
}

func TestAppendFull(t *testing.T) {
	full := make([]epoch.Entry, epoch.MaxEntries)
	for i := range full {
		full[i] = epoch.Entry{Epoch: int32(i), StartOffset: int64(i) * 10}
	}
	mem := fsx.NewMemFS()
	put(t, mem, "/s/epoch", epoch.Encode(full))
	f, err := epoch.Open(mem, "/s/epoch")
	require.NoError(t, err)
	assert.Len(t, f.Entries(), epoch.MaxEntries)
	err = f.Append(epoch.MaxEntries, epoch.MaxEntries*10)
	require.ErrorIs(t, err, epoch.ErrFull)
	assert.ErrorContains(t, err, "/s/epoch")
	require.NoError(t, f.TruncateAfter(11), "truncating makes room")
	require.NoError(t, f.Append(epoch.MaxEntries, epoch.MaxEntries*10))
	assert.Equal(t, es(0, 0, 1, 10, epoch.MaxEntries, epoch.MaxEntries*10), f.Entries())
}

func TestTruncateAfter(t *testing.T) {
	list := es(1, 0, 2, 300, 3, 300, 4, 700)
	tests := []struct {
		name   string
		offset int64
		want   []epoch.Entry
		writes bool
	}{
		{"beyond every start", 5000, list, false},
		{"just after the last start", 701, list, false},
		{"at the last start drops it", 700, es(1, 0, 2, 300, 3, 300), true},
		{"inside the third epoch", 699, es(1, 0, 2, 300, 3, 300), true},
		{"at a start shared by two entries drops both", 300, es(1, 0), true},
		{"inside the first epoch", 299, es(1, 0), true},
		{"zero drops everything", 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			put(t, mem, "/s/epoch", epoch.Encode(list))
			f, err := epoch.Open(mem, "/s/epoch")
			require.NoError(t, err)
			writes := 0
			mem.SetHook(func(op fsx.Op, _ string) {
				if op == fsx.OpRename {
					writes++
				}
			})
			require.NoError(t, f.TruncateAfter(tt.offset))
			mem.SetHook(nil)
			assert.Equal(t, tt.want, f.Entries())
			assert.Equal(t, tt.writes, writes > 0)
			g, err := epoch.Open(mem.Crash(nil), "/s/epoch")
			require.NoError(t, err)
			assert.Equal(t, tt.want, g.Entries(), "durable")
		})
	}
	t.Run("all entries", func(t *testing.T) {
		mem := fsx.NewMemFS()
		put(t, mem, "/s/epoch", epoch.Encode(es(2, 10)))
		f, err := epoch.Open(mem, "/s/epoch")
		require.NoError(t, err)
		require.NoError(t, f.TruncateAfter(5))
		assert.Empty(t, f.Entries())
		g, err := epoch.Open(mem.Crash(nil), "/s/epoch")
		require.NoError(t, err, "an empty list is a valid file")
		assert.Empty(t, g.Entries())
		require.NoError(t, g.Append(3, 5))
	})
	t.Run("negative offset", func(t *testing.T) {
		f, err := epoch.Open(fsx.NewMemFS(), "/epoch")
		require.NoError(t, err)
		err = f.TruncateAfter(-1)
		require.ErrorIs(t, err, epoch.ErrInvalidOffset)
		assert.ErrorContains(t, err, "/epoch")
	})
}

// entry returns the 16-byte slot of e, with its checksum.
func entry(e epoch.Entry) []byte { return epoch.Encode([]epoch.Entry{e})[16:] }

func TestOpenDamaged(t *testing.T) {
	good := epoch.Encode(es(1, 0, 2, 300, 3, 700))
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name       string
		content    []byte
		wantOffset int64
		wantValid  []epoch.Entry
		wantReason string
	}{
		{"empty file", []byte{}, 0, nil, "empty file"},
		{"torn header", good[:10], 0, nil, "torn header: 10 of 16 bytes"},
		{"not an epoch file", []byte("{\"offsetTable\":{}}"), 0, nil, "not an epoch file"},
		{"header checksum", with(func(b []byte) []byte { b[9] ^= 1; return b }), 12, nil, "header checksum mismatch"},
		{"newer version", epochHeader(2, 0, 0), 4, nil, "format version 2, this build reads 1"},
		{"unknown flags", epochHeader(1, 1, 0), 6, nil, "unknown flags"},
		{"count over the limit", epochHeader(1, 0, 0xFFFFFFFF), 8, nil, "count 4294967295 exceeds MaxEntries (65536)"},
		{"torn last entry", good[:16+2*16+5], 48, es(1, 0, 2, 300), "torn entry 2 of 3: 5 of 16 bytes"},
		{"whole last entry missing", good[:16+2*16], 48, es(1, 0, 2, 300), "file ends after 2 of 3 entries"},
		{"only the header", good[:16], 16, nil, "file ends after 0 of 3 entries"},
		{"entry checksum", with(func(b []byte) []byte { b[16+16+6] ^= 0x80; return b }), 32, es(1, 0), "entry 1: checksum mismatch"},
		{"trailing data", append(append([]byte(nil), good...), 0), 64, es(1, 0, 2, 300, 3, 700), "1 bytes of trailing data after 3 entries"},
		{"epochs out of order", withEntries(es(1, 0), es(1, 5)), 32, es(1, 0), "entry 1: epoch 1 is not greater than the previous entry's 1"},
		{"starts out of order", withEntries(es(1, 10), es(2, 5)), 32, es(1, 10), "entry 1: start offset 5 is below the previous entry's 10"},
		{"negative start", withEntries(es(1, -10)), 16, nil, "entry 0: start offset -10 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			path := "/store/epoch"
			put(t, mem, path, tt.content)
			_, err := epoch.Open(mem, path)
			require.ErrorIs(t, err, epoch.ErrCorrupt)
			var ce *epoch.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			assert.Equal(t, tt.wantOffset, ce.Offset)
			assert.Equal(t, tt.wantValid, ce.Valid)
			assert.Contains(t, ce.Reason, tt.wantReason)
			assert.ErrorContains(t, err, path)
			b, rerr := mem.ReadAll(path)
			require.NoError(t, rerr)
			assert.True(t, bytes.Equal(tt.content, b), "Open never changes the file: %x", b)
		})
	}
}

// epochHeader is a header with a valid checksum over the given fields.
func epochHeader(version, flags uint16, count uint32) []byte {
	b := epoch.Encode(nil)
	binary.BigEndian.PutUint16(b[4:], version)
	binary.BigEndian.PutUint16(b[6:], flags)
	binary.BigEndian.PutUint32(b[8:], count)
	return withHeaderCRC(b)
}

// withEntries is a file whose slots hold each list's entries in turn, with
// valid checksums but no order check.
func withEntries(lists ...[]epoch.Entry) []byte {
	var slots []byte
	n := 0
	for _, l := range lists {
		for _, e := range l {
			slots = append(slots, entry(e)...)
			n++
		}
	}
	h := epoch.Encode(nil)
	binary.BigEndian.PutUint32(h[8:], uint32(n))
	return append(withHeaderCRC(h), slots...)
}

func withHeaderCRC(h []byte) []byte {
	binary.BigEndian.PutUint32(h[12:], crc32.Checksum(h[:12], crc32.MakeTable(crc32.Castagnoli)))
	return h
}

// TestOpenHugeFileRefusedBeforeReading gives Open a sparse 1 GiB file: it
// must refuse it by its size, without allocating it.
func TestOpenHugeFileRefusedBeforeReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "epoch")
	require.NoError(t, os.WriteFile(path, epoch.Encode(es(1, 0)), 0o644))
	require.NoError(t, os.Truncate(path, 1<<30))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := epoch.Open(fsx.OS, path)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, epoch.ErrCorrupt)
	assert.ErrorContains(t, err, path)
	assert.ErrorContains(t, err, "1073741824 bytes, more than the 1048592 of a file of MaxEntries entries")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by Open")
}

func TestWriteFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault fsx.Fault
	}{
		{"ENOSPC creating the temp file", fsx.Fault{Op: fsx.OpOpen, Path: "epoch.tmp", Err: syscall.ENOSPC}},
		{"ENOSPC writing the temp file", fsx.Fault{Op: fsx.OpWrite, Path: "epoch.tmp", Err: syscall.ENOSPC}},
		{"EIO syncing the temp file", fsx.Fault{Op: fsx.OpSync, Path: "epoch.tmp", Err: syscall.EIO}},
		{"EIO renaming", fsx.Fault{Op: fsx.OpRename, Path: "epoch", Err: syscall.EIO}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "epoch")
			var faults fsx.Faults
			f, err := epoch.Open(fsx.WithFaults(fsx.OS, &faults), path)
			require.NoError(t, err)
			require.NoError(t, f.Append(1, 0))
			require.NoError(t, f.Append(2, 100))

			remove := faults.Add(tt.fault)
			err = f.Append(3, 200)
			require.ErrorIs(t, err, tt.fault.Err)
			assert.ErrorContains(t, err, path)
			assert.Equal(t, es(1, 0, 2, 100), f.Entries(), "a failed append changes nothing")
			err = f.TruncateAfter(50)
			require.ErrorIs(t, err, tt.fault.Err)
			assert.Equal(t, es(1, 0, 2, 100), f.Entries(), "a failed truncation changes nothing")
			g, err := epoch.Open(fsx.OS, path)
			require.NoError(t, err)
			assert.Equal(t, es(1, 0, 2, 100), g.Entries(), "the file holds the old list")

			remove()
			require.NoError(t, f.Append(3, 200), "retried")
			g, err = epoch.Open(fsx.OS, path)
			require.NoError(t, err)
			assert.Equal(t, es(1, 0, 2, 100, 3, 200), g.Entries())
		})
	}
}

func TestSyncDirFailureLeavesOldOrNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "epoch")
	var faults fsx.Faults
	f, err := epoch.Open(fsx.WithFaults(fsx.OS, &faults), path)
	require.NoError(t, err)
	require.NoError(t, f.Append(1, 0))
	faults.Add(fsx.Fault{Op: fsx.OpSyncDir, Err: syscall.EIO})
	err = f.Append(2, 100)
	require.ErrorIs(t, err, syscall.EIO)
	assert.Equal(t, es(1, 0), f.Entries())
	g, err := epoch.Open(fsx.OS, path)
	require.NoError(t, err)
	assert.Contains(t, [][]epoch.Entry{es(1, 0), es(1, 0, 2, 100)}, g.Entries())
}
