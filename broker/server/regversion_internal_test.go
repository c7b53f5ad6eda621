package server

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/broker"
)

func TestRegVersionMovesForward(t *testing.T) {
	var r regVersion
	v := func(ts, n int64) broker.DataVersion { return broker.DataVersion{Timestamp: ts, Counter: n} }
	steps := []struct{ in, want broker.DataVersion }{
		{v(100, 5), v(100, 5)},
		{v(100, 5), v(100, 5)}, // unchanged: the same
		{v(200, 6), v(200, 6)}, // newer: as it is
		{v(150, 2), v(200, 7)}, // older (a master's, restored): the last one, raised
		{v(150, 2), v(200, 7)}, // unchanged again
		{v(160, 3), v(200, 8)}, // the master's next change, still older
		{v(300, 4), v(300, 4)}, // newer than anything registered
	}
	for i, s := range steps {
		assert.Equal(t, s.want, r.next(s.in), "step %d", i)
	}
}
