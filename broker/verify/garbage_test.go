package verify_test

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/internal/fsx"
)

// TestGarbageNeverPanics writes random bytes into random files of a store
// (overwriting, extending, truncating, or aimed at record and entry
// fields) and checks that verify reports problems without panicking.
func TestGarbageNeverPanics(t *testing.T) {
	ts := makeStore(t, 120)
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for seed := range uint64(rounds) {
		r := rand.New(rand.NewPCG(seed, 7))
		dir := copyDir(t, ts.dir)
		files := storeFiles(t, dir)
		for range 1 + r.IntN(4) {
			damage(t, r, files[r.IntN(len(files))])
		}
		rep, err := verify.Run(t.Context(), fsx.OS, dir, verify.Options{MaxErrors: 10})
		require.NoError(t, err, "seed %d", seed)
		assert.LessOrEqual(t, len(rep.Errors), 10)
		assert.Equal(t, rep.ErrorCount == 0, rep.Clean)
		require.NoError(t, os.RemoveAll(dir))
	}
}

func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	require.NoError(t, err)
	return files
}

func damage(t *testing.T, r *rand.Rand, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	garbage := make([]byte, 1+r.IntN(64))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}
	switch r.IntN(6) {
	case 0: // truncate
		b = b[:r.IntN(len(b)+1)]
	case 1: // extend
		b = append(b, garbage...)
	case 2: // big-endian values that look like sizes and offsets
		if len(b) >= 8 {
			off := r.IntN(len(b) - 7)
			v := []uint64{0, 1, 1 << 31, 1<<63 - 1, 1 << 63, uint64(r.IntN(1 << 20))}[r.IntN(6)]
			for i := range 8 {
				b[off+i] = byte(v >> (56 - 8*i))
			}
		}
	case 3: // zero a range
		if len(b) > 0 {
			off := r.IntN(len(b))
			clear(b[off:min(len(b), off+r.IntN(4096))])
		}
	default: // overwrite
		if len(b) > 0 {
			copy(b[r.IntN(len(b)):], garbage)
		}
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
