package commitlog_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// replicate copies master's log from the replica's end to master's end
// with CopyReplica and AppendReplica, in batches of at most bufSize bytes.
func replicate(t *testing.T, master, replica *commitlog.Log, bufSize int) {
	t.Helper()
	buf := make([]byte, bufSize)
	off := replica.MaxOffset()
	for {
		data, next, err := master.CopyReplica(off, buf, 1<<20)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			return
		}
		require.NoError(t, err, "copy at %d", off)
		end, err := replica.AppendReplica(t.Context(), off, data)
		require.NoError(t, err, "append at %d", off)
		require.Equal(t, next, end, "replica end after the batch at %d", off)
		off = end
	}
}

// requireSameBytes compares the two logs' bytes over [0, MaxOffset),
// segment by segment, fillers and the zeros after them included.
func requireSameBytes(t *testing.T, want, got *commitlog.Log) {
	t.Helper()
	require.Equal(t, want.MaxOffset(), got.MaxOffset())
	seg := want.SegmentBytes()
	for base := want.MinOffset(); base < want.MaxOffset(); base += seg {
		n := int(min(seg, want.MaxOffset()-base))
		a, err := want.Read(base, n)
		require.NoError(t, err)
		b, err := got.Read(base, n)
		require.NoError(t, err)
		if !bytes.Equal(a.B, b.B) {
			i := 0
			for i < n && a.B[i] == b.B[i] {
				i++
			}
			t.Fatalf("segment %d differs at log offset %d", base, base+int64(i))
		}
		a.Release()
		b.Release()
	}
}

func TestAppendReplicaMirrorsTheLog(t *testing.T) {
	for _, mode := range modes() {
		t.Run(mode.name, func(t *testing.T) {
			commitlog.SetDirectMinBytes(t, 1) // the master pads its flushes where it writes directly
			mcfg := mode.cfg
			mcfg.Dir, mcfg.SegmentBytes = t.TempDir(), 8<<10
			master := open(t, mcfg)
			defer master.Close()
			rcfg := mode.cfg
			rcfg.Dir, rcfg.SegmentBytes = t.TempDir(), 8<<10
			replica := open(t, rcfg)

			want := appendN(t, master, 0, 40, 300) // ~400 B records: several segments
			replicate(t, master, replica, 1000)    // a few records a batch
			want = append(want, appendN(t, master, 40, 40, 300)...)
			replicate(t, master, replica, 64<<10)
			requireSameBytes(t, master, replica)
			assert.Equal(t, want, readAll(t, replica))
			require.NoError(t, replica.Flush())
			assert.Equal(t, replica.MaxOffset(), replica.FlushedOffset())

			// A crash of the replica keeps what it appended.
			replica.Abandon()
			replica = open(t, rcfg)
			defer replica.Close()
			assert.Nil(t, replica.Recovery().TornTail)
			requireSameBytes(t, master, replica)
			want = append(want, appendN(t, master, 80, 20, 300)...)
			replicate(t, master, replica, 4096)
			requireSameBytes(t, master, replica)
			assert.Equal(t, want, readAll(t, replica))
		})
	}
}

func TestAppendReplicaRefusesBadBatches(t *testing.T) {
	master := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 8 << 10})
	defer master.Close()
	replica := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 8 << 10})
	defer replica.Close()
	appendN(t, master, 0, 30, 300)
	first, next, err := master.CopyReplica(0, make([]byte, 1000), 1<<20)
	require.NoError(t, err)
	second, _, err := master.CopyReplica(next, make([]byte, 1000), 1<<20)
	require.NoError(t, err)

	flipped := bytes.Clone(first)
	flipped[len(flipped)-40] ^= 1
	short := first[:len(first)-1]
	badBlank := message.AppendBlank(bytes.Clone(first), 100)
	afterBlank := append(message.AppendBlank(nil, int32(8<<10)), first...)
	tooBig := binary.BigEndian.AppendUint32(nil, 9<<10)
	tooBig = append(tooBig, first[4:]...)

	for _, tc := range []struct {
		name string
		off  int64
		data []byte
		is   error
	}{
		{"empty", 0, nil, commitlog.ErrInvalidBatch},
		{"not at the end", next, second, commitlog.ErrReplicaOffset},
		{"a record at another offset than its own", 0, second, commitlog.ErrInvalidBatch},
		{"a flipped byte", 0, flipped, commitlog.ErrInvalidBatch},
		{"a record cut short", 0, short, commitlog.ErrInvalidBatch},
		{"a filler of the wrong size", 0, badBlank, commitlog.ErrInvalidBatch},
		{"bytes after the filler", 0, afterBlank, commitlog.ErrInvalidBatch},
		{"a size beyond the segment", 0, tooBig, commitlog.ErrInvalidBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, err := replica.AppendReplica(t.Context(), tc.off, tc.data)
			require.ErrorIs(t, err, tc.is)
			assert.Equal(t, int64(0), end)
			assert.Equal(t, int64(0), replica.MaxOffset())
		})
	}
	var oe *commitlog.ReplicaOffsetError
	_, err = replica.AppendReplica(t.Context(), next, second)
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, commitlog.ReplicaOffsetError{Offset: next, End: 0}, *oe)
	assert.Contains(t, err.Error(), "ends at 0")

	// The log still takes the right batches.
	end, err := replica.AppendReplica(t.Context(), 0, first)
	require.NoError(t, err)
	assert.Equal(t, next, end)
	replicate(t, master, replica, 1000)
	requireSameBytes(t, master, replica)
}

func TestCopyReplica(t *testing.T) {
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 8 << 10})
	defer l.Close()
	recs := appendN(t, l, 0, 30, 300)
	size := len(recs[0].b)

	t.Run("stops after the segment's filler", func(t *testing.T) {
		var last stored
		for _, r := range recs {
			if r.off+int64(len(r.b)) <= 8<<10 {
				last = r
			}
		}
		fill := last.off + int64(len(last.b))
		data, next, err := l.CopyReplica(last.off, make([]byte, 64<<10), 1<<20)
		require.NoError(t, err)
		assert.Equal(t, int64(8<<10), next)
		require.Len(t, data, len(last.b)+message.BlankSize)
		assert.Equal(t, message.AppendBlank(nil, int32(8<<10-fill)), data[len(last.b):])
	})
	t.Run("a record larger than the buffer", func(t *testing.T) {
		data, next, err := l.CopyReplica(0, make([]byte, 10), 1<<20)
		require.NoError(t, err)
		assert.Len(t, data, size)
		assert.Equal(t, int64(size), next)
		_, _, err = l.CopyReplica(0, make([]byte, 10), 100)
		require.ErrorIs(t, err, commitlog.ErrRecordTooLarge)
	})
	t.Run("not where an entry starts", func(t *testing.T) {
		_, _, err := l.CopyReplica(20, make([]byte, 4096), 1<<20)
		require.ErrorIs(t, err, commitlog.ErrBadOffset)
	})
	t.Run("at the end", func(t *testing.T) {
		_, _, err := l.CopyReplica(l.MaxOffset(), make([]byte, 4096), 1<<20)
		require.ErrorIs(t, err, commitlog.ErrOffsetTooBig)
	})
}
