package embedded_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// groupWatch reads a WatchGroup stream into a channel until it ends.
type groupWatch struct {
	events chan []string // closed when the stream ends
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error // why the stream ended
}

// watchGroup opens a WatchGroup stream for clientID of group and reads it
// until the stream ends; the test's cleanup cancels it and waits.
func watchGroup(t *testing.T, cl clients, group, clientID string) *groupWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := cl.msg.WatchGroup(ctx, &gantryv1.WatchGroupRequest{Group: group, ClientId: clientID})
	require.NoError(t, err)
	w := &groupWatch{events: make(chan []string, 64), cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(w.events)
		for {
			ev, err := st.Recv()
			if err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			w.events <- ev.GetClientIds()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

// next returns the next membership the stream sent, within d.
func (w *groupWatch) next(t *testing.T, d time.Duration) []string {
	t.Helper()
	select {
	case ids, ok := <-w.events:
		require.True(t, ok, "the stream ended: %v", w.endErr())
		return ids
	case <-time.After(d):
		t.Fatalf("no group event within %v", d)
		return nil
	}
}

// ended waits for the stream to end and returns why.
func (w *groupWatch) ended(t *testing.T, d time.Duration) error {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-w.events:
			if !ok {
				return w.endErr()
			}
		case <-deadline:
			t.Fatalf("the stream did not end within %v", d)
			return nil
		}
	}
}

func (w *groupWatch) endErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func heartbeat(t *testing.T, cl clients, group, clientID string, assigned ...int32) {
	t.Helper()
	req := &gantryv1.HeartbeatRequest{ClientId: clientID, Group: group, Ordered: true,
		Subscriptions: []*gantryv1.Subscription{{Topic: "Orders", Expression: "TagA || TagB"}}}
	for _, q := range assigned {
		req.Assigned = append(req.Assigned, &gantryv1.QueueRef{Topic: "Orders", QueueId: q})
	}
	_, err := cl.msg.Heartbeat(t.Context(), req)
	require.NoError(t, err)
}

func ordersCluster(t *testing.T) (*embedded.Cluster, clients) {
	t.Helper()
	c, cl := start(t, embedded.Options{NoAutoCreateTopics: true})
	_, err := cl.admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "Orders", ReadQueueNums: 4, WriteQueueNums: 4}})
	require.NoError(t, err)
	return c, cl
}

func refs(topic string, ids ...int32) []*gantryv1.QueueRef {
	out := make([]*gantryv1.QueueRef, len(ids))
	for i, id := range ids {
		out[i] = &gantryv1.QueueRef{Topic: topic, QueueId: id}
	}
	return out
}

// lockQueues locks queues of Orders for a client of G and returns the ids
// it holds.
func lockQueues(t *testing.T, cl clients, clientID string, ids ...int32) []int32 {
	t.Helper()
	resp, err := cl.msg.LockQueues(t.Context(), &gantryv1.LockQueuesRequest{Group: "G", ClientId: clientID, Queues: refs("Orders", ids...)})
	require.NoError(t, err)
	held := []int32{}
	for _, q := range resp.GetLocked() {
		held = append(held, q.GetQueueId())
	}
	return held
}

// Two clients watch their group: the first sees the second join, and sees
// it leave within a second of its stream being cancelled, which also
// releases its queue locks. A client that did not heartbeat cannot watch.
func TestWatchGroupOverGRPC(t *testing.T) {
	_, cl := ordersCluster(t)
	st, err := cl.msg.WatchGroup(t.Context(), &gantryv1.WatchGroupRequest{Group: "G", ClientId: "c1"})
	require.NoError(t, err)
	_, err = st.Recv() // a server stream reports its status on the first Recv
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "no heartbeat yet: %v", err)
	assert.Contains(t, status.Convert(err).Message(), "heartbeat first")

	heartbeat(t, cl, "G", "c1", 0, 1)
	w1 := watchGroup(t, cl, "G", "c1")
	assert.Equal(t, []string{"c1"}, w1.next(t, 5*time.Second), "the current membership at once")

	heartbeat(t, cl, "G", "c2", 2, 3)
	w2 := watchGroup(t, cl, "G", "c2")
	assert.Equal(t, []string{"c1", "c2"}, w2.next(t, 5*time.Second))
	assert.Equal(t, []string{"c1", "c2"}, w1.next(t, 5*time.Second), "c1 sees c2 join")
	heartbeat(t, cl, "G", "c2", 2, 3) // a refresh is no change

	assert.Equal(t, []int32{2, 3}, lockQueues(t, cl, "c2", 2, 3))
	w2.cancel()
	start := time.Now()
	assert.Equal(t, []string{"c1"}, w1.next(t, time.Second), "c1 sees c2 leave")
	t.Logf("leave seen %v after the stream was cancelled", time.Since(start))
	assert.Equal(t, []int32{2, 3}, lockQueues(t, cl, "c1", 2, 3), "c2's locks were released")
	list, err := cl.msg.GetConsumerList(t.Context(), &gantryv1.GetConsumerListRequest{Group: "G"})
	require.NoError(t, err)
	assert.Equal(t, []string{"c1"}, list.GetClientIds())
	select {
	case ids := <-w1.events:
		t.Fatalf("unexpected event %v", ids)
	case <-time.After(50 * time.Millisecond):
	}
}

// A broker that shuts down ends its watch streams with UNAVAILABLE rather
// than waiting for the clients to hang up.
func TestWatchGroupEndsOnBrokerStop(t *testing.T) {
	c, cl := ordersCluster(t)
	heartbeat(t, cl, "G", "c1")
	w := watchGroup(t, cl, "G", "c1")
	w.next(t, 5*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.StopBroker(ctx))
	assert.Equal(t, codes.Unavailable, status.Code(w.ended(t, 5*time.Second)))
	require.NoError(t, c.StartBroker(t.Context()))
}

// Queue locks over gRPC: granted, refused while another holds them,
// released by their holder only, and checked.
func TestQueueLocksOverGRPC(t *testing.T) {
	_, cl := ordersCluster(t)
	lock := func(client string, ids ...int32) []int32 { return lockQueues(t, cl, client, ids...) }
	unlock := func(client string, ids ...int32) {
		_, err := cl.msg.UnlockQueues(t.Context(), &gantryv1.UnlockQueuesRequest{Group: "G", ClientId: client, Queues: refs("Orders", ids...)})
		require.NoError(t, err)
	}
	assert.Equal(t, []int32{0, 1}, lock("c1", 0, 1), "granted")
	assert.Equal(t, []int32{2}, lock("c2", 0, 1, 2), "refused while c1 holds them")
	assert.Equal(t, []int32{0, 1}, lock("c1", 0, 1), "renewed")
	unlock("c2", 0)
	assert.Equal(t, []int32{}, lock("c2", 0), "only the holder releases")
	unlock("c1", 0)
	assert.Equal(t, []int32{0}, lock("c2", 0), "released")

	tests := []struct {
		name string
		req  *gantryv1.LockQueuesRequest
		code codes.Code
		msg  string
	}{
		{"no client id", &gantryv1.LockQueuesRequest{Group: "G", Queues: refs("Orders", 0)}, codes.InvalidArgument, "without a client id"},
		{"bad group", &gantryv1.LockQueuesRequest{Group: "a b", ClientId: "c", Queues: refs("Orders", 0)}, codes.InvalidArgument, `group name "a b"`},
		{"unknown topic", &gantryv1.LockQueuesRequest{Group: "G", ClientId: "c", Queues: refs("Nope", 0)}, codes.NotFound, `"Nope"`},
		{"queue out of range", &gantryv1.LockQueuesRequest{Group: "G", ClientId: "c", Queues: refs("Orders", 4)}, codes.InvalidArgument, "queue id 4"},
		{"negative queue", &gantryv1.LockQueuesRequest{Group: "G", ClientId: "c", Queues: refs("Orders", -1)}, codes.InvalidArgument, "queue id -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cl.msg.LockQueues(t.Context(), tt.req)
			assert.Equal(t, tt.code, status.Code(err), "%v", err)
			assert.Contains(t, status.Convert(err).Message(), tt.msg)
		})
	}
}

// A commit with lock_holder (Gantry's push consumer) is refused with
// FAILED_PRECONDITION, changing nothing, while another client holds the
// queue's lock; its holder's commit goes through.
func TestCommitOfALostQueueRefused(t *testing.T) {
	_, cl := ordersCluster(t)
	commit := func(holder string, off int64) error {
		_, err := cl.msg.CommitOffset(t.Context(), &gantryv1.CommitOffsetRequest{Group: "G", Topic: "Orders", QueueId: 1, Offset: off, LockHolder: holder})
		return err
	}
	require.Equal(t, []int32{1}, lockQueues(t, cl, "owner", 1))
	require.NoError(t, commit("owner", 7))
	err := commit("lost", 9)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), `held by "owner", not "lost"`)
	resp, err := cl.msg.QueryOffset(t.Context(), &gantryv1.QueryOffsetRequest{Group: "G", Topic: "Orders", QueueId: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(7), resp.GetOffset())
}

// Broadcast consumers' offsets (client_id set) are each client's own,
// apart from the group's, and survive a broker restart.
func TestBroadcastOffsetsSurviveRestart(t *testing.T) {
	c, cl := ordersCluster(t)
	commit := func(client string, off int64) {
		_, err := cl.msg.CommitOffset(t.Context(), &gantryv1.CommitOffsetRequest{Group: "G", Topic: "Orders", QueueId: 1, Offset: off, ClientId: client})
		require.NoError(t, err)
	}
	commit("10.0.0.1@100", 5)
	commit("10.0.0.2@200", 9)
	commit("", 1)
	_, err := cl.msg.CommitOffset(t.Context(), &gantryv1.CommitOffsetRequest{Group: "G", Topic: "Orders", QueueId: 9, Offset: 1, ClientId: "x"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "checked like the group's")

	require.NoError(t, c.RestartBroker(t.Context()))
	for _, tt := range []struct {
		client string
		want   int64
		found  bool
	}{{"10.0.0.1@100", 5, true}, {"10.0.0.2@200", 9, true}, {"", 1, true}, {"10.0.0.3@300", 0, false}} {
		resp, err := cl.msg.QueryOffset(t.Context(), &gantryv1.QueryOffsetRequest{Group: "G", Topic: "Orders", QueueId: 1, ClientId: tt.client})
		require.NoError(t, err)
		assert.Equal(t, tt.found, resp.GetFound(), "client %q", tt.client)
		assert.Equal(t, tt.want, resp.GetOffset(), "client %q", tt.client)
	}
}

// ConsumerConnection lists the live clients with what their heartbeats
// said and where from; ConsumerProgress names each queue's consumer. Over
// the raw API and through the Go admin client.
func TestConsumerConnectionAndProgress(t *testing.T) {
	c, cl := ordersCluster(t)
	heartbeat(t, cl, "G", "10.0.0.1@1", 0, 1)
	heartbeat(t, cl, "G", "10.0.0.2@2", 2)
	_, err := cl.msg.Heartbeat(t.Context(), &gantryv1.HeartbeatRequest{ClientId: "b@3", Group: "G",
		Model: gantryv1.ConsumeModel_CONSUME_MODEL_BROADCASTING, Assigned: refs("Orders", 3)})
	require.NoError(t, err)
	_, err = cl.msg.Heartbeat(t.Context(), &gantryv1.HeartbeatRequest{ClientId: "c", Group: "G", Model: 9})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "unknown model")
	_, err = cl.msg.CommitOffset(t.Context(), &gantryv1.CommitOffsetRequest{Group: "G", Topic: "Orders", QueueId: 0, Offset: 0})
	require.NoError(t, err)

	resp, err := cl.admin.ConsumerConnection(t.Context(), &gantryv1.ConsumerConnectionRequest{Group: "G"})
	require.NoError(t, err)
	require.Len(t, resp.GetConnections(), 3)
	first := resp.GetConnections()[1] // sorted by id: 10.0.0.1@1, 10.0.0.2@2, b@3
	assert.Equal(t, "10.0.0.2@2", first.GetClientId())
	assert.True(t, strings.HasPrefix(first.GetAddress(), "127.0.0.1:"), first.GetAddress())
	assert.True(t, first.GetOrdered())
	assert.Equal(t, gantryv1.ConsumeModel_CONSUME_MODEL_CLUSTERING, first.GetModel())
	assert.InDelta(t, time.Now().UnixMilli(), first.GetLastHeartbeatMs(), 10_000)
	require.Len(t, first.GetSubscriptions(), 1)
	assert.Equal(t, "TagA || TagB", first.GetSubscriptions()[0].GetExpression())
	require.Len(t, first.GetAssigned(), 1)
	assert.Equal(t, int32(2), first.GetAssigned()[0].GetQueueId())
	assert.Equal(t, gantryv1.ConsumeModel_CONSUME_MODEL_BROADCASTING, resp.GetConnections()[2].GetModel())
	_, err = cl.admin.ConsumerConnection(t.Context(), &gantryv1.ConsumerConnectionRequest{Group: "Nobody"})
	assert.Equal(t, codes.NotFound, status.Code(err), "an unknown group")

	prog, err := cl.admin.ConsumerProgress(t.Context(), &gantryv1.ConsumerProgressRequest{Group: "G", Topic: "Orders"})
	require.NoError(t, err)
	holders := map[int32]string{}
	for _, q := range prog.GetQueues() {
		holders[q.GetQueueId()] = q.GetClientId()
	}
	assert.Equal(t, map[int32]string{0: "10.0.0.1@1", 1: "10.0.0.1@1", 2: "10.0.0.2@2", 3: ""}, holders,
		"clustering clients' assigned queues; a broadcasting client holds none")

	adm, err := client.NewAdmin(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	defer adm.Close()
	conns, err := adm.ConsumerConnection(t.Context(), "G")
	require.NoError(t, err)
	require.Len(t, conns, 3)
	assert.Equal(t, "10.0.0.1@1", conns[0].ClientID)
	assert.Equal(t, map[string]string{"Orders": "TagA || TagB"}, conns[0].Subscriptions)
	require.Len(t, conns[0].Assigned, 2)
	assert.Equal(t, client.Queue{Topic: "Orders", BrokerName: "broker-a", Broker: c.BrokerAddr(), ID: 1}, conns[0].Assigned[1])
	assert.True(t, conns[2].Broadcast)
	progress, err := adm.ConsumerProgress(t.Context(), "G", "Orders")
	require.NoError(t, err)
	require.Len(t, progress, 4)
	assert.Equal(t, "10.0.0.2@2", progress[2].ClientID)
}
