package broker_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
)

// Hooks added after Open hear every membership change (a join, a leave),
// not refreshes, until removed.
func TestConsumersChangedHook(t *testing.T) {
	b := openBroker(t, testConfig(t))
	var mu sync.Mutex
	var got1, got2 []string
	remove1 := b.AddConsumersChangedHook(func(g string) { mu.Lock(); got1 = append(got1, g); mu.Unlock() })
	remove2 := b.AddConsumersChangedHook(func(g string) { mu.Lock(); got2 = append(got2, g); mu.Unlock() })
	hb := broker.Heartbeat{ClientID: "c1", Group: "G", Subscriptions: []broker.Subscription{{Topic: "T", Expression: "*"}}}
	require.NoError(t, b.Heartbeat(hb))
	require.NoError(t, b.Heartbeat(hb)) // a refresh
	remove2()
	remove2() // idempotent
	b.UnregisterClient("G", "c1")
	remove1()
	require.NoError(t, b.Heartbeat(hb))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"G", "G"}, got1)
	assert.Equal(t, []string{"G"}, got2)
}
