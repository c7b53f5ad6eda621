package client

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// keysSent records the UNIQ_KEYs of every send request's records, and
// its attempt number.
type keysSent struct {
	mu       sync.Mutex
	reqs     [][]string
	attempts []uint32
}

func (k *keysSent) add(t *testing.T, req *gantryv1.SendRequest) {
	var keys []string
	for _, c := range req.GetRecords() {
		ms, err := message.DecodeAll(c)
		assert.NoError(t, err)
		for _, m := range ms {
			keys = append(keys, m.UniqKey())
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reqs = append(k.reqs, keys)
	k.attempts = append(k.attempts, req.GetAttempt())
}

func (k *keysSent) attemptsSent() []uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.attempts
}

func (k *keysSent) all() [][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reqs
}

// SendResult.Attempts counts the attempts a send took, and every retry
// carries the messages' first UNIQ_KEYs (what lets the broker answer it as
// a duplicate) and its number (SendRequest.attempt: the first promises
// fresh keys, which the broker then checks only against retries).
func TestSendAttemptsKeepUniqKeys(t *testing.T) {
	tests := []struct {
		name  string
		fault *sendFault // of the first request; nil: none
		want  int
	}{
		{"at once", nil, 1},
		{"after unavailable", &sendFault{code: codes.Unavailable, msg: "not ready"}, 2},
		{"after indeterminate", &sendFault{code: codes.DeadlineExceeded, msg: "flush timeout", indeterminate: true}, 2},
		{"after broken stream", &sendFault{code: codes.Unavailable, msg: "reset", breakStream: true}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startBroker(t, "a", 2, "T")
			var sent keysSent
			a.setFault(func(n int64, req *gantryv1.SendRequest) *sendFault {
				sent.add(t, req)
				if n == 1 {
					return tt.fault
				}
				return nil
			})
			p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithRetryIndeterminate(true))
			res, err := p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte("x")}, {Topic: "T", Body: []byte("y")}})
			require.NoError(t, err)
			require.Len(t, res, 2)
			assert.Equal(t, []int{tt.want, tt.want}, []int{res[0].Attempts, res[1].Attempts})
			assert.False(t, res[0].Duplicate)
			reqs := sent.all()
			require.Len(t, reqs, tt.want)
			for _, keys := range reqs {
				assert.Equal(t, []string{res[0].UniqKey, res[1].UniqKey}, keys, "every attempt carries the same ids")
			}
			want := []uint32{1, 2}[:tt.want]
			assert.Equal(t, want, sent.attemptsSent())

			// SendAsync numbers its attempts alike.
			var async keysSent
			a.setFault(func(_ int64, req *gantryv1.SendRequest) *sendFault {
				async.add(t, req)
				if len(async.attemptsSent()) == 1 {
					return tt.fault
				}
				return nil
			})
			got := make(chan SendResult, 1)
			p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("z")}, func(_ *Message, r SendResult, err error) {
				assert.NoError(t, err)
				got <- r
			})
			r := <-got
			assert.Equal(t, tt.want, r.Attempts)
			assert.Equal(t, want, async.attemptsSent())
		})
	}
}

// SendAsync reports the attempts too, the retried ones included (they run
// on a goroutine of their own).
func TestSendAsyncAttempts(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	var sent keysSent
	a.setFault(func(n int64, req *gantryv1.SendRequest) *sendFault {
		sent.add(t, req)
		if n == 1 {
			return &sendFault{code: codes.DeadlineExceeded, msg: "flush timeout", indeterminate: true}
		}
		return nil
	})
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithRetryIndeterminate(true))
	results := make(chan SendResult, 2)
	for _, body := range []string{"retried", "at once"} {
		done := make(chan struct{})
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte(body)}, func(_ *Message, r SendResult, err error) {
			assert.NoError(t, err)
			results <- r
			close(done)
		})
		<-done
	}
	first, second := <-results, <-results
	assert.Equal(t, 2, first.Attempts)
	assert.Equal(t, 1, second.Attempts)
	reqs := sent.all()
	require.Len(t, reqs, 3)
	assert.Equal(t, [][]string{{first.UniqKey}, {first.UniqKey}, {second.UniqKey}}, reqs)
}

// Message.IdempotencyKey goes as the IDEMPOTENCY_KEY property; one with a
// space is refused before sending.
func TestSendIdempotencyKey(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)))
	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("pay"), IdempotencyKey: "order-42/pay"})
	require.NoError(t, err)
	m := storedMessage(t, a, "T", res)
	k, _ := m.Properties.Get(message.PropIdempotencyKey)
	assert.Equal(t, "order-42/pay", k)

	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("pay"), IdempotencyKey: "order 42"})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, int64(1), a.sendRequests.Load())
}

// A send retried after an indeterminate failure goes to the same queue
// (the broker that may hold it answers the retry as a duplicate); after a
// definite failure, elsewhere.
func TestRetryIndeterminateStaysOnQueue(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	b := startBroker(t, "b", 2, "T")
	var queues []int32
	var mu sync.Mutex
	a.setFault(func(n int64, req *gantryv1.SendRequest) *sendFault {
		ms, err := message.DecodeAll(req.GetRecords()[0])
		assert.NoError(t, err)
		mu.Lock()
		queues = append(queues, ms[0].QueueID)
		mu.Unlock()
		switch n {
		case 1, 2:
			return &sendFault{code: codes.DeadlineExceeded, msg: "flush timeout", indeterminate: true}
		case 3:
			return &sendFault{code: codes.Unavailable, msg: "not ready"}
		}
		return nil
	})
	p := newTestProducer(t, testConfig(t, startNameServer(t, a, b)), WithRetryIndeterminate(true), WithRetries(5),
		WithQueueSelector(SelectorFunc(func(_ string, qs []Queue, _ *Message) Queue { // a's last queue, else the first
			pick := qs[0]
			for _, q := range qs {
				if q.BrokerName == "a" {
					pick = q
				}
			}
			return pick
		})))
	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, 4, res.Attempts)
	assert.Equal(t, "b", res.Broker, "after the definite failure")
	assert.Equal(t, int64(3), a.sendRequests.Load())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int32{1, 1, 1}, queues, "a's last queue, three times")
}
