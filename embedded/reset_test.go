package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// sendHalves sends messages m-0..m-9, then, from a later millisecond on,
// m-10..m-19, and returns the time between the halves: resetting offsets
// to it moves each queue to its first message of the second half.
func sendHalves(t *testing.T, pc *pushCluster, topic string) time.Time {
	t.Helper()
	pc.send(t, topic, "m", 0, 10, nil, nil)
	first := time.Now().UnixMilli() // every m-0..m-9 was stored by now
	for time.Now().UnixMilli() <= first {
		time.Sleep(time.Millisecond)
	}
	mid := time.Now()
	pc.send(t, topic, "m", 10, 10, nil, nil)
	return mid
}

// committedSum is the sum of the group's committed offsets of topic's
// queues on the broker.
func committedSum(c *embedded.Cluster, group, topic string, queues int32) int64 {
	var sum int64
	for q := range queues {
		off, _ := c.Broker().QueryOffset(group, topic, q)
		sum += off
	}
	return sum
}

// deliveries records the bodies a handler got, in order, and can hold the
// handler until released.
type deliveries struct {
	mu      sync.Mutex
	got     []string
	holding bool
	release chan struct{}
}

func newDeliveries() *deliveries { return &deliveries{release: make(chan struct{})} }

func (d *deliveries) handler(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
	d.mu.Lock()
	for _, m := range msgs {
		d.got = append(d.got, string(m.Body))
	}
	hold := d.holding
	d.mu.Unlock()
	if hold {
		select {
		case <-d.release:
		case <-ctx.Done():
			return client.ConsumeRetryLater
		}
	}
	return client.ConsumeSuccess
}

// counts returns how many times each body was delivered, and in all.
func (d *deliveries) counts() (map[string]int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for _, b := range d.got {
		out[b]++
	}
	return out, len(d.got)
}

func (d *deliveries) hold() {
	d.mu.Lock()
	d.holding = true
	d.mu.Unlock()
}

// A reset of the group's offsets by time, while a push consumer runs, is
// followed by it: it reads its queues again from the new offsets (the
// second half of the messages, and not the first), and the reset holds
// while it does: nothing it commits undoes it.
func TestPushConsumerFollowsOffsetReset(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []client.PushConsumerOption
	}{
		{"concurrent", nil},
		{"ordered", []client.PushConsumerOption{client.WithOrdered()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const topic, group, queues = "Resets", "resetters", 4
			pc := newPushCluster(t, topic, queues)
			mid := sendHalves(t, pc, topic)
			d := newDeliveries()
			opts := append([]client.PushConsumerOption{client.WithCommitInterval(50 * time.Millisecond)}, tt.opts...)
			c := pc.consumer(t, "c1", group, topic, "*", d.handler, opts...)
			defer func() { require.NoError(t, c.Shutdown(context.Background())) }()
			require.Eventually(t, func() bool { _, n := d.counts(); return n >= 20 }, 20*time.Second, 10*time.Millisecond)
			require.Eventually(t, func() bool { return committedSum(pc.c, group, topic, queues) == 20 }, 10*time.Second, 10*time.Millisecond)

			d.hold() // from now on the handler waits: what the consumer commits meanwhile shows
			offs, err := pc.admin.ResetOffsetByTime(t.Context(), group, topic, mid)
			require.NoError(t, err)
			var sum int64
			for _, off := range offs {
				sum += off
			}
			require.Equal(t, int64(10), sum, "the middle: %v", offs)
			require.Eventually(t, func() bool { _, n := d.counts(); return n > 20 }, 20*time.Second, 10*time.Millisecond,
				"the consumer reads again from the reset offsets")
			assert.Never(t, func() bool { return committedSum(pc.c, group, topic, queues) != 10 }, 500*time.Millisecond, 10*time.Millisecond,
				"the reset holds: ten commit intervals later the committed offsets are still the reset ones")

			close(d.release)
			require.Eventually(t, func() bool {
				seen, _ := d.counts()
				for i := 10; i < 20; i++ {
					if seen[fmt.Sprintf("m-%d", i)] < 2 {
						return false
					}
				}
				return true
			}, 20*time.Second, 10*time.Millisecond, "m-10..m-19 delivered again")
			require.Eventually(t, func() bool { return committedSum(pc.c, group, topic, queues) == 20 }, 10*time.Second, 10*time.Millisecond)
			seen, _ := d.counts()
			for i := range 10 {
				assert.Equal(t, 1, seen[fmt.Sprintf("m-%d", i)], "m-%d is before the reset time: not read again", i)
			}
		})
	}
}

// Resetting the offsets of a group the broker does not know is NOT_FOUND,
// naming it, and creates nothing.
func TestResetOffsetsOfUnknownGroup(t *testing.T) {
	const topic = "Resets"
	pc := newPushCluster(t, topic, 2)
	_, err := pc.admin.ResetOffsetByTime(t.Context(), "Nope", topic, time.Now())
	require.ErrorIs(t, err, client.ErrNotFound)
	assert.ErrorContains(t, err, `"Nope"`)
	groups, err := pc.admin.Groups(t.Context())
	require.NoError(t, err)
	for _, g := range groups {
		assert.NotEqual(t, "Nope", g.Name, "a phantom group")
	}
}
