package nameserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
)

// TestRunExpiresSilentBrokers runs the real loop with the default expiry
// (120 s) and scan interval (10 s) on synctest's clock.
func TestRunExpiresSilentBrokers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, nil, nameserver.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { r.Run(ctx) })
		defer wg.Wait()
		defer cancel()

		mustRegister(t, r, reg("refreshed", 0, "10.0.0.1:8081", "T"))
		mustRegister(t, r, reg("silent", 0, "10.0.0.2:8081", "T", "U"))

		time.Sleep(60 * time.Second)
		mustRegister(t, r, reg("refreshed", 0, "10.0.0.1:8081", "T"))

		time.Sleep(59 * time.Second) // t=119 s
		synctest.Wait()
		assert.Equal(t, []string{"refreshed/0", "silent/0"}, brokerIDs(r), "at 119 s nobody has expired")

		time.Sleep(time.Second) // t=120 s: the scan finds "silent" 120 s quiet
		synctest.Wait()
		assert.Equal(t, []string{"refreshed/0"}, brokerIDs(r))
		assert.Equal(t, []string{"T"}, r.Topics())

		time.Sleep(59 * time.Second) // t=179 s: 119 s after the refresh
		synctest.Wait()
		assert.Equal(t, []string{"refreshed/0"}, brokerIDs(r), "refreshed at 60 s, alive at 179 s")

		time.Sleep(time.Second) // t=180 s: the scan finds it 120 s quiet
		synctest.Wait()
		assert.Empty(t, r.Brokers())
		_, err := r.Route("T")
		require.ErrorIs(t, err, nameserver.ErrTopicNotFound)
	})
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, nil, nameserver.Config{ScanInterval: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned before its context ended")
		default:
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return after its context ended")
		}
	})
}

// TestExpiryBoundary checks the expiry rule on an injected clock, one scan
// at a time, and the log line it writes.
func TestExpiryBoundary(t *testing.T) {
	clk := newClock()
	var logs bytes.Buffer
	r := newRegistry(t, clk, nameserver.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))

	clk.Advance(60 * time.Second)
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))
	clk.Advance(119 * time.Second)
	assert.Equal(t, 0, r.Expire(), "119 s after the refresh")
	mustRoute(t, r, "T")

	clk.Advance(time.Second)
	assert.Equal(t, 1, r.Expire(), "120 s after the refresh")
	assert.Empty(t, r.Brokers())
	assert.Contains(t, logs.String(), `msg="broker expired after 2m0s of silence"`)
	assert.Equal(t, 0, r.Expire(), "nothing left")
}

func TestExpiryConfigured(t *testing.T) {
	clk := newClock()
	r := newRegistry(t, clk, nameserver.Config{BrokerExpiry: 10 * time.Second})
	mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))
	mustRegister(t, r, reg("b1", 1, "10.0.0.2:8081", "T"))
	clk.Advance(5 * time.Second)
	mustRegister(t, r, reg("b1", 1, "10.0.0.2:8081", "T"))
	clk.Advance(5 * time.Second)

	assert.Equal(t, 1, r.Expire())
	assert.Equal(t, []string{"b1/1"}, brokerIDs(r), "the master expired, the slave stays")
	assert.Equal(t, map[int64]string{1: "10.0.0.2:8081"}, mustRoute(t, r, "T").BrokerDatas[0].BrokerAddrs)
}
