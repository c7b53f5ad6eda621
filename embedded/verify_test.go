package embedded_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/fsx"
)

// A store the broker wrote through every kind of message it stores (keys
// and tags, an idempotency key sent twice, a delay level, a delivery time,
// a retry, a dead letter) passes gantry verify once the broker stopped:
// every record, queue entry and index entry the broker writes is one the
// checker knows.
func TestVerifyAfterEveryKindOfMessage(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	pc := startPushCluster(t, embedded.Options{Dir: dir, NoAutoCreateTopics: true, Broker: func(cfg *broker.Config) {
		cfg.Now = clk.Now
		cfg.ChannelExpiredTimeout = 1000 * time.Hour
		cfg.QueueLockTTL = 1000 * time.Hour
	}}, "Feat", 2)

	var mu sync.Mutex
	handled := map[string]int{}
	c := pc.consumer(t, "feat-1", "feat", "Feat", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		body := string(msgs[0].Body)
		handled[body]++
		switch {
		case body == "dead":
			return client.ConsumeDeadLetter
		case body == "fail-once" && handled[body] == 1:
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	})
	defer c.Shutdown(context.Background())

	send := func(m *client.Message) {
		t.Helper()
		m.Topic = "Feat"
		_, err := pc.p.Send(t.Context(), m)
		require.NoError(t, err)
	}
	send(&client.Message{Body: []byte("keyed"), Tags: "TagA", Keys: []string{"order-1", "customer-7"}})
	send(&client.Message{Body: []byte("idempotent"), IdempotencyKey: "pay-1"})
	send(&client.Message{Body: []byte("idempotent"), IdempotencyKey: "pay-1"}) // a duplicate: stored once
	send(&client.Message{Body: []byte("delayed"), DelayLevel: 2, Keys: []string{"later"}})
	send(&client.Message{Body: []byte("timed"), DeliverAt: clk.Now().Add(90 * time.Second), IdempotencyKey: "timed-1"})
	send(&client.Message{Body: []byte("fail-once")})
	send(&client.Message{Body: []byte("dead")})

	want := map[string]int{"keyed": 1, "idempotent": 1, "delayed": 1, "timed": 1, "fail-once": 2, "dead": 1}
	require.Eventually(t, func() bool {
		clk.Advance(5 * time.Second) // the delay level, the retry's 10 s, the delivery time
		mu.Lock()
		defer mu.Unlock()
		for body, n := range want {
			if handled[body] < n {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return handledSoFar(c) >= 7 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Shutdown(t.Context()))
	mu.Lock()
	assert.Equal(t, want, handled)
	mu.Unlock()

	require.NoError(t, pc.c.StopBroker(t.Context()))
	rep, err := verify.Run(t.Context(), fsx.OS, filepath.Join(dir, "store"), verify.Options{})
	require.NoError(t, err)
	var problems strings.Builder
	for _, p := range rep.Errors {
		problems.WriteString("  " + p.String() + "\n")
	}
	assert.True(t, rep.Clean, "gantry verify found problems in a store the broker wrote:\n%s", problems.String())
	assert.Positive(t, rep.Index.Entries)
	assert.Positive(t, rep.ConsumeQueues.Entries)
}
