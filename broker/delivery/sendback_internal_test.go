package delivery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/broker/metadata"
)

func TestExponentialDelay(t *testing.T) {
	e := &metadata.ExponentialRetryPolicy{Initial: 5000, Max: 60_000, Multiplier: 3}
	for times, want := range []time.Duration{5 * time.Second, 15 * time.Second, 45 * time.Second, time.Minute, time.Minute} {
		assert.Equal(t, want, exponentialDelay(e, int32(times), 0.5), "failures %d", times+1)
	}
	assert.Equal(t, time.Minute, exponentialDelay(e, 1000, 0.5), "no overflow")
	j := &metadata.ExponentialRetryPolicy{Initial: 10_000, Max: 10_000, Multiplier: 2, Jitter: 0.2}
	assert.Equal(t, 8*time.Second, exponentialDelay(j, 0, 0))
	assert.Equal(t, 12*time.Second, exponentialDelay(j, 0, 1))
}
