package client

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// requestBytes is the size of a SendRequest's records.
func requestBytes(req *gantryv1.SendRequest) int {
	n := 0
	for _, c := range req.GetRecords() {
		n += len(c)
	}
	return n
}

// Concurrent sends to a queue are coalesced into requests of at most
// MaxSendBytes of records, what a broker takes, however large the batch
// limits; a single Send of more is refused before it goes, naming the
// limit.
func TestRequestsStayWithinSendLimit(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	var largest atomic.Int64
	a.setFault(func(_ int64, req *gantryv1.SendRequest) *sendFault {
		n := int64(requestBytes(req))
		for cur := largest.Load(); n > cur && !largest.CompareAndSwap(cur, n); cur = largest.Load() {
		}
		return nil
	})
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithMaxBatch(1024, 1<<30), WithSendTimeout(30*time.Second))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)
	hold := make(chan struct{}) // the broker holds "first" until the others are queued behind it
	a.configure(func(b *fakeBroker) { b.hold = hold })

	out := newAsyncBodies()
	out.send(t.Context(), p, &Message{Topic: "T", Body: []byte("first")}) // out, alone
	require.Eventually(t, func() bool { return a.sendRequests.Load() == 2 }, 5*time.Second, time.Millisecond)
	want := []string{"first"}
	for i := range 6 { // queued meanwhile: 6 MiB and more together
		body := fmt.Sprintf("%d-%s", i, bytes.Repeat([]byte{byte('a' + i)}, 1<<20))
		want = append(want, body)
		out.send(t.Context(), p, &Message{Topic: "T", Body: []byte(body)})
	}
	close(hold)
	out.wg.Wait()
	require.Empty(t, out.errs)
	assert.Equal(t, want, storedBodies(t, a, "T", 0)[1:])
	assert.LessOrEqual(t, largest.Load(), int64(message.MaxBatchBytes))
	assert.Greater(t, largest.Load(), int64(2<<20), "sends were still coalesced")

	before := a.sendRequests.Load()
	_, err = p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: make([]byte, 3<<20)}, {Topic: "T", Body: make([]byte, 3<<20)}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, fmt.Sprintf("the 2 messages take 6291764 bytes as records, more than the %d one Send may carry", message.MaxBatchBytes))
	assert.Equal(t, before, a.sendRequests.Load(), "nothing was sent")
}

// The client receives a pull answer of one record of the largest body,
// beyond gRPC's default 4 MiB receive limit.
func TestPullOfLargestMessage(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	cfg := testConfig(t, startNameServer(t, a))
	p := newTestProducer(t, cfg)
	body := bytes.Repeat([]byte("0123456789abcdef"), message.MaxBodyBytes/16)
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: body, Properties: map[string]string{"p": string(bytes.Repeat([]byte{'v'}, 30<<10))}})
	require.NoError(t, err)
	pc, err := NewPullConsumer(t.Context(), cfg, "g")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close(context.Background()) })
	qs, err := pc.Queues(t.Context(), "T")
	require.NoError(t, err)
	r, err := pc.Pull(t.Context(), qs[0], 0, PullOptions{MaxMessages: 32})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	assert.True(t, bytes.Equal(body, r.Messages[0].Body))
}
