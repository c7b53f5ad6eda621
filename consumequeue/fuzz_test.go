package consumequeue_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
)

const fuzzPerFile = 16

// FuzzRecover opens a queue whose only file holds arbitrary bytes: Open
// never panics, and every entry it keeps is valid, decodes from the input
// bytes, and reads back the same after a reopen.
func FuzzRecover(f *testing.F) {
	var seed []byte
	for i := range int64(5) {
		seed = binary.BigEndian.AppendUint64(seed, uint64(i*100))
		seed = binary.BigEndian.AppendUint32(seed, 100)
		seed = binary.BigEndian.AppendUint64(seed, uint64(i))
	}
	f.Add(seed)
	f.Add(seed[:47])
	ph := binary.BigEndian.AppendUint32(make([]byte, 8), 1<<31-1)
	ph = append(ph, make([]byte, 8)...)
	f.Add(append(append(append([]byte{}, ph...), ph...), seed...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:min(len(b), fuzzPerFile*consumequeue.EntrySize)]
		mem := fsx.NewMemFS()
		dir := "/cq"
		require.NoError(t, mem.MkdirAll(dir, 0o755))
		require.NoError(t, fsx.WriteFileAtomic(mem, filepath.Join(dir, "00000000000000000000"), b))
		cfg := consumequeue.Config{Dir: dir, FS: mem, EntriesPerFile: fuzzPerFile}
		q, err := consumequeue.Open(t.Context(), cfg)
		require.NoError(t, err)
		min, max := q.MinOffset(), q.MaxOffset()
		require.LessOrEqual(t, min, max)
		got, err := q.Read(min, fuzzPerFile, nil)
		require.NoError(t, err)
		require.Len(t, got, int(max-min))
		for i, e := range got {
			require.True(t, e.Valid())
			off := (int(min) + i) * consumequeue.EntrySize
			require.LessOrEqual(t, off+consumequeue.EntrySize, len(b))
			var enc [consumequeue.EntrySize]byte
			encode(enc[:], e)
			require.Equal(t, b[off:off+consumequeue.EntrySize], enc[:])
		}
		require.NoError(t, q.Close())
		q, err = consumequeue.Open(t.Context(), cfg)
		require.NoError(t, err)
		defer q.Close()
		require.Equal(t, min, q.MinOffset())
		require.Equal(t, max, q.MaxOffset())
		again, err := q.Read(min, fuzzPerFile, nil)
		require.NoError(t, err)
		require.Equal(t, got, again)
		require.Zero(t, q.Recovery().TruncatedEntries)
	})
}
