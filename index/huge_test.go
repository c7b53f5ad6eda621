package index

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
)

// A new index file, whose slots are all touched soon and whose entries
// fill in order, asks for huge pages; a file reopened at startup, read by
// queries at random, does not.
func TestNewFilesAskForHugePages(t *testing.T) {
	dir := t.TempDir()
	x, err := createFile(fsx.OS, dir, "f1", 1024, 4096)
	require.NoError(t, err)
	assert.Contains(t, testutil.VMFlags(t, x.b), "hg", "a new file")
	x.unmap()

	y, err := openFile(fsx.OS, dir, "f1")
	require.NoError(t, err)
	defer y.unmap()
	assert.NotContains(t, testutil.VMFlags(t, y.b), "hg", "a reopened file")
}
