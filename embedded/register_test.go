package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/remoting"
)

// routedOverRemoting reports whether the nameserver routes topic, asked
// over a new remoting connection (which has no reconnect back-off of its
// own).
func routedOverRemoting(ctx context.Context, c *embedded.Cluster, topic string) bool {
	cl, err := remoting.Dial(ctx, c.NameServerRemotingAddr(), remoting.DialOptions{})
	if err != nil {
		return false
	}
	defer cl.Close()
	resp, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": topic}))
	return err == nil && resp.ResponseCode() == remoting.ResSuccess
}

// After a nameserver outage long enough for the broker's gRPC reconnect
// back-off to grow (it reaches two minutes), the broker registers again
// within one registration period of the nameserver's return, not when its
// back-off ends.
func TestBrokerRegistersSoonAfterNameServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s nameserver outage")
	}
	const period, outage = 2 * time.Second, 10 * time.Second
	c, _ := start(t, embedded.Options{Broker: func(bc *broker.Config) { bc.RegisterNameServerPeriod = period }})
	require.True(t, routedOverRemoting(t.Context(), c, broker.AutoCreateTopicTemplate))

	require.NoError(t, c.StopNameServer(t.Context()))
	time.Sleep(outage) // the outage itself: the broker's retries back off meanwhile
	require.NoError(t, c.StartNameServer(t.Context()))
	back := time.Now()
	require.False(t, routedOverRemoting(t.Context(), c, broker.AutoCreateTopicTemplate), "a new nameserver knows nothing")
	require.Eventually(t, func() bool { return routedOverRemoting(t.Context(), c, broker.AutoCreateTopicTemplate) },
		3*time.Minute, 20*time.Millisecond)
	delay := time.Since(back)
	t.Logf("registered again %s after the nameserver's return (outage %s, registration period %s)", delay.Round(time.Millisecond), outage, period)
	assert.LessOrEqual(t, delay, period, "registered again within one registration period")
}
