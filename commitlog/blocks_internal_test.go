package commitlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With every block in use by other readers, a reader of another block is
// not made to wait for one: get returns nil and the caller reads through
// the page cache. A reader of a block being loaded waits for that load.
func TestBlockCacheFullDoesNotWait(t *testing.T) {
	var c blockCache
	c.init()
	for i := range c.blocks {
		c.blocks[i] = block{base: int64(i) * blockBytes, n: blockBytes, refs: 1}
	}
	seg := &segment{base: 0, size: 64 * blockBytes}
	done := make(chan *block, 1)
	go func() { done <- c.get(nil, seg, nil, cacheBlocks*blockBytes+10) }()
	select {
	case b := <-done:
		assert.Nil(t, b, "no block to read into: read through the page cache")
	case <-time.After(time.Minute): // a deadlock guard, not a timing assertion
		t.Fatal("get waited for a block with every block in use")
	}

	// A held block is shared: its reader gets it at once.
	b := c.get(nil, seg, nil, 3*blockBytes+5)
	require.NotNil(t, b)
	assert.Equal(t, int64(3*blockBytes), b.base)
	assert.Equal(t, 2, b.refs)
	c.release(b)
	assert.Equal(t, 1, b.refs)
}
