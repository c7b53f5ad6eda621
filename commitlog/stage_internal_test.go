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
		b := newStage(max(n, minStage))[:n]
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

// A pending staging buffer that fills up moves into the largest spare
// with room, and the buffer it leaves becomes a spare itself; the spares
// stay within stageSpares buffers and stageSpareBytes, but for one alone
// of up to twice MaxPendingBytes.
func TestStageSpares(t *testing.T) {
	l := &Log{cfg: Config{MaxPendingBytes: 16 << 20}}
	t.Cleanup(func() {
		freeStage(l.pend)
		for _, b := range l.takeSpares() {
			freeStage(b)
		}
	})
	l.pend = newStage(minStage)
	small := &l.pend[:1][0]
	l.pend = l.pend[:minStage]
	l.pend[0], l.pend[minStage-1] = 'a', 'z'
	big := newStage(4 << 20)
	bigAt := &big[:1][0]
	require.True(t, l.keepSpare(big))

	l.growPend(1)
	require.Same(t, bigAt, &l.pend[0], "moved into the spare")
	assert.Equal(t, minStage, len(l.pend))
	assert.Equal(t, byte('a'), l.pend[0])
	assert.Equal(t, byte('z'), l.pend[minStage-1])
	require.Len(t, l.spares, 1, "the full buffer is kept")
	assert.Same(t, small, &l.spares[0][:1][0])

	assert.Nil(t, l.spareStage(minStage+1), "no spare that large")
	taken := l.spareStage(minStage)
	assert.Same(t, small, &taken[:1][0])
	assert.Empty(t, taken, "emptied")
	assert.Empty(t, l.spares)
	freeStage(taken)

	for range stageSpares {
		require.True(t, l.keepSpare(newStage(minStage)))
	}
	extra := newStage(minStage)
	assert.False(t, l.keepSpare(extra), "at most stageSpares")
	freeStage(extra)
	for _, b := range l.takeSpares() {
		freeStage(b)
	}
	huge := newStage(stageSpareBytes + 1)
	require.True(t, l.keepSpare(huge), "one alone may be larger")
	extra = newStage(minStage)
	assert.False(t, l.keepSpare(extra), "at most stageSpareBytes")
	freeStage(extra)
	for _, b := range l.takeSpares() {
		freeStage(b)
	}
	huge = newStage(2*l.cfg.MaxPendingBytes + 1)
	assert.False(t, l.keepSpare(huge), "at most twice MaxPendingBytes")
	freeStage(huge)
	assert.False(t, l.keepSpare(nil))
}
