package commitlog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The written staging buffers stay readable newest-last, up to stageKeep
// of them and stageKeepBytes besides the newest; copyStaged copies across
// consecutive ones; dropStaged (at Close) drops them all.
func TestStagedBuffers(t *testing.T) {
	l := &Log{}
	stage := func(off int64, n int, c byte) stagedBytes {
		b := growStage(nil, n)[:n]
		for i := range b {
			b[i] = c
		}
		return stagedBytes{b: b, mem: b, off: off}
	}
	var gone [][]byte
	push := func(s stagedBytes) {
		gone = l.pushStaged(gone, s)
	}
	t.Cleanup(func() {
		for _, b := range append(gone, l.dropStaged()...) {
			freeStage(b)
		}
	})
	const pushed = 200
	for i := range pushed {
		push(stage(int64(i)*4096, 4096, byte(i)))
	}
	kept := min(stageKeep, stageKeepBytes/minStage+1) // each holds minStage
	require.Equal(t, kept, len(l.staged))
	require.Equal(t, pushed-kept, len(gone))
	for i, b := range gone {
		require.Equal(t, byte(i), b[0], "the oldest go first")
	}
	first := int64(pushed-kept) * 4096 // the oldest still readable
	end := int64(pushed) * 4096

	dst := make([]byte, 3*4096)
	assert.Zero(t, l.copyStaged(dst, first-1), "no longer readable")
	assert.Zero(t, l.copyStaged(dst, end), "not yet written")
	n := l.copyStaged(dst, end-4096-96)
	require.Equal(t, 96+4096, n, "on to the end of the newest")
	assert.Equal(t, byte(pushed-2), dst[0])
	assert.Equal(t, byte(pushed-1), dst[96])
	n = l.copyStaged(dst[:100], first)
	assert.Equal(t, 100, n, "to the end of dst")
	assert.Equal(t, byte(pushed-kept), dst[0])

	push(stage(end, stageKeepBytes, 'f'))
	push(stage(end+stageKeepBytes, 4096, 'g'))
	require.Equal(t, 2, len(l.staged), "the others make more than stageKeepBytes")
	assert.Equal(t, byte('f'), l.staged[0].b[0])

	gone = append(gone, l.dropStaged()...)
	assert.Empty(t, l.staged)
	assert.Zero(t, l.copyStaged(dst, end))
}
