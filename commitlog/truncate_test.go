package commitlog_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

const truncSeg = 8 << 10

// truncLog writes n records of about 400 bytes (several segments of 8 KiB)
// into a log in cfg.Dir, closes it and returns what it holds.
func truncLog(t *testing.T, cfg commitlog.Config, n int) []stored {
	t.Helper()
	l := open(t, cfg)
	for i := range n {
		_, err := l.Append(t.Context(), record(t, i, 300+i%7*10), nil)
		require.NoError(t, err)
	}
	recs := readAll(t, l)
	require.NoError(t, l.Close())
	return recs
}

// truncations reads every record of StateDir/truncations.log.
func truncations(t *testing.T, fsys fsx.FS, stateDir string) []commitlog.TruncateReport {
	t.Helper()
	b, err := fsx.ReadFile(fsys, filepath.Join(stateDir, commitlog.TruncationsFile))
	if err != nil {
		return nil
	}
	var out []commitlog.TruncateReport
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r commitlog.TruncateReport
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %q", sc.Text())
		out = append(out, r)
	}
	return out
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(recs []stored) int64 // the offset to cut at
	}{
		{"mid segment", func(r []stored) int64 { return r[len(r)/2].off }},
		{"the last record", func(r []stored) int64 { return r[len(r)-1].off }},
		{"a segment's start", func(r []stored) int64 { return truncSeg }},
		{"the log's start", func(r []stored) int64 { return 0 }},
		{"the first record of the last segment", func(r []stored) int64 {
			last := r[len(r)-1].off / truncSeg * truncSeg
			for _, s := range r {
				if s.off >= last {
					return s.off
				}
			}
			panic("none")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := commitlog.Config{FS: mem, Dir: "/s/commitlog", StateDir: "/s", SegmentBytes: truncSeg, CleanInterval: -1, Logger: testLogger(t)}
			recs := truncLog(t, cfg, 60)
			oldEnd := recs[len(recs)-1].off + int64(len(recs[len(recs)-1].b))
			at := tc.at(recs)
			var kept, cut []stored
			for _, s := range recs {
				if s.off < at {
					kept = append(kept, s)
				} else {
					cut = append(cut, s)
				}
			}
			require.NotEmpty(t, cut)

			rep, err := commitlog.Truncate(t.Context(), cfg, at, "test")
			require.NoError(t, err)
			assert.Equal(t, at, rep.Offset)
			assert.Equal(t, oldEnd, rep.OldEnd)
			assert.Equal(t, oldEnd-at, rep.Bytes)
			assert.Equal(t, len(cut), rep.Records)
			assert.Equal(t, cut[0].off, rep.FirstOffset)
			assert.Equal(t, cut[len(cut)-1].off, rep.LastOffset)
			assert.Equal(t, message.StoreTimestampOf(cut[0].b), rep.FirstStoreTimestamp)
			assert.Equal(t, message.StoreTimestampOf(cut[len(cut)-1].b), rep.LastStoreTimestamp)
			assert.Equal(t, "test", rep.Reason)
			assert.Len(t, rep.RemovedSegments, int((oldEnd-1)/truncSeg-at/truncSeg))
			onFile := truncations(t, mem, "/s")
			require.Len(t, onFile, 1)
			assert.Equal(t, rep.Offset, onFile[0].Offset)
			assert.Equal(t, rep.Records, onFile[0].Records)
			assert.Equal(t, rep.LastStoreTimestamp, onFile[0].LastStoreTimestamp)

			l := open(t, cfg)
			defer l.Close()
			assert.Equal(t, at, l.MaxOffset(), "the log ends where it was cut")
			assert.True(t, l.Recovery().Clean)
			assert.Nil(t, l.Recovery().TornTail)
			got := readAll(t, l)
			require.Len(t, got, len(kept))
			for i := range kept {
				require.Equal(t, kept[i], got[i])
			}
			res, err := l.Append(t.Context(), record(t, 1000, 300), nil)
			require.NoError(t, err)
			if at%truncSeg != 0 || at == 0 {
				assert.Equal(t, at, res.Offset, "the next record goes where the cut began")
			}
		})
	}
}

func TestTruncateRefusesBadOffsets(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := commitlog.Config{FS: mem, Dir: "/s/commitlog", StateDir: "/s", SegmentBytes: truncSeg, CleanInterval: -1, Logger: testLogger(t)}
	recs := truncLog(t, cfg, 30)
	end := recs[len(recs)-1].off + int64(len(recs[len(recs)-1].b))
	// The end filler of the first segment: after its last record.
	var filler int64
	for _, s := range recs {
		if e := s.off + int64(len(s.b)); e <= truncSeg {
			filler = e
		}
	}
	require.Less(t, filler, int64(truncSeg))
	for _, tc := range []struct {
		name   string
		offset int64
		says   string
	}{
		{"inside a record", recs[3].off + 5, fmt.Sprintf("inside the entry at %d", recs[3].off)},
		{"beyond the end", end + 1, "beyond the log's end"},
		{"negative", -1, "below the log's first offset"},
		{"in a segment's end filler", filler + 8, fmt.Sprintf("end filler of segment /s/commitlog/%020d, which starts at %d", 0, filler)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := commitlog.Truncate(t.Context(), cfg, tc.offset, "")
			require.ErrorIs(t, err, commitlog.ErrTruncateOffset)
			var te *commitlog.TruncateOffsetError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tc.offset, te.Offset)
			assert.Equal(t, end, te.End)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	rep, err := commitlog.Truncate(t.Context(), cfg, end, "")
	require.NoError(t, err, "at the end: nothing to cut")
	assert.Zero(t, rep.Bytes)
	assert.Empty(t, truncations(t, mem, "/s"), "nothing refused or cut is on record")
	l := open(t, cfg)
	defer l.Close()
	assert.Equal(t, end, l.MaxOffset())
	assert.Equal(t, recs, readAll(t, l), "the log is untouched")
}

// TestTruncateCrashStates takes the state a power cut would leave before
// every filesystem operation of a truncation (durable data only, and with
// a random prefix of what was not synced): each opens at the old end or at
// the truncation offset, with the records below it intact.
func TestTruncateCrashStates(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(recs []stored) int64
	}{
		{"mid segment", func(r []stored) int64 { return r[len(r)/3].off }},
		{"a segment's start", func(r []stored) int64 { return truncSeg }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := commitlog.Config{FS: mem, Dir: "/s/commitlog", StateDir: "/s", SegmentBytes: truncSeg, CleanInterval: -1, Logger: testLogger(t)}
			recs := truncLog(t, cfg, 60)
			oldEnd := recs[len(recs)-1].off + int64(len(recs[len(recs)-1].b))
			at := tc.at(recs)
			rng := rand.New(rand.NewPCG(3, 4))
			var states int
			var failures []string
			check := func(fs *fsx.MemFS) {
				states++
				c := cfg
				c.FS = fs
				l, err := commitlog.Open(t.Context(), c)
				if err != nil {
					failures = append(failures, fmt.Sprintf("state %d: open: %v", states, err))
					return
				}
				defer l.Close()
				end := l.MaxOffset()
				if end != oldEnd && end != at {
					failures = append(failures, fmt.Sprintf("state %d: recovered end %d, neither the old end %d nor the cut %d", states, end, oldEnd, at))
					return
				}
				var want []stored
				for _, s := range recs {
					if s.off < end {
						want = append(want, s)
					}
				}
				if got := readAll(t, l); !assert.ObjectsAreEqual(want, got) {
					failures = append(failures, fmt.Sprintf("state %d: %d records recovered below %d, want %d", states, len(got), end, len(want)))
				}
			}
			mem.SetHook(func(fsx.Op, string) {
				check(mem.Crash(nil))
				check(mem.Crash(rng))
			})
			_, err := commitlog.Truncate(t.Context(), cfg, at, "crash test")
			mem.SetHook(nil)
			require.NoError(t, err)
			check(mem.Crash(nil))
			t.Logf("%d crash states checked", states)
			assert.Empty(t, failures)
			assert.Greater(t, states, 10)
		})
	}
}
