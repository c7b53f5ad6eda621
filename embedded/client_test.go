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

func newClients(t *testing.T, c *embedded.Cluster) (*client.Producer, *client.PullConsumer, *client.Admin) {
	t.Helper()
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}, RouteRefresh: 200 * time.Millisecond}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	pc, err := client.NewPullConsumer(t.Context(), cfg, "e2e")
	require.NoError(t, err)
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close(context.Background()))
		require.NoError(t, pc.Close(context.Background()))
		require.NoError(t, a.Close())
	})
	return p, pc, a
}

// drain pulls every queue of topic from its committed offset to the end.
func drain(t *testing.T, pc *client.PullConsumer, topic, filter string) []*client.MessageExt {
	t.Helper()
	qs, err := pc.Queues(t.Context(), topic)
	require.NoError(t, err)
	var out []*client.MessageExt
	for _, q := range qs {
		off, _, err := pc.CommittedOffset(t.Context(), q)
		require.NoError(t, err)
		for {
			r, err := pc.Pull(t.Context(), q, off, client.PullOptions{MaxMessages: 64, Filter: filter, Hold: 500 * time.Millisecond}) // the hold covers the dispatch after the acks
			require.NoError(t, err)
			out = append(out, r.Messages...)
			if r.Status == client.PullNoNewMessage {
				break
			}
			off = r.NextOffset
		}
		require.NoError(t, pc.CommitOffset(t.Context(), q, off))
	}
	return out
}

// The Go client end to end: admin creates the topic, the producer sends
// single, batched, async and concurrent messages, the pull consumer reads
// them all back with tags, keys and properties, and resumes from its
// committed offsets after a broker restart.
func TestClientEndToEnd(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close(context.Background())) }()
	p, pc, a := newClients(t, c)
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: "Orders", ReadQueueNums: 4, WriteQueueNums: 4}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), "Orders"); return err == nil }, 5*time.Second, 10*time.Millisecond)

	res, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("one"), Tags: "TagA", Keys: []string{"k-1"}, Properties: map[string]string{"p": "v"}})
	require.NoError(t, err)
	var batch []*client.Message
	for i := range 20 {
		batch = append(batch, &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "batch-%d", i), Tags: "TagB"})
	}
	_, err = p.SendBatch(t.Context(), batch)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var asyncErrs []error
	for i := range 200 {
		wg.Add(1)
		p.SendAsync(t.Context(), &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "async-%d", i), Tags: "TagC"}, func(_ *client.Message, _ client.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				asyncErrs = append(asyncErrs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, asyncErrs)

	got := drain(t, pc, "Orders", "")
	require.Len(t, got, 221, "every acknowledged message")
	var first *client.MessageExt
	for _, m := range got {
		if string(m.Body) == "one" {
			first = m
		}
	}
	require.NotNil(t, first)
	assert.Equal(t, "TagA", first.Tags)
	assert.Equal(t, []string{"k-1"}, first.Keys())
	assert.Equal(t, "v", first.Property("p"))
	assert.Equal(t, res.MsgID, first.MsgID())
	assert.NotEmpty(t, res.UniqKey)
	assert.Equal(t, res.UniqKey, first.UniqKey, "the producer's id is the stored UNIQ_KEY")
	assert.Len(t, drain(t, pc, "Orders", "TagB"), 0, "committed offsets: nothing left")

	// Resume after a broker restart from the committed offsets.
	require.NoError(t, c.RestartBroker(t.Context()))
	_, err = p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("after"), Tags: "TagB"})
	require.NoError(t, err)
	rest := drain(t, pc, "Orders", "")
	require.Len(t, rest, 1)
	assert.Equal(t, "after", string(rest[0].Body))

	byKey, err := a.QueryMessageByKey(t.Context(), "Orders", "k-1", time.Time{}, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, byKey, 1)
	byID, err := a.QueryMessageByID(t.Context(), res.MsgID)
	require.NoError(t, err)
	assert.Equal(t, "one", string(byID.Body))
}

// Producers keep sending through a nameserver outage with cached routes.
func TestProducerSurvivesNameServerOutage(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close(context.Background())) }()
	p, _, _ := newClients(t, c)
	_, err = p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("before")})
	require.NoError(t, err)
	require.NoError(t, c.StopNameServer(t.Context()))
	time.Sleep(500 * time.Millisecond) // a few failed route refreshes
	for i := range 50 {
		_, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "during-%d", i)})
		require.NoError(t, err, "send %d with the nameserver down", i)
	}
}
