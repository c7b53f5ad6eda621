package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// A sender with a backlog sends it without lingering: the linger gathers
// a batch from a trickle of failures, and a sender that lingered before
// every call could send no more than a batch per linger, holding a storm's
// failed messages (and their queues' pulls) ever longer.
func TestBackSenderSendsBacklogWithoutLinger(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, b)
	p := unstartedPushConsumer(t, testConfig(t, ns))
	p.opts.backLinger = time.Hour // a linger would outlast the test

	const n = 3 * maxSendBackBatch
	aq := &assignedQueue{q: Queue{Topic: "T", BrokerName: "a", Broker: b.addr}, pq: newProcessQueue(0, false)}
	msgs := make([]*MessageExt, n)
	for i := range msgs {
		msgs[i] = &MessageExt{Message: &message.Message{}, QueueOffset: int64(i), PhysicalOffset: int64(i) * 100}
	}
	aq.pq.put(msgs, n)
	s := &backSender{addr: b.addr, ch: make(chan backItem, sendBackQueue)}
	aq.inflight.Add(n)
	for _, m := range msgs {
		s.ch <- backItem{aq: aq, m: newBackCopy(m)}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.runBackSender(s)
	}()
	// Every message taken by the broker, in full batches, long before an
	// hour's linger.
	require.Eventually(t, func() bool { return b.sentBack.Load() == n }, 30*time.Second, time.Millisecond)
	aq.inflight.Wait()
	count, _, _ := aq.pq.load()
	assert.Zero(t, count, "messages still held")
	close(s.ch)
	<-done
}

// A failed message's copy shares no memory with the pull it came in, an
// inflated body stays the copy's own, and a recycled copy keeps only its
// body buffer.
func TestBackCopy(t *testing.T) {
	pull := []byte("stored-body")
	orig := &MessageExt{Message: &message.Message{Topic: "T", Body: pull[:6]}, Topic: "T", QueueOffset: 7, Body: pull[:6]}
	c := newBackCopy(orig)
	copy(pull, "XXXXXX")
	assert.Equal(t, "stored", string(c.ext.Body))
	assert.Equal(t, "stored", string(c.ext.Message.Body))
	assert.Same(t, &c.msg, c.ext.Message)
	assert.Equal(t, int64(7), c.ext.QueueOffset)

	inflated := []byte("inflated body")
	orig = &MessageExt{Message: &message.Message{Body: pull[:6]}, Body: inflated}
	c2 := newBackCopy(orig)
	assert.Same(t, &inflated[0], &c2.ext.Body[0], "the inflated body is the message's own")
	assert.Equal(t, "XXXXXX", string(c2.ext.Message.Body))
	require.NotSame(t, &pull[0], &c2.ext.Message.Body[0])

	recycleBackCopy(c)
	assert.Zero(t, c.ext)
	assert.Zero(t, c.msg)
	assert.Empty(t, c.body)
	assert.Positive(t, cap(c.body), "the buffer is kept")
}
