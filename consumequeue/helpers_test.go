package consumequeue_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a filesystem and the queue directory in it.
type env struct {
	fs  fsx.FS
	dir string
}

// backend runs the same tests on the OS filesystem and on MemFS.
type backend struct {
	name  string
	new   func(t *testing.T) env
	clone func(t *testing.T, e env) env
	// mutate changes a file's bytes as disk damage would.
	mutate func(t *testing.T, e env, name string, f func([]byte) []byte)
}

var backends = []backend{
	{
		name: "os",
		new:  func(t *testing.T) env { return env{fs: fsx.OS, dir: filepath.Join(t.TempDir(), "q")} },
		clone: func(t *testing.T, e env) env {
			t.Helper()
			dst := filepath.Join(t.TempDir(), "q")
			require.NoError(t, os.MkdirAll(dst, 0o755))
			names, err := os.ReadDir(e.dir)
			require.NoError(t, err)
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(e.dir, n.Name()))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dst, n.Name()), b, 0o644))
			}
			return env{fs: fsx.OS, dir: dst}
		},
		mutate: func(t *testing.T, e env, name string, f func([]byte) []byte) {
			t.Helper()
			p := filepath.Join(e.dir, name)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, f(b), 0o644))
		},
	},
	{
		name:  "mem",
		new:   func(*testing.T) env { return env{fs: fsx.NewMemFS(), dir: "/store/consumequeue/T/0"} },
		clone: func(_ *testing.T, e env) env { return env{fs: e.fs.(*fsx.MemFS).Snapshot(), dir: e.dir} },
		mutate: func(t *testing.T, e env, name string, f func([]byte) []byte) {
			t.Helper()
			require.NoError(t, e.fs.(*fsx.MemFS).Mutate(filepath.Join(e.dir, name), f))
		},
	},
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func open(t *testing.T, e env, perFile int) *consumequeue.Queue {
	t.Helper()
	q, err := consumequeue.Open(t.Context(), consumequeue.Config{Dir: e.dir, FS: e.fs, EntriesPerFile: perFile, Logger: testLogger(t)})
	require.NoError(t, err)
	return q
}

// entry is the i-th test entry: records of 100 bytes laid end to end.
func entry(i int64) consumequeue.Entry {
	return consumequeue.Entry{Offset: i * 100, Size: 100, TagsCode: i*7919 - 3}
}

func appendN(t *testing.T, q *consumequeue.Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		require.NoError(t, q.Append(i, entry(i)), "append %d", i)
	}
}

// requireEntries checks that the queue holds exactly entry(i) for i in [min, max).
func requireEntries(t *testing.T, q *consumequeue.Queue, min, max int64) {
	t.Helper()
	require.Equal(t, min, q.MinOffset())
	require.Equal(t, max, q.MaxOffset())
	for i := min; i < max; i++ {
		e, err := q.Get(i)
		require.NoError(t, err, "get %d", i)
		require.Equal(t, entry(i), e, "get %d", i)
	}
	got, err := q.Read(min, int(max-min)+5, nil)
	require.NoError(t, err)
	require.Len(t, got, int(max-min))
}

func fileName(base int64) string { return fmt.Sprintf("%020d", base) }
