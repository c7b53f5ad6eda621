package broker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// sendAttempt sends msgs as records, as the attempt-th attempt of a send
// of Gantry's producer (SendRequest.attempt).
func sendAttempt(t *testing.T, b *broker.Broker, attempt uint32, msgs ...*message.Message) ([]broker.SendResult, error) {
	t.Helper()
	return b.SendAttempt(t.Context(), msgs[0].Topic, attempt, [][]byte{recordsOf(t, msgs...)})
}

// A first attempt keyed by UNIQ_KEY claims nothing and looks nothing up;
// its retry, sent while the first attempt's record is not indexed yet
// (recent) or after (indexed), is answered as its duplicate.
func TestDedupFirstAttemptThenRetry(t *testing.T) {
	for _, m := range dedupModes {
		t.Run(m.name, func(t *testing.T) {
			b := openBroker(t, dedupConfig(t, newFakeClock()))
			createTopic(t, b, "T", 2)
			first, err := sendAttempt(t, b, 1, keyed("T", 0, "one", "K1"), keyed("T", 0, "two", "K2"))
			require.NoError(t, err)
			require.False(t, first[0].Duplicate)
			keys, retried := b.DedupKeys()
			assert.Zero(t, keys, "a first attempt claims and remembers no key")
			assert.Zero(t, retried)
			m.settle(t, b)

			retry, err := sendAttempt(t, b, 2, keyed("T", 1, "one", "K1"), keyed("T", 1, "two", "K2"))
			require.NoError(t, err)
			same(t, first[0], retry[0])
			same(t, first[1], retry[1])
			assert.Equal(t, int64(2), logCount(t, b, "T"), "the retry stored nothing")
			_, retried = b.DedupKeys()
			assert.Equal(t, 2, retried, "the retry's keys are registered for the window")
		})
	}
}

// A first attempt that arrives after its retry (which overtook it) is
// answered as the retry's duplicate; a first attempt of another key is
// not held up by the retry's registration.
func TestDedupRetryThenFirstAttempt(t *testing.T) {
	for _, m := range dedupModes {
		t.Run(m.name, func(t *testing.T) {
			clock := newFakeClock()
			b := openBroker(t, dedupConfig(t, clock))
			createTopic(t, b, "T", 2)
			retry, err := sendAttempt(t, b, 3, keyed("T", 0, "one", "K1"))
			require.NoError(t, err)
			require.False(t, retry[0].Duplicate)
			m.settle(t, b)

			late, err := sendAttempt(t, b, 1, keyed("T", 1, "one", "K1"), keyed("T", 1, "other", "K9"))
			require.NoError(t, err)
			same(t, retry[0], late[0])
			assert.False(t, late[1].Duplicate)
			assert.Equal(t, int64(2), logCount(t, b, "T"))

			// After the window the registration is gone: a first attempt
			// of the key is taken at its word.
			clock.Advance(5*time.Minute + time.Second)
			after, err := sendAttempt(t, b, 1, keyed("T", 0, "one", "K1"))
			require.NoError(t, err)
			assert.False(t, after[0].Duplicate)
			_, retried := b.DedupKeys()
			assert.Zero(t, retried)
		})
	}
}

// A first attempt with an IDEMPOTENCY_KEY is checked as any send: the key
// is the user's, who may send it again.
func TestDedupFirstAttemptIdempotencyKey(t *testing.T) {
	b := openBroker(t, dedupConfig(t, newFakeClock()))
	createTopic(t, b, "T", 2)
	one, err := sendAttempt(t, b, 1, keyed("T", 0, "pay", "U-1", message.PropIdempotencyKey, "order-7"))
	require.NoError(t, err)
	two, err := sendAttempt(t, b, 1, keyed("T", 0, "pay", "U-2", message.PropIdempotencyKey, "order-7"))
	require.NoError(t, err)
	same(t, one[0], two[0])
	assert.Equal(t, int64(1), logCount(t, b, "T"))
}

// Retries racing with the first attempts of their keys: whatever the
// interleaving, each key is stored exactly once and every answer names
// that copy.
func TestDedupFirstAttemptsRaceRetries(t *testing.T) {
	b := openBroker(t, dedupConfig(t, newFakeClock()))
	createTopic(t, b, "T", 4)
	const n = 200
	results := make([][2]broker.SendResult, n)
	var wg sync.WaitGroup
	for i := range n {
		key := fmt.Sprintf("K%d", i)
		for j, attempt := range []uint32{1, 2} {
			wg.Go(func() {
				res, err := sendAttempt(t, b, attempt, keyed("T", int32(i%4), "body", key))
				if assert.NoError(t, err) {
					results[i][j] = res[0]
				}
			})
		}
	}
	wg.Wait()
	for i, r := range results {
		assert.Equal(t, r[0].PhysicalOffset, r[1].PhysicalOffset, "key %d: both attempts name one copy", i)
		assert.NotEqual(t, r[0].Duplicate, r[1].Duplicate, "key %d: exactly one attempt stored it", i)
	}
	assert.Equal(t, int64(n), logCount(t, b, "T"))
}
