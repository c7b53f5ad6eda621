package nameserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
)

// TestConcurrentUse registers, queries, disconnects and expires at once;
// run it under -race. Afterwards every topic listed must be routable and
// every route consistent.
func TestConcurrentUse(t *testing.T) {
	clk := newClock()
	r := newRegistry(t, clk, nameserver.Config{BrokerExpiry: 50 * time.Millisecond, ScanInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	var run sync.WaitGroup
	run.Go(func() { r.Run(ctx) })
	defer run.Wait()
	defer cancel()

	const brokers, rounds = 8, 300
	var wg sync.WaitGroup
	for b := range brokers {
		wg.Go(func() {
			for i := range rounds {
				rg := reg(fmt.Sprintf("b%d", b%4), int64(b/4), fmt.Sprintf("10.0.0.%d:8081", b), "T", fmt.Sprintf("T%d", i%5))
				rg.Conn = fmt.Sprintf("conn-%d", i%3)
				rg.DataVersion = nameserver.DataVersion{Timestamp: int64(i)}
				_, err := r.Register(rg)
				assert.NoError(t, err)
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range rounds {
				if route, err := r.Route("T"); err == nil {
					assert.Len(t, route.BrokerDatas, len(route.QueueDatas))
				}
				r.Topics()
				r.ClusterInfo()
				r.Brokers()
			}
		})
	}
	wg.Go(func() {
		for i := range rounds {
			clk.Advance(time.Millisecond)
			if i%50 == 0 {
				r.Disconnected(fmt.Sprintf("conn-%d", i%3))
			}
		}
	})
	wg.Wait()

	for _, topic := range r.Topics() {
		route := mustRoute(t, r, topic)
		require.Len(t, route.BrokerDatas, len(route.QueueDatas))
		for i, bd := range route.BrokerDatas {
			assert.Equal(t, bd.BrokerName, route.QueueDatas[i].BrokerName)
			assert.NotEmpty(t, bd.BrokerAddrs)
		}
	}
	clk.Advance(time.Minute)
	assert.Eventually(t, func() bool { return len(r.Brokers()) == 0 }, 5*time.Second, time.Millisecond, "all expire")
	assert.Empty(t, r.Topics())
}
