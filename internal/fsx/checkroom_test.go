package fsx_test

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// CheckRoom refuses a size above the free space with ENOSPC, naming both,
// and lets through what fits and what it cannot tell.
func TestCheckRoom(t *testing.T) {
	m := fsx.NewMemFS()
	m.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 1000, Free: 100} })
	require.NoError(t, fsx.CheckRoom(m, "/", 100), "exactly the free space")
	err := fsx.CheckRoom(m, "/", 101)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Contains(t, err.Error(), "101 bytes needed in /, 100 free")

	m.SetUsage(func(int64) fsx.Usage { return fsx.Usage{} }) // no size known
	assert.NoError(t, fsx.CheckRoom(m, "/", 1<<40))
}
