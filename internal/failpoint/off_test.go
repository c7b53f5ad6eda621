//go:build !failpoint

package failpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Without the tag the points are compiled out: Inject never fails and
// Enable says how to get them.
func TestCompiledOut(t *testing.T) {
	assert.False(t, Enabled)
	assert.NoError(t, Inject("commitlog/flush-before-sync"))
	assert.ErrorContains(t, Enable("x", "kill"), "-tags failpoint")
	assert.Zero(t, Hits("x"))
}
