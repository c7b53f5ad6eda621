package fsx_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
)

// A mapping asks for huge pages only when told to; a mapping marked
// random access refuses them, as it reads nothing ahead and a fault would
// fill a 2 MiB folio.
func TestOSHugeAndRandom(t *testing.T) {
	const size = 4 << 20
	f := createFile(t, fsx.OS, filepath.Join(t.TempDir(), "seg"), nil)
	require.NoError(t, f.Allocate(0, size))
	mapping := func() fsx.Mapping {
		m, err := f.Map(size)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Unmap() })
		return m
	}

	plain := mapping()
	assert.NotContains(t, testutil.VMFlags(t, plain.Bytes()), "hg", "no huge pages unless asked")

	huge := mapping()
	require.NoError(t, huge.Huge(0, size))
	assert.Contains(t, testutil.VMFlags(t, huge.Bytes()), "hg", "Huge: madvise HUGEPAGE")

	random := mapping()
	require.NoError(t, random.Random(0, size))
	flags := testutil.VMFlags(t, random.Bytes())
	assert.Contains(t, flags, "nh", "Random: madvise NOHUGEPAGE")
	assert.Contains(t, flags, "rr", "and RANDOM")
}
