package embedded_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// A retry storm through two broker kills: the consumer fails the first
// delivery of every 10th message, and while it works through them (a
// millisecond a message, two at a time, about 2 s in all) the broker is
// killed (connections cut, no unregistration) and started again, twice.
// Every message is handled successfully in the end, and every failed one
// only after coming back as a retry: from the group's retry topic (parked
// in the schedule queue as references, across the restarts) or, for a
// send-back that found the broker gone, from the consumer's own retry.
// Handlings may repeat (at least once: a send-back the broker stored but
// could not answer is retried by both); the test reports how many did.
func TestRetryStormSurvivesBrokerKills(t *testing.T) {
	const n = 4000
	levels := make([]time.Duration, 18)
	for i := range levels {
		levels[i] = 300 * time.Millisecond
	}
	pc := startPushCluster(t, embedded.Options{NoAutoCreateTopics: true, Broker: func(cfg *broker.Config) {
		cfg.MessageDelayLevel = levels
	}}, "Storm", 4)
	pc.send(t, "Storm", "s", 0, n, nil, nil)

	var mu sync.Mutex
	ok := make(map[int]int32) // message -> reconsume times at its first success
	var handled, failed, repeats, viaRetryTopic atomic.Int64
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			time.Sleep(time.Millisecond)
			i, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "s-"))
			if err != nil {
				t.Errorf("unexpected body %q", m.Body)
				continue
			}
			if i%10 == 0 && m.ReconsumeTimes == 0 {
				failed.Add(1)
				return client.ConsumeRetryLater
			}
			if strings.HasPrefix(m.Queue.Topic, "%RETRY%") {
				viaRetryTopic.Add(1)
			}
			mu.Lock()
			if _, seen := ok[i]; seen {
				repeats.Add(1)
			} else {
				ok[i] = m.ReconsumeTimes
			}
			mu.Unlock()
			handled.Add(1)
		}
		return client.ConsumeSuccess
	}
	c := pc.consumer(t, "storm-1", "storm", "Storm", "*", h, client.WithConsumeConcurrency(2))
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })

	for _, at := range []int64{n / 4, n / 2} {
		require.Eventually(t, func() bool { return handled.Load() >= at }, 30*time.Second, time.Millisecond)
		require.NoError(t, pc.c.KillBroker())
		time.Sleep(200 * time.Millisecond) // send-backs fail meanwhile: the consumer retries those itself
		require.NoError(t, pc.c.StartBroker(t.Context()))
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ok) == n
	}, 60*time.Second, 10*time.Millisecond, "every message handled")

	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < n; i += 10 {
		require.GreaterOrEqual(t, ok[i], int32(1), "message %d succeeded without coming back as a retry", i)
	}
	require.Positive(t, viaRetryTopic.Load(), "no retry came from the retry topic")
	// Repeats come from send-backs the broker stored but could not answer
	// (a few per kill); a queue rewound to an offset never committed
	// repeats hundreds.
	require.Less(t, repeats.Load(), int64(n/10), "handlings repeated")
	t.Logf("retry storm through 2 broker kills: %d messages, %d deliveries failed, all %d handled, %d handlings from %%RETRY%%storm; %d repeated handlings",
		n, failed.Load(), len(ok), viaRetryTopic.Load(), repeats.Load())
}
