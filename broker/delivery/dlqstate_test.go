package delivery

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRangeSet(t *testing.T) {
	var r rangeSet
	for _, x := range [][2]int64{{5, 6}, {7, 8}, {1, 2}, {6, 7}, {20, 25}, {10, 11}} {
		r.add(x[0], x[1])
		assert.True(t, r.valid(), "%v", r)
	}
	assert.Equal(t, rangeSet{{1, 2}, {5, 8}, {10, 11}, {20, 25}}, r)
	for o, want := range map[int64]bool{0: false, 1: true, 2: false, 5: true, 7: true, 8: false, 24: true, 25: false} {
		assert.Equal(t, want, r.has(o), "has(%d)", o)
	}
	assert.Equal(t, int64(8), r.end(5))
	assert.Equal(t, int64(9), r.end(9))
	assert.Equal(t, int64(1+3+1+5), r.count(0, 100))
	assert.Equal(t, int64(2+1+2), r.count(6, 22))
	r.add(2, 5)
	assert.Equal(t, rangeSet{{1, 8}, {10, 11}, {20, 25}}, r, "touching ranges merge")
	r.dropBelow(22)
	assert.Equal(t, rangeSet{{22, 25}}, r)
	r.dropBelow(30)
	assert.Empty(t, r)
	assert.False(t, rangeSet{{3, 3}}.valid())
	assert.False(t, rangeSet{{1, 3}, {3, 4}}.valid(), "adjacent ranges are merged in a valid set")
}

func TestDLQGroupAdvance(t *testing.T) {
	g := &dlqGroup{Resends: map[int64]dlqMark{3: {Count: 1}, 9: {Count: 2}}, Purged: rangeSet{{5, 8}, {12, 13}}}
	assert.True(t, g.advance(5))
	assert.Equal(t, int64(8), g.MinOffset, "past the purged offsets at 5")
	assert.Equal(t, rangeSet{{12, 13}}, g.Purged)
	assert.Equal(t, map[int64]dlqMark{9: {Count: 2}}, g.Resends, "marks below the min offset go")
	assert.False(t, g.advance(4), "never back")
}
