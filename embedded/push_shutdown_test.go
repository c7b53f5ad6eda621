package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// Shutdown with a context that ended before the call (`defer
// c.Shutdown(ctx)` after a signal) lets the handler in flight finish, with
// its context live, and commits its offset; it does not cancel it at once.
func TestShutdownWithEndedContextDrains(t *testing.T) {
	tests := []struct {
		name string
		opts []client.PushConsumerOption
	}{
		{"concurrent", nil},
		{"ordered", []client.PushConsumerOption{client.WithOrdered()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := newPushCluster(t, "Drain", 1)
			pc.send(t, "Drain", "m", 0, 1, nil, nil)
			started, release := make(chan struct{}), make(chan struct{})
			var handlerErr error
			c := pc.consumer(t, "c1", "drain", "Drain", "*", func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
				close(started)
				select {
				case <-release:
					return client.ConsumeSuccess
				case <-ctx.Done():
					handlerErr = ctx.Err()
					return client.ConsumeRetryLater
				}
			}, tt.opts...)
			<-started

			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			done := make(chan error, 1)
			go func() { done <- c.Shutdown(ctx) }()
			// Shutdown has begun once it let go of its queues.
			require.Eventually(t, func() bool { return len(c.Assigned()) == 0 }, 10*time.Second, time.Millisecond)
			close(release)
			require.NoError(t, <-done)
			assert.NoError(t, handlerErr, "the handler's context was canceled")

			progress, err := pc.admin.ConsumerProgress(t.Context(), "drain", "Drain")
			require.NoError(t, err)
			require.Len(t, progress, 1)
			assert.Equal(t, int64(1), progress[0].ConsumerOffset, "the drained message's offset is committed")
			assert.ErrorIs(t, c.Shutdown(t.Context()), client.ErrClosed)
		})
	}
}

// The grace of an ended context is the consumer's WithShutdownTimeout:
// a handler that waits for its context is canceled when it runs out, and
// Shutdown says so.
func TestShutdownGraceEnds(t *testing.T) {
	pc := newPushCluster(t, "Grace", 1)
	pc.send(t, "Grace", "m", 0, 1, nil, nil)
	started := make(chan struct{})
	c := pc.consumer(t, "c1", "grace", "Grace", "*", func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		close(started)
		<-ctx.Done()
		return client.ConsumeSuccess
	}, client.WithShutdownTimeout(50*time.Millisecond))
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, c.Shutdown(ctx), context.DeadlineExceeded)
}
