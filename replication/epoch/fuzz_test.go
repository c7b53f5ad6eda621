package epoch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/replication/epoch"
)

// FuzzDecode gives the decoder arbitrary bytes: it accepts exactly the
// canonical encoding of a valid list, and refuses anything else with a
// *CorruptError whose offset lies in the file and whose valid entries are
// the file's own leading slots. It never panics.
func FuzzDecode(f *testing.F) {
	good := epoch.Encode(es(1, 0, 2, 300, 3, 700))
	for _, b := range [][]byte{
		epoch.Encode(nil),
		epoch.Encode(es(0, 0)),
		good,
		epoch.Encode(es(1, 0, 5, 0, 9, 1<<40, 1<<31-1, 1<<62)),
		good[:10],
		good[:16],
		good[:16+2*16],
		good[:16+2*16+5],
		append(bytes.Clone(good), 0, 0, 0),
		epochHeader(1, 0, 0xFFFFFFFF),
		epochHeader(1, 0, epoch.MaxEntries),
		epochHeader(2, 0, 0),
		withEntries(es(1, 10), es(2, 5)),
		withEntries(es(-1, 0)),
		{},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := epoch.Decode(b)
		if err == nil {
			require.NoError(t, epoch.Validate(entries), "accepted lists are valid")
			require.Equal(t, b, epoch.Encode(entries), "only the canonical encoding is accepted")
			return
		}
		require.Nil(t, entries)
		var ce *epoch.CorruptError
		require.True(t, errors.As(err, &ce), "%T %v", err, err)
		require.ErrorIs(t, err, epoch.ErrCorrupt)
		require.NotEmpty(t, ce.Reason)
		require.GreaterOrEqual(t, ce.Offset, int64(0))
		require.LessOrEqual(t, ce.Offset, int64(len(b)))
		require.NoError(t, epoch.Validate(ce.Valid))
		if n := len(ce.Valid); n > 0 {
			require.Equal(t, epoch.Encode(ce.Valid)[16:], b[16:16+n*16], "the valid entries are the file's first slots")
			require.Equal(t, int64(16+n*16), ce.Offset, "the problem is right after them")
			require.LessOrEqual(t, uint32(n), binary.BigEndian.Uint32(b[8:]))
		}

		// Open reports the same, naming the file, and leaves it alone.
		mem := fsx.NewMemFS()
		put(t, mem, "/s/epoch", b)
		_, oerr := epoch.Open(mem, "/s/epoch")
		require.ErrorIs(t, oerr, epoch.ErrCorrupt)
		require.ErrorContains(t, oerr, "/s/epoch")
		got, rerr := mem.ReadAll("/s/epoch")
		require.NoError(t, rerr)
		require.True(t, bytes.Equal(b, got))
	})
}

// listFrom builds a valid list from fuzz bytes: each 3-byte group adds an
// epoch step (0..7, so equal-epoch steps are skipped) and a start step.
func listFrom(b []byte) []epoch.Entry {
	var out []epoch.Entry
	var ep int32
	var start int64
	for i := 0; i+2 < len(b) && len(out) < 64; i += 3 {
		ep += int32(b[i] % 8)
		start += int64(binary.BigEndian.Uint16(b[i+1:])) % 1000
		if n := len(out); n > 0 && ep <= out[n-1].Epoch {
			continue
		}
		out = append(out, epoch.Entry{Epoch: ep, StartOffset: start})
	}
	return out
}

// FuzzLastCommonPoint checks LastCommonPoint's invariants on valid lists:
// the point is within both logs, it is the same seen from either side, and
// ok is false exactly when no epoch has the same start on both sides.
func FuzzLastCommonPoint(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 0, 100}, []byte{1, 0, 0, 2, 0, 50}, int64(300), int64(400))
	f.Add([]byte{1, 0, 0, 1, 0, 100, 1, 1, 0}, []byte{1, 0, 0, 1, 0, 100}, int64(900), int64(200))
	f.Add([]byte{}, []byte{1, 0, 0}, int64(0), int64(10))
	f.Add([]byte{2, 0, 5}, []byte{2, 0, 5}, int64(-1), int64(10))
	f.Fuzz(func(t *testing.T, a, b []byte, myEnd, theirEnd int64) {
		mine, theirs := listFrom(a), listFrom(b)
		require.NoError(t, epoch.Validate(mine))
		require.NoError(t, epoch.Validate(theirs))
		off, ok := epoch.LastCommonPoint(mine, theirs, myEnd, theirEnd)
		off2, ok2 := epoch.LastCommonPoint(theirs, mine, theirEnd, myEnd)
		require.Equal(t, ok, ok2, "symmetric")
		require.Equal(t, off, off2, "symmetric")
		if !ok {
			require.Zero(t, off)
		}
		if myEnd < 0 || theirEnd < 0 {
			require.False(t, ok)
			return
		}
		common := false
		for _, m := range mine {
			for _, th := range theirs {
				common = common || m == th
			}
		}
		require.Equal(t, common, ok)
		if ok {
			require.GreaterOrEqual(t, off, int64(0))
			require.LessOrEqual(t, off, min(myEnd, theirEnd))
		}
	})
}
