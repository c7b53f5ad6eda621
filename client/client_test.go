package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is a Config for the fake nameserver ns, logging to the test.
func testConfig(t testing.TB, ns *fakeNameServer) Config {
	t.Helper()
	return Config{
		NameServers:  []string{ns.addr},
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		RouteRefresh: time.Hour,
	}
}

// newTestProducer starts a producer that Close stops at the end of the test.
func newTestProducer(t testing.TB, cfg Config, opts ...ProducerOption) *Producer {
	t.Helper()
	p, err := NewProducer(t.Context(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// first is a selector that always takes the first queue it is given.
var first = SelectorFunc(func(_ string, qs []Queue, _ *Message) Queue { return qs[0] })

func TestConfigDefaults(t *testing.T) {
	in := Config{}
	c := in.withDefaults()
	assert.Equal(t, []string{DefaultNameServer}, c.NameServers)
	assert.Equal(t, DefaultRouteRefresh, c.RouteRefresh)
	assert.NotNil(t, c.Logger)
	assert.Regexp(t, `^.+@\d+@[0-9a-f]{8}$`, c.ClientID)
	assert.Empty(t, in.NameServers, "withDefaults must not modify the caller's Config")
	require.NoError(t, c.Validate())
}

func TestConfigValidate(t *testing.T) {
	err := Config{NameServers: []string{""}, RouteRefresh: -time.Second}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NameServers[0]")
	assert.Contains(t, err.Error(), "RouteRefresh")

	_, err = NewProducer(t.Context(), Config{}, WithRetries(-1))
	require.Error(t, err)
	_, err = NewPullConsumer(t.Context(), Config{}, "")
	require.ErrorIs(t, err, ErrInvalidArgument)
}
