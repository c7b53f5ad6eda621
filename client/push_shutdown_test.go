package client

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shutdown of a consumer never started, or whose Start failed, releases
// everything NewPushConsumer started (the route refresher, connections)
// and returns nil; a second Shutdown returns ErrClosed.
func TestShutdownWithoutStart(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, b)
	tests := []struct {
		name  string
		start bool // a Start that fails
	}{
		{"never started", false},
		{"start failed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, ns)
			cfg.RouteRefresh = 10 * time.Millisecond // the refresher runs meanwhile
			baseline := runtime.NumGoroutine()
			p, err := NewPushConsumer(t.Context(), cfg, "g", func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
			require.NoError(t, err)
			if tt.start {
				require.NoError(t, p.Subscribe("Missing", "*"))
				require.Error(t, p.Start(t.Context()), "the topic does not exist")
			}
			require.NoError(t, p.Shutdown(t.Context()))
			requireGoroutinesAtMost(t, baseline)
			assert.ErrorIs(t, p.Shutdown(t.Context()), ErrClosed)
			assert.ErrorIs(t, p.Start(t.Context()), ErrInvalidArgument, "no Start after Shutdown")
		})
	}
}

// WithShutdownTimeout must be positive.
func TestShutdownTimeoutOption(t *testing.T) {
	o := defaultPushOptions()
	assert.Equal(t, DefaultShutdownTimeout, o.shutdownGrace)
	WithShutdownTimeout(0)(&o)
	assert.ErrorIs(t, o.validate(), ErrInvalidArgument)
}

// requireGoroutinesAtMost waits until at most n goroutines run (those of
// closed connections end shortly after), polling on this goroutine: a
// poller of its own, as require.Eventually's, would count itself.
func requireGoroutinesAtMost(t *testing.T, n int) {
	t.Helper()
	for range 2000 {
		if runtime.NumGoroutine() <= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
}
