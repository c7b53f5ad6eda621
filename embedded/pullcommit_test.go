package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// commitWatch is a client interceptor that counts a consumer's offset
// commit calls, records the offsets the broker took, and, once dead is
// set, fails them before they leave (a consumer that died).
type commitWatch struct {
	batch, single atomic.Int64 // CommitOffsets, CommitOffset calls
	dead          atomic.Bool

	mu   sync.Mutex
	took map[int32]int64 // the last offset committed, by queue id
}

func (w *commitWatch) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch method {
	case gantryv1.Messaging_CommitOffsets_FullMethodName:
		w.batch.Add(1)
	case gantryv1.Messaging_CommitOffset_FullMethodName:
		w.single.Add(1)
	default:
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if w.dead.Load() {
		return status.Error(codes.Unavailable, "test: the consumer died")
	}
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.took == nil {
		w.took = map[int32]int64{}
	}
	switch r := req.(type) {
	case *gantryv1.CommitOffsetsRequest:
		for i, e := range r.GetEntries() {
			if reply.(*gantryv1.CommitOffsetsResponse).GetResults()[i].GetError() == nil {
				w.took[e.GetQueueId()] = e.GetOffset()
			}
		}
	case *gantryv1.CommitOffsetRequest:
		w.took[r.GetQueueId()] = r.GetOffset()
	}
	return nil
}

// committed returns the last offset the broker took for queue id.
func (w *commitWatch) committed(id int32) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.took[id]
}

// commitCluster starts a cluster with topic of queues queues, and returns
// a Config for it.
func commitCluster(t *testing.T, topic string, queues int32) client.Config {
	t.Helper()
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), topic); return err == nil }, 10*time.Second, 10*time.Millisecond)
	return cfg
}

// watched returns cfg with w's interceptor.
func watched(cfg client.Config, w *commitWatch) client.Config {
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(w.intercept))
	return cfg
}

// Auto-commit survives a consumer's death: the consumer marks every
// message it handles and dies (its commits fail from then on, Close's
// final commit included); a new consumer of the group resumes from the
// last auto-commit, so what is delivered again is only what was marked
// after it: at most one interval's marks.
func TestAutoCommitSurvivesConsumerRestart(t *testing.T) {
	const total, perInterval, afterLast = 60, 10, 7
	cfg := commitCluster(t, "Restart", 1)
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	defer p.Close(context.Background())
	msgs := make([]*client.Message, total)
	for i := range msgs {
		msgs[i] = &client.Message{Topic: "Restart", Body: fmt.Appendf(nil, "m%d", i)}
	}
	_, err = p.SendBatch(t.Context(), msgs)
	require.NoError(t, err)

	w := &commitWatch{}
	first, err := client.NewPullConsumer(t.Context(), watched(cfg, w), "G", client.WithAutoCommitInterval(20*time.Millisecond))
	require.NoError(t, err)
	qs, err := first.Queues(t.Context(), "Restart")
	require.NoError(t, err)
	q := qs[0]
	var marked int64
	handle := func(n int) { // pulls n messages from marked and marks each
		for n > 0 {
			r, err := first.Pull(t.Context(), q, marked, client.PullOptions{MaxMessages: n, Hold: time.Second})
			require.NoError(t, err)
			for _, m := range r.Messages {
				first.MarkOffset(q, m.QueueOffset+1)
				marked = m.QueueOffset + 1
				n--
			}
		}
	}
	for range 3 { // three intervals of marks, each auto-committed
		handle(perInterval)
		require.Eventually(t, func() bool { return w.committed(0) == marked }, 10*time.Second, 5*time.Millisecond,
			"auto-commit of %d", marked)
	}
	lastAuto := marked
	w.dead.Store(true)
	handle(afterLast) // marked after the last auto-commit, then the consumer dies
	err = first.Close(t.Context())
	require.ErrorIs(t, err, client.ErrUnavailable, "the final commit of a dead consumer fails")
	assert.Equal(t, lastAuto, w.committed(0))

	second, err := client.NewPullConsumer(t.Context(), cfg, "G")
	require.NoError(t, err)
	defer second.Close(context.Background())
	from, found, err := second.CommittedOffset(t.Context(), q)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, lastAuto, from, "the restart resumes from the last auto-commit")
	var again, seen int64
	for off := from; off < total; {
		r, err := second.Pull(t.Context(), q, off, client.PullOptions{Hold: time.Second})
		require.NoError(t, err)
		for _, m := range r.Messages {
			assert.Equal(t, fmt.Sprintf("m%d", m.QueueOffset), string(m.Body))
			if m.QueueOffset < marked {
				again++
			}
			seen++
		}
		off = r.NextOffset
	}
	assert.Equal(t, total-from, seen, "every message from the resumed offset, once")
	assert.LessOrEqual(t, again, int64(perInterval), "at most one interval's marks delivered again")
	assert.Equal(t, int64(afterLast), again, "exactly the marks after the last auto-commit")
}

// A commit of the marks of 64 queues is one CommitOffsets request to their
// broker.
func TestCommitOf64QueuesIsOneRequest(t *testing.T) {
	cfg := commitCluster(t, "Wide", 64)
	w := &commitWatch{}
	c, err := client.NewPullConsumer(t.Context(), watched(cfg, w), "G", client.WithoutAutoCommit())
	require.NoError(t, err)
	defer c.Close(context.Background())
	qs, err := c.Queues(t.Context(), "Wide")
	require.NoError(t, err)
	require.Len(t, qs, 64)
	for i, q := range qs {
		c.MarkOffset(q, int64(i))
	}
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(1), w.batch.Load(), "one request for the broker's 64 queues")
	assert.Zero(t, w.single.Load())
	for i, q := range qs {
		off, found, err := c.CommittedOffset(t.Context(), q)
		require.NoError(t, err)
		assert.True(t, found, "%s", q)
		assert.Equal(t, int64(i), off, "%s", q)
	}
}

// Close commits the marks, even with a context that has already ended.
func TestCloseCommitsMarks(t *testing.T) {
	cfg := commitCluster(t, "Closing", 4)
	w := &commitWatch{}
	c, err := client.NewPullConsumer(t.Context(), watched(cfg, w), "G", client.WithoutAutoCommit())
	require.NoError(t, err)
	qs, err := c.Queues(t.Context(), "Closing")
	require.NoError(t, err)
	for i, q := range qs {
		c.MarkOffset(q, int64(10+i))
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, c.Close(ended))
	assert.Equal(t, int64(1), w.batch.Load())

	other, err := client.NewPullConsumer(t.Context(), cfg, "G")
	require.NoError(t, err)
	defer other.Close(context.Background())
	for i, q := range qs {
		off, found, err := other.CommittedOffset(t.Context(), q)
		require.NoError(t, err)
		assert.True(t, found, "%s", q)
		assert.Equal(t, int64(10+i), off, "%s", q)
	}
}
