package fsx_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/internal/fsx"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is one FS implementation the shared suite runs against.
type backend struct {
	name string
	// open returns a filesystem and an existing, empty directory in it.
	open func(t *testing.T) (fsx.FS, string)
}

func memBackend(t *testing.T) (fsx.FS, string) {
	t.Helper()
	m := fsx.NewMemFS()
	require.NoError(t, m.MkdirAll("/data", 0o755))
	return m, "/data"
}

func backends() []backend {
	return []backend{
		{"os", func(t *testing.T) (fsx.FS, string) { return fsx.OS, t.TempDir() }},
		{"mem", memBackend},
		{"faults-over-os", func(t *testing.T) (fsx.FS, string) {
			return fsx.WithFaults(fsx.OS, &fsx.Faults{}), t.TempDir()
		}},
		{"faults-over-mem", func(t *testing.T) (fsx.FS, string) {
			m, dir := memBackend(t)
			return fsx.WithFaults(m, &fsx.Faults{}), dir
		}},
	}
}

// forEachBackend runs f as a subtest against every backend.
func forEachBackend(t *testing.T, f func(t *testing.T, fsys fsx.FS, dir string)) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			fsys, dir := b.open(t)
			f(t, fsys, dir)
		})
	}
}

// createFile creates (or truncates) name holding data and returns it open
// read-write; the test's cleanup closes it.
func createFile(t *testing.T, fsys fsx.FS, name string, data []byte) fsx.File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	if len(data) > 0 {
		n, err := f.WriteAt(data, 0)
		require.NoError(t, err)
		require.Equal(t, len(data), n)
	}
	return f
}

// contentOf reads the whole of f through ReadAt.
func contentOf(t *testing.T, f fsx.File) []byte {
	t.Helper()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != io.EOF {
		require.NoError(t, err)
	}
	require.Equal(t, len(b), n)
	return b
}

// readFile reads name through fsx.ReadFile.
func readFile(t *testing.T, fsys fsx.FS, name string) []byte {
	t.Helper()
	b, err := fsx.ReadFile(fsys, name)
	require.NoError(t, err)
	return b
}

// mapFile maps the first size bytes of f; the test's cleanup unmaps.
func mapFile(t *testing.T, f fsx.File, size int) fsx.Mapping {
	t.Helper()
	m, err := f.Map(size)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unmap() })
	require.Len(t, m.Bytes(), size)
	return m
}

// filled returns n copies of c.
func filled(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

// tree lists every file and directory under root, depth first, with
// directories suffixed by "/", relative to root.
func tree(t *testing.T, fsys fsx.FS, root string) []string {
	t.Helper()
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.ReadDir(dir)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(dir, n)
			info, err := fsys.Stat(p)
			require.NoError(t, err)
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			if info.IsDir {
				out = append(out, rel+"/")
				walk(p)
				continue
			}
			out = append(out, rel)
		}
	}
	walk(root)
	return out
}
