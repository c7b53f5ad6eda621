package grpcbuf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGetPut(t *testing.T) {
	p := &Pool{}
	for _, n := range []int{0, 1, 255, 256, 257, 1000, 4096, 300 << 10, 16 << 20, 16<<20 + 1} {
		b := p.Get(n)
		assert.Len(t, *b, n, "Get(%d)", n)
		if s := shift(n); s >= minShift && s <= maxShift {
			assert.Equal(t, 1<<s, cap(*b), "Get(%d) comes from its tier", n)
		}
		p.Put(b)
	}
	b := p.Get(1000)
	copy(*b, "dirty")
	p.Put(b)
	again := p.Get(600) // the same 1 KiB tier
	assert.Len(t, *again, 600)
	assert.Equal(t, 1024, cap(*again))

	odd := make([]byte, 10, 1000) // not a tier's size: dropped
	p.Put(&odd)
	assert.Equal(t, 0, shift(1))
	assert.Equal(t, 10, shift(1024))
	assert.Equal(t, 11, shift(1025))
}
