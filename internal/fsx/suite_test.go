package fsx_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// The tests in this file run the same body against every backend: the real
// filesystem, MemFS, and both wrapped in WithFaults with no faults set.

func TestFileReadWriteTruncate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		name := filepath.Join(dir, "f")
		f := createFile(t, fsys, name, []byte("hello"))
		assert.Equal(t, name, f.Name())

		size, err := f.Size()
		require.NoError(t, err)
		assert.Equal(t, int64(5), size)

		n, err := f.WriteAt([]byte("world"), 10) // leaves a hole of zeros
		require.NoError(t, err)
		assert.Equal(t, 5, n)
		assert.Equal(t, []byte("hello\x00\x00\x00\x00\x00world"), contentOf(t, f))

		b := make([]byte, 8)
		n, err = f.ReadAt(b, 12) // runs past the end
		assert.ErrorIs(t, err, io.EOF)
		assert.Equal(t, 3, n)
		assert.Equal(t, []byte("rld"), b[:n])
		n, err = f.ReadAt(b, 100) // starts past the end
		assert.ErrorIs(t, err, io.EOF)
		assert.Equal(t, 0, n)

		require.NoError(t, f.Truncate(3))
		assert.Equal(t, []byte("hel"), contentOf(t, f))
		require.NoError(t, f.Truncate(6))
		assert.Equal(t, []byte("hel\x00\x00\x00"), contentOf(t, f))
		require.NoError(t, f.Sync())

		info, err := fsys.Stat(name)
		require.NoError(t, err)
		assert.Equal(t, fsx.Info{Size: 6}, info)
		info, err = fsys.Stat(dir)
		require.NoError(t, err)
		assert.True(t, info.IsDir)
		assert.True(t, fsx.Exists(fsys, name))
		assert.False(t, fsx.Exists(fsys, filepath.Join(dir, "nope")))

		// A second handle sees the same file; O_TRUNC empties it.
		require.NoError(t, f.Close())
		g, err := fsys.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
		require.NoError(t, err)
		defer g.Close()
		assert.Empty(t, contentOf(t, g))
	})
}

func TestFileAllocate(t *testing.T) {
	tests := []struct {
		name     string
		initial  int // bytes of 0xAA already in the file
		off, n   int64
		wantSize int64
	}{
		{"empty file", 0, 0, 8192, 8192},
		{"extends past the data", 100, 4096, 4096, 8192},
		{"unaligned end", 10, 0, 5000, 5000},
		{"inside the file keeps the size", 9000, 0, 4096, 9000},
		{"overlapping the end", 6000, 4096, 4096, 8192},
	}
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := createFile(t, fsys, filepath.Join(dir, "alloc"), filled(0xAA, tt.initial))
				require.NoError(t, f.Allocate(tt.off, tt.n))
				got := contentOf(t, f)
				require.Len(t, got, int(tt.wantSize))
				assert.Equal(t, filled(0xAA, tt.initial), got[:tt.initial], "data before the allocation survives")
				assert.Equal(t, filled(0, int(tt.wantSize)-tt.initial), got[tt.initial:], "allocated bytes read as zeros")
			})
		}
	})
}

func TestFileZeroRange(t *testing.T) {
	const size = 3 * fsx.PageSize
	tests := []struct {
		name   string
		off, n int64
	}{
		{"middle, unaligned", fsx.PageSize + 100, 5000},
		{"first byte", 0, 1},
		{"one whole page", fsx.PageSize, fsx.PageSize},
		{"whole file", 0, size},
		{"runs past the end", size - 10, 4 * fsx.PageSize},
		{"entirely past the end", size + fsx.PageSize, fsx.PageSize},
	}
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := createFile(t, fsys, filepath.Join(dir, "zero"), filled(0xAA, size))
				require.NoError(t, f.ZeroRange(tt.off, tt.n))

				got := contentOf(t, f)
				require.Len(t, got, size, "ZeroRange never changes the size")
				want := filled(0xAA, size)
				for i := tt.off; i < min(tt.off+tt.n, size); i++ {
					want[i] = 0
				}
				assert.Equal(t, want, got)
			})
		}
	})
}

func TestFileMap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		t.Run("shorter file is refused", func(t *testing.T) {
			f := createFile(t, fsys, filepath.Join(dir, "short"), filled(1, 100))
			for _, size := range []int{0, 101, fsx.PageSize, 1 << 20} {
				m, err := f.Map(size)
				assert.Error(t, err, "size=%d", size)
				assert.Nil(t, m, "size=%d", size)
			}
		})

		t.Run("writes are shared both ways", func(t *testing.T) {
			const size = 2 * fsx.PageSize
			f := createFile(t, fsys, filepath.Join(dir, "shared"), nil)
			require.NoError(t, f.Allocate(0, size))
			m := mapFile(t, f, size)

			copy(m.Bytes()[5000:], "through the mapping")
			b := make([]byte, 19)
			_, err := f.ReadAt(b, 5000)
			require.NoError(t, err)
			assert.Equal(t, []byte("through the mapping"), b)

			_, err = f.WriteAt([]byte("through the file"), 100)
			require.NoError(t, err)
			assert.Equal(t, []byte("through the file"), m.Bytes()[100:116])
		})

		t.Run("map a prefix", func(t *testing.T) {
			f := createFile(t, fsys, filepath.Join(dir, "prefix"), filled(7, 3*fsx.PageSize))
			m := mapFile(t, f, fsx.PageSize)
			assert.Equal(t, filled(7, fsx.PageSize), m.Bytes())
		})

		t.Run("sync, populate and sequential on unaligned ranges", func(t *testing.T) {
			const size = 3*fsx.PageSize + 100 // not a whole number of pages
			f := createFile(t, fsys, filepath.Join(dir, "ranges"), nil)
			require.NoError(t, f.Allocate(0, size))
			m := mapFile(t, f, size)
			for i := range m.Bytes() {
				m.Bytes()[i] = byte(i)
			}
			ranges := []struct {
				name   string
				off, n int
			}{
				{"first byte", 0, 1},
				{"inside a page", 5000, 10},
				{"straddles a page boundary", fsx.PageSize - 1, 2},
				{"last partial page", 3*fsx.PageSize + 50, 50},
				{"runs past the end", size - 10, fsx.PageSize},
				{"whole mapping", 0, size},
				{"empty", 777, 0},
			}
			for _, r := range ranges {
				assert.NoError(t, m.Sync(r.off, r.n), "sync %s", r.name)
				assert.NoError(t, m.Populate(r.off, r.n), "populate %s", r.name)
				assert.NoError(t, m.Sequential(r.off, r.n), "sequential %s", r.name)
				assert.NoError(t, m.Random(r.off, r.n), "random %s", r.name)
			}
			got := contentOf(t, f)
			for i := range got {
				if got[i] != byte(i) {
					require.Equal(t, byte(i), got[i], "byte %d", i)
				}
			}
		})

		t.Run("unmap twice", func(t *testing.T) {
			f := createFile(t, fsys, filepath.Join(dir, "unmap"), filled(3, fsx.PageSize))
			m, err := f.Map(fsx.PageSize)
			require.NoError(t, err)
			require.NoError(t, m.Unmap())
			assert.NoError(t, m.Unmap())
			assert.Nil(t, m.Bytes())
		})

		t.Run("mapping outlives close", func(t *testing.T) {
			f := createFile(t, fsys, filepath.Join(dir, "closed"), filled(0, fsx.PageSize))
			m := mapFile(t, f, fsx.PageSize)
			require.NoError(t, f.Close())
			copy(m.Bytes(), "after close")
			require.NoError(t, m.Sync(0, 11))
			assert.Equal(t, []byte("after close"), readFile(t, fsys, f.Name())[:11])
		})
	})
}

func TestReadDirSorted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		for _, n := range []string{"c", "a", "10", "b", "2"} {
			createFile(t, fsys, filepath.Join(dir, n), nil)
		}
		require.NoError(t, fsys.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755))
		createFile(t, fsys, filepath.Join(dir, "sub", "inner"), nil)

		names, err := fsys.ReadDir(dir)
		require.NoError(t, err)
		assert.Equal(t, []string{"10", "2", "a", "b", "c", "sub"}, names)

		names, err = fsys.ReadDir(filepath.Join(dir, "sub"))
		require.NoError(t, err)
		assert.Equal(t, []string{"deeper", "inner"}, names)

		names, err = fsys.ReadDir(filepath.Join(dir, "sub", "deeper"))
		require.NoError(t, err)
		assert.Empty(t, names)

		_, err = fsys.ReadDir(filepath.Join(dir, "missing"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
}

func TestNamespaceOps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		p := func(name string) string { return filepath.Join(dir, name) }

		createFile(t, fsys, p("a"), []byte("A"))
		createFile(t, fsys, p("b"), []byte("B"))
		require.NoError(t, fsys.Rename(p("a"), p("c")))
		assert.False(t, fsx.Exists(fsys, p("a")))
		assert.Equal(t, []byte("A"), readFile(t, fsys, p("c")))

		require.NoError(t, fsys.Rename(p("c"), p("b")), "rename replaces the target")
		assert.Equal(t, []byte("A"), readFile(t, fsys, p("b")))
		require.NoError(t, fsys.SyncDir(dir))

		require.NoError(t, fsys.Remove(p("b")))
		assert.False(t, fsx.Exists(fsys, p("b")))
		names, err := fsys.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, names)

		require.NoError(t, fsys.MkdirAll(p("x/y/z"), 0o755))
		require.NoError(t, fsys.MkdirAll(p("x/y"), 0o755), "MkdirAll of an existing directory")
		assert.ErrorIs(t, fsys.Remove(p("x")), syscall.ENOTEMPTY, "directory holding only a directory")
		createFile(t, fsys, p("x/y/z/f"), nil)
		assert.ErrorIs(t, fsys.Remove(p("x/y/z")), syscall.ENOTEMPTY, "directory holding a file")
		require.NoError(t, fsys.Remove(p("x/y/z/f")))
		require.NoError(t, fsys.Remove(p("x/y/z")))
		require.NoError(t, fsys.SyncDir(p("x/y")))
		assert.False(t, fsx.Exists(fsys, p("x/y/z")))

		createFile(t, fsys, p("file"), nil)
		assert.ErrorIs(t, fsys.MkdirAll(p("file"), 0o755), syscall.ENOTDIR)
		assert.ErrorIs(t, fsys.MkdirAll(p("file/sub"), 0o755), syscall.ENOTDIR)
		_, err = fsys.OpenFile(p("x"), os.O_RDWR|os.O_CREATE, 0o644)
		assert.ErrorIs(t, err, syscall.EISDIR, "creating a file over a directory")
		assert.ErrorIs(t, fsys.Rename(p("file"), p("x")), fs.ErrExist, "renaming a file over a directory, as os.Rename")
		_, err = fsys.OpenFile(p("file"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		assert.ErrorIs(t, err, fs.ErrExist)
	})
}

func TestNotExistErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(fsys fsx.FS, dir string) error
	}{
		{"open", func(fsys fsx.FS, dir string) error {
			_, err := fsys.OpenFile(filepath.Join(dir, "missing"), os.O_RDWR, 0)
			return err
		}},
		{"create in missing dir", func(fsys fsx.FS, dir string) error {
			_, err := fsys.OpenFile(filepath.Join(dir, "nodir", "f"), os.O_RDWR|os.O_CREATE, 0o644)
			return err
		}},
		{"stat", func(fsys fsx.FS, dir string) error {
			_, err := fsys.Stat(filepath.Join(dir, "missing"))
			return err
		}},
		{"readdir", func(fsys fsx.FS, dir string) error {
			_, err := fsys.ReadDir(filepath.Join(dir, "missing"))
			return err
		}},
		{"remove", func(fsys fsx.FS, dir string) error { return fsys.Remove(filepath.Join(dir, "missing")) }},
		{"rename missing source", func(fsys fsx.FS, dir string) error {
			return fsys.Rename(filepath.Join(dir, "missing"), filepath.Join(dir, "other"))
		}},
		{"rename into missing dir", func(fsys fsx.FS, dir string) error {
			f, err := fsys.OpenFile(filepath.Join(dir, "src"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			f.Close()
			return fsys.Rename(filepath.Join(dir, "src"), filepath.Join(dir, "nodir", "dst"))
		}},
		{"syncdir", func(fsys fsx.FS, dir string) error { return fsys.SyncDir(filepath.Join(dir, "missing")) }},
		{"readfile", func(fsys fsx.FS, dir string) error {
			_, err := fsx.ReadFile(fsys, filepath.Join(dir, "missing"))
			return err
		}},
	}
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.do(fsys, dir)
				require.Error(t, err)
				assert.ErrorIs(t, err, fs.ErrNotExist)
			})
		}
	})
}

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		name  string
		steps [][]byte // written in turn; the last is what ReadFile must see
	}{
		{"create", [][]byte{[]byte("v1")}},
		{"replace with shorter", [][]byte{[]byte("a longer first version"), []byte("v2")}},
		{"replace with longer", [][]byte{[]byte("v1"), []byte("a longer second version")}},
		{"empty", [][]byte{[]byte("v1"), {}}},
	}
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				sub := filepath.Join(dir, "case"+string(rune('a'+i)))
				require.NoError(t, fsys.MkdirAll(sub, 0o755))
				name := filepath.Join(sub, "meta.json")
				for _, data := range tt.steps {
					require.NoError(t, fsx.WriteFileAtomic(fsys, name, data))
				}
				assert.Equal(t, tt.steps[len(tt.steps)-1], readFile(t, fsys, name))
				names, err := fsys.ReadDir(sub)
				require.NoError(t, err)
				assert.Equal(t, []string{"meta.json"}, names, "no .tmp left behind")
			})
		}
	})
}

func TestWriteFileAtomicReportsStep(t *testing.T) {
	tests := []struct {
		op      fsx.Op
		wantMsg string
	}{
		{fsx.OpOpen, "fsx: create"},
		{fsx.OpWrite, "fsx: write"},
		{fsx.OpSync, "fsx: sync"},
		{fsx.OpRename, "fsx: rename"},
		{fsx.OpSyncDir, "fsx: sync dir"},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			var faults fsx.Faults
			faults.Add(fsx.Fault{Op: tt.op, Err: syscall.EIO})
			mem := fsx.NewMemFS()
			require.NoError(t, mem.MkdirAll("/d", 0o755))
			err := fsx.WriteFileAtomic(fsx.WithFaults(mem, &faults), "/d/meta", []byte("x"))
			require.ErrorIs(t, err, syscall.EIO)
			assert.Contains(t, err.Error(), tt.wantMsg)
			assert.Contains(t, err.Error(), "/d/meta")
			if tt.op != fsx.OpSyncDir {
				assert.False(t, fsx.Exists(mem, "/d/meta"), "nothing replaced before the failing step")
			}
		})
	}
}

func TestReadFileEmpty(t *testing.T) {
	forEachBackend(t, func(t *testing.T, fsys fsx.FS, dir string) {
		name := filepath.Join(dir, "empty")
		createFile(t, fsys, name, nil)
		b, err := fsx.ReadFile(fsys, name)
		require.NoError(t, err)
		assert.Empty(t, b)
		assert.False(t, errors.Is(err, io.EOF))
	})
}
