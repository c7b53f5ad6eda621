package consumequeue_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/consumequeue"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  consumequeue.Config
	}{
		{"no dir", consumequeue.Config{}},
		{"negative entries", consumequeue.Config{Dir: "x", EntriesPerFile: -1}},
		{"huge entries", consumequeue.Config{Dir: "x", EntriesPerFile: 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := consumequeue.Open(t.Context(), tt.cfg)
			require.Error(t, err)
		})
	}
}

func TestAppendReadAcrossRolls(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			assert.Equal(t, int64(0), q.MaxOffset())
			_, _, ok := q.LastEntry()
			assert.False(t, ok)
			appendN(t, q, 0, 35)
			requireEntries(t, q, 0, 35)

			var got []consumequeue.Entry
			for from := int64(0); from < 35; from = int64(len(got)) {
				var err error
				got, err = q.Read(from, 7, got)
				require.NoError(t, err)
			}
			for i, g := range got {
				require.Equal(t, entry(int64(i)), g)
			}
			rest, err := q.Read(35, 10, nil)
			require.NoError(t, err)
			assert.Empty(t, rest)
			_, err = q.Get(35)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooBig)
			_, err = q.Read(36, 1, nil)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooBig)
			last, le, ok := q.LastEntry()
			require.True(t, ok)
			assert.Equal(t, int64(34), last)
			assert.Equal(t, entry(34), le)
			require.NoError(t, q.Close())

			q = open(t, e, 10)
			defer q.Close()
			requireEntries(t, q, 0, 35)
			assert.Equal(t, consumequeue.RecoveryInfo{Files: 4, MinOffset: 0, MaxOffset: 35}, q.Recovery())
			appendN(t, q, 35, 41)
			requireEntries(t, q, 0, 41)
		})
	}
}

func TestAppendRules(t *testing.T) {
	tests := []struct {
		name    string
		off     int64
		e       consumequeue.Entry
		wantErr error // nil: success
	}{
		{"idempotent re-append", 3, entry(3), nil},
		{"re-append of the last", 11, entry(11), nil},
		{"conflict", 3, entry(4), consumequeue.ErrConflict},
		{"gap", 13, entry(13), consumequeue.ErrNotContiguous},
		{"negative offset", 12, consumequeue.Entry{Offset: -1, Size: 10}, consumequeue.ErrInvalidEntry},
		{"zero size", 12, consumequeue.Entry{Offset: 1, Size: 0}, consumequeue.ErrInvalidEntry},
		{"next", 12, entry(12), nil},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			q := open(t, be.new(t), 5)
			defer q.Close()
			appendN(t, q, 0, 12)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					max := q.MaxOffset()
					err := q.Append(tt.off, tt.e)
					if tt.wantErr == nil {
						require.NoError(t, err)
						return
					}
					require.ErrorIs(t, err, tt.wantErr)
					assert.Equal(t, max, q.MaxOffset())
				})
			}
			requireEntries(t, q, 0, 13)
		})
	}
}

func TestStartAtNonZeroOffset(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			require.NoError(t, q.Append(25, entry(25)))
			appendN(t, q, 26, 32)
			requireEntries(t, q, 25, 32)
			_, err := q.Get(24)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooSmall)
			_, err = q.Read(0, 5, nil)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooSmall)
			require.ErrorIs(t, q.Append(3, entry(3)), consumequeue.ErrOffsetTooSmall)
			require.ErrorIs(t, q.Append(40, entry(40)), consumequeue.ErrNotContiguous)
			require.NoError(t, q.Close())

			names, err := e.fs.ReadDir(e.dir)
			require.NoError(t, err)
			assert.Equal(t, []string{fileName(400), fileName(600)}, names)

			q = open(t, e, 10)
			defer q.Close()
			requireEntries(t, q, 25, 32)
		})
	}
}

func TestRestartEmptyQueue(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			require.NoError(t, q.Append(3, entry(3)))
			_, err := q.TruncatePhysical(0) // empties the queue
			require.NoError(t, err)
			require.Equal(t, q.MinOffset(), q.MaxOffset())
			require.NoError(t, q.Append(57, entry(57)))
			requireEntries(t, q, 57, 58)
			require.NoError(t, q.Close())
			q = open(t, e, 10)
			defer q.Close()
			requireEntries(t, q, 57, 58)
		})
	}
}

func TestClosed(t *testing.T) {
	q := open(t, backends[1].new(t), 10)
	appendN(t, q, 0, 3)
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.Close(), consumequeue.ErrClosed)
	_, err := q.Get(0)
	require.ErrorIs(t, err, consumequeue.ErrClosed)
	_, err = q.Read(0, 1, nil)
	require.ErrorIs(t, err, consumequeue.ErrClosed)
	require.ErrorIs(t, q.Append(3, entry(3)), consumequeue.ErrClosed)
	require.ErrorIs(t, q.Flush(), consumequeue.ErrClosed)
	_, err = q.TruncatePhysical(0)
	require.ErrorIs(t, err, consumequeue.ErrClosed)
	_, err = q.DeleteBelow(0)
	require.ErrorIs(t, err, consumequeue.ErrClosed)
	_, _, ok := q.LastEntry()
	require.False(t, ok)
}

func TestTruncatePhysical(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			appendN(t, q, 0, 25)
			require.NoError(t, q.Flush())
			removed, err := q.TruncatePhysical(entry(30).Offset)
			require.NoError(t, err)
			assert.Equal(t, int64(0), removed)
			// entry 17 ends at 1800; a log end of 1850 cuts it.
			removed, err = q.TruncatePhysical(1750)
			require.NoError(t, err)
			assert.Equal(t, int64(8), removed)
			requireEntries(t, q, 0, 17)
			_, le, ok := q.LastEntry()
			require.True(t, ok)
			assert.LessOrEqual(t, le.End(), int64(1750))
			appendN(t, q, 17, 19) // re-dispatch
			require.NoError(t, q.Close())

			q = open(t, e, 10)
			defer q.Close()
			requireEntries(t, q, 0, 19)
		})
	}
}

func TestDeleteBelow(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			appendN(t, q, 0, 35)
			n, err := q.DeleteBelow(entry(9).End() - 1) // file 0's last entry not yet below
			require.NoError(t, err)
			assert.Equal(t, 0, n)
			n, err = q.DeleteBelow(entry(22).Offset) // files 0 and 1 end at or below
			require.NoError(t, err)
			assert.Equal(t, 2, n)
			requireEntries(t, q, 20, 35)
			_, err = q.Get(19)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooSmall)
			_, err = q.Read(5, 3, nil)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooSmall)
			n, err = q.DeleteBelow(1 << 40) // never the last file
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			requireEntries(t, q, 30, 35)
			require.NoError(t, q.Close())

			q = open(t, e, 10)
			defer q.Close()
			requireEntries(t, q, 30, 35)
			appendN(t, q, 35, 37)
		})
	}
}

func TestOffsetAtTime(t *testing.T) {
	q := open(t, backends[1].new(t), 16)
	defer q.Close()
	times := map[int64]int64{} // phys -> store time
	var ts []int64
	tm := int64(1000)
	for i := int64(0); i < 200; i++ {
		tm += int64(i*37%5) * 3 // monotone, with runs of equal times
		ts = append(ts, tm)
		times[entry(i).Offset] = tm
		require.NoError(t, q.Append(i, entry(i)))
	}
	calls := 0
	storeTime := func(phys int64, size int32) (int64, error) {
		calls++
		t, ok := times[phys]
		if !ok {
			return 0, errors.New("no such record")
		}
		return t, nil
	}
	for want := ts[0] - 5; want <= ts[len(ts)-1]+5; want++ {
		ref := int64(len(ts))
		for i, v := range ts {
			if v >= want {
				ref = int64(i)
				break
			}
		}
		calls = 0
		got, err := q.OffsetAtTime(want, storeTime)
		require.NoError(t, err)
		require.Equal(t, ref, got, "ts=%d", want)
		require.LessOrEqual(t, calls, 9)
	}
	delete(times, entry(99).Offset)
	_, err := q.OffsetAtTime(ts[99], storeTime)
	require.Error(t, err)
}

// RestartAt empties a queue that holds entries and starts it at a later
// offset; it refuses an offset below MaxOffset, and the restart survives
// a reopen.
func TestRestartAtDropsEntries(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			appendN(t, q, 0, 15)
			require.Error(t, q.RestartAt(14))
			require.NoError(t, q.RestartAt(27))
			assert.Equal(t, int64(27), q.MinOffset())
			assert.Equal(t, int64(27), q.MaxOffset())
			_, err := q.Get(3)
			require.ErrorIs(t, err, consumequeue.ErrOffsetTooSmall)
			appendN(t, q, 27, 33)
			requireEntries(t, q, 27, 33)
			require.NoError(t, q.Close())
			q = open(t, e, 10)
			requireEntries(t, q, 27, 33)
			require.NoError(t, q.Close())
		})
	}
}
