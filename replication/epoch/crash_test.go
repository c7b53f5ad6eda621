package epoch_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/replication/epoch"
)

const crashPath = "/store/epoch"

// change is one durable change to a File and the list it leads to.
type change struct {
	name string
	do   func(f *epoch.File) error
}

// nextChange picks an Append (more often) or a TruncateAfter to apply to
// list.
func nextChange(rng *rand.Rand, list []epoch.Entry) (change, []epoch.Entry) {
	if len(list) == 0 || rng.IntN(3) > 0 {
		e := epoch.Entry{Epoch: int32(rng.IntN(3)), StartOffset: int64(rng.IntN(2)) * int64(rng.IntN(500))}
		if n := len(list); n > 0 {
			e.Epoch += list[n-1].Epoch + 1
			e.StartOffset += list[n-1].StartOffset
		}
		return change{fmt.Sprintf("Append(%d, %d)", e.Epoch, e.StartOffset), func(f *epoch.File) error { return f.Append(e.Epoch, e.StartOffset) }},
			append(slices.Clone(list), e)
	}
	off := max(0, list[rng.IntN(len(list))].StartOffset+int64(rng.IntN(3))-1)
	var keep []epoch.Entry
	for _, e := range list {
		if e.StartOffset < off {
			keep = append(keep, e)
		}
	}
	return change{fmt.Sprintf("TruncateAfter(%d)", off), func(f *epoch.File) error { return f.TruncateAfter(off) }}, keep
}

// TestCrashDuringChange cuts the power at a random step of a change, many
// times: reopening must find the old list or the new one, never an error,
// and the reopened file must take the next change (a leftover temp file is
// harmless).
func TestCrashDuringChange(t *testing.T) {
	const rounds = 400
	rng := rand.New(rand.NewPCG(4, 40))
	mem := fsx.NewMemFS()
	require.NoError(t, mem.MkdirAll("/store", 0o755))
	f, err := epoch.Open(mem, crashPath)
	require.NoError(t, err)
	var list []epoch.Entry // what the file holds
	seen := map[string]int{}
	for round := range rounds {
		ch, next := nextChange(rng, list)
		var crashed *fsx.MemFS
		step, crashAt := 0, rng.IntN(8)
		mem.SetHook(func(fsx.Op, string) {
			if step == crashAt {
				crashed = mem.Crash(rng)
			}
			step++
		})
		require.NoError(t, ch.do(f), "round %d: %s", round, ch.name)
		mem.SetHook(nil)
		if crashed == nil {
			crashed = mem.Crash(rng)
		}

		g, err := epoch.Open(crashed, crashPath)
		require.NoError(t, err, "round %d: crash at step %d of %s", round, crashAt, ch.name)
		got := g.Entries()
		switch {
		case slices.Equal(got, next):
			seen["new"]++
		case slices.Equal(got, list):
			seen["old"]++
		default:
			require.Failf(t, "neither the old nor the new list", "round %d: crash at step %d of %s over %v: got %v", round, crashAt, ch.name, list, got)
		}
		// The crashed copy takes the next change, and keeps it over a crash.
		ch2, next2 := nextChange(rng, got)
		require.NoError(t, ch2.do(g), "after the crash: %s", ch2.name)
		h, err := epoch.Open(crashed.Crash(nil), crashPath)
		require.NoError(t, err)
		require.Equal(t, next2, h.Entries(), "round %d: %s after the crash, then a crash", round, ch2.name)

		list = next
		if len(list) > 40 {
			require.NoError(t, f.TruncateAfter(0))
			list = f.Entries()
		}
	}
	assert.Greater(t, seen["old"], rounds/10, "crashes before the rename: %v", seen)
	assert.Greater(t, seen["new"], rounds/10, "crashes after the rename: %v", seen)
}

// TestCrashAtEveryStep crashes a single Append and a single TruncateAfter
// at each of their steps, keeping nothing unsynced and then random parts of
// it: the list found is the old one up to the rename and directory sync,
// the new one once Append returned.
func TestCrashAtEveryStep(t *testing.T) {
	old := es(1, 0, 2, 300)
	tests := []struct {
		name string
		do   func(f *epoch.File) error
		want []epoch.Entry
	}{
		{"Append", func(f *epoch.File) error { return f.Append(4, 900) }, es(1, 0, 2, 300, 4, 900)},
		{"TruncateAfter", func(f *epoch.File) error { return f.TruncateAfter(299) }, es(1, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setup := func() (*fsx.MemFS, *epoch.File) {
				mem := fsx.NewMemFS()
				put(t, mem, crashPath, epoch.Encode(old))
				f, err := epoch.Open(mem, crashPath)
				require.NoError(t, err)
				return mem, f
			}
			// Count the steps once.
			mem, f := setup()
			var ops []fsx.Op
			mem.SetHook(func(op fsx.Op, _ string) { ops = append(ops, op) })
			require.NoError(t, tt.do(f))
			require.Contains(t, ops, fsx.OpRename)
			require.Equal(t, fsx.OpSyncDir, ops[len(ops)-1], "the directory sync comes last: %v", ops)

			rng := rand.New(rand.NewPCG(7, uint64(len(ops))))
			for crashAt := range len(ops) + 1 {
				for try := range 20 {
					mem, f := setup()
					var crashed *fsx.MemFS
					step := 0
					mem.SetHook(func(fsx.Op, string) {
						if step == crashAt {
							if try == 0 {
								crashed = mem.Crash(nil) // only what was synced
							} else {
								crashed = mem.Crash(rng)
							}
						}
						step++
					})
					require.NoError(t, tt.do(f))
					if crashed == nil { // after the last step: the change returned
						crashed = mem.Crash(rng)
					}
					g, err := epoch.Open(crashed, crashPath)
					require.NoError(t, err, "crash before step %d (%v)", crashAt, ops)
					got := g.Entries()
					switch {
					case crashAt == len(ops):
						require.Equal(t, tt.want, got, "crash after the change returned")
					case crashAt <= slices.Index(ops, fsx.OpRename) || try == 0 && crashAt < len(ops):
						// Before the rename, or nothing unsynced kept: the
						// directory sync has not run, so the rename is lost.
						require.Equal(t, old, got, "crash before step %d (%v), try %d", crashAt, ops, try)
					default:
						require.Contains(t, [][]epoch.Entry{old, tt.want}, got, "crash before step %d (%v)", crashAt, ops)
					}
				}
			}
		})
	}
}

// TestLeftoverTempFileIgnored puts garbage where a crash leaves the temp
// file: Open ignores it and the next change replaces it.
func TestLeftoverTempFileIgnored(t *testing.T) {
	mem := fsx.NewMemFS()
	put(t, mem, crashPath, epoch.Encode(es(1, 0)))
	put(t, mem, crashPath+".tmp", []byte("torn garbage, longer than the list it held"))
	f, err := epoch.Open(mem, crashPath)
	require.NoError(t, err)
	assert.Equal(t, es(1, 0), f.Entries())
	require.NoError(t, f.Append(2, 10))
	g, err := epoch.Open(mem.Crash(nil), crashPath)
	require.NoError(t, err)
	assert.Equal(t, es(1, 0, 2, 10), g.Entries())
	assert.False(t, fsx.Exists(mem, crashPath+".tmp"))
}

// TestCrashDuringFirstAppend: before the first change completes, a crash
// leaves no file (an empty list) or the new list.
func TestCrashDuringFirstAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	seen := map[int]int{}
	for crashAt := range 6 {
		for range 10 {
			mem := fsx.NewMemFS()
			require.NoError(t, mem.MkdirAll("/store", 0o755))
			f, err := epoch.Open(mem, crashPath)
			require.NoError(t, err)
			var crashed *fsx.MemFS
			step := 0
			mem.SetHook(func(fsx.Op, string) {
				if step == crashAt {
					crashed = mem.Crash(rng)
				}
				step++
			})
			require.NoError(t, f.Append(1, 0))
			if crashed == nil {
				crashed = mem.Crash(rng)
			}
			g, err := epoch.Open(crashed, crashPath)
			require.NoError(t, err, "crash at step %d", crashAt)
			require.Contains(t, [][]epoch.Entry{nil, es(1, 0)}, g.Entries())
			seen[len(g.Entries())]++
		}
	}
	assert.Len(t, seen, 2, "crashes left no file and the new one: %v", seen)
}
