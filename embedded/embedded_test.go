package embedded_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
)

func TestMain(m *testing.M) {
	if os.Getenv(pushChildEnv) != "" { // a consumer process of TestPushMemberKilled
		os.Exit(runPushChild())
	}
	goleak.VerifyTestMain(m)
}

type clients struct {
	ns    gantryv1.NameServerClient
	msg   gantryv1.MessagingClient
	admin gantryv1.AdminClient
}

func start(t *testing.T, opts embedded.Options) (*embedded.Cluster, clients) {
	t.Helper()
	c, err := embedded.Start(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	dial := func(addr string) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	bc := dial(c.BrokerAddr())
	return c, clients{ns: gantryv1.NewNameServerClient(dial(c.NameServerAddr())), msg: gantryv1.NewMessagingClient(bc), admin: gantryv1.NewAdminClient(bc)}
}

func pullAll(t *testing.T, cl clients, topic string, qid int32, from int64, filter string) []*message.Message {
	t.Helper()
	var out []*message.Message
	for off := from; ; {
		resp, err := cl.msg.Pull(t.Context(), &gantryv1.PullRequest{Group: "g", Topic: topic, QueueId: qid, Offset: off, MaxMessages: 16,
			FilterExpression: filter, HoldMs: 1000}) // sends return before dispatch: the hold covers the gap (it ends as soon as the messages are dispatched; a loaded machine may take long)
		require.NoError(t, err)
		if resp.Status == gantryv1.PullStatus_PULL_STATUS_NO_NEW_MESSAGE {
			return out
		}
		ms, err := message.DecodeAll(resp.Records)
		require.NoError(t, err)
		require.Len(t, ms, int(resp.RecordCount))
		out = append(out, ms...)
		off = resp.NextOffset
	}
}

// Send and pull single and batched messages with tags, keys and
// properties over real gRPC, with tag filtering, key and id queries.
func TestSendPull(t *testing.T) {
	_, cl := start(t, embedded.Options{NoAutoCreateTopics: true})
	_, err := cl.admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "Orders", ReadQueueNums: 2, WriteQueueNums: 2}})
	require.NoError(t, err)
	one, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Orders", Messages: []*gantryv1.Message{{
		QueueId: 0, Body: []byte("first"), Tags: "TagA", Keys: []string{"order-1", "cust-9"}, Properties: map[string]string{"region": "eu"},
	}}})
	require.NoError(t, err)
	require.Len(t, one.Results, 1)
	var batch []*gantryv1.Message
	for i := range 10 {
		batch = append(batch, &gantryv1.Message{QueueId: 0, Body: fmt.Appendf(nil, "b%d", i), Tags: []string{"TagA", "TagB"}[i%2]})
	}
	res, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Orders", Messages: batch})
	require.NoError(t, err)
	for i, r := range res.Results {
		assert.Equal(t, int64(i+1), r.QueueOffset)
	}

	all := pullAll(t, cl, "Orders", 0, 0, "")
	require.Len(t, all, 11)
	m := all[0]
	assert.Equal(t, "first", string(m.Body))
	assert.Equal(t, "TagA", m.Tags())
	assert.Equal(t, []string{"order-1", "cust-9"}, m.Keys())
	region, _ := m.Properties.Get("region")
	assert.Equal(t, "eu", region)
	assert.Equal(t, one.Results[0].UniqKey, m.UniqKey())
	assert.Len(t, pullAll(t, cl, "Orders", 0, 0, "TagB"), 5)
	assert.Len(t, pullAll(t, cl, "Orders", 0, 0, "TagA || TagB"), 11)

	byKey, err := cl.admin.QueryMessageByKey(t.Context(), &gantryv1.QueryMessageByKeyRequest{Topic: "Orders", Key: "cust-9"})
	require.NoError(t, err)
	ms, err := message.DecodeAll(byKey.Records)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Equal(t, "first", string(ms[0].Body))
	byID, err := cl.admin.QueryMessageById(t.Context(), &gantryv1.QueryMessageByIdRequest{MsgId: one.Results[0].MsgId})
	require.NoError(t, err)
	ms, err = message.DecodeAll(byID.Records)
	require.NoError(t, err)
	assert.Equal(t, "first", string(ms[0].Body))
}

// Bad input gets a clear error naming the problem.
func TestBadInput(t *testing.T) {
	_, cl := start(t, embedded.Options{NoAutoCreateTopics: true})
	_, err := cl.admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "T"}})
	require.NoError(t, err)
	tests := []struct {
		name string
		req  *gantryv1.SendRequest
		code codes.Code
		msg  string
	}{
		{"empty body", &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{QueueId: -1}}}, codes.InvalidArgument, "body"},
		{"oversized body", &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{QueueId: -1, Body: make([]byte, 4<<20+1)}}}, codes.InvalidArgument, "4194304"},
		{"invalid topic", &gantryv1.SendRequest{Topic: "bad topic!", Messages: []*gantryv1.Message{{QueueId: -1, Body: []byte("x")}}}, codes.InvalidArgument, "bad topic!"},
		{"unknown topic, auto-create off", &gantryv1.SendRequest{Topic: "Nope", Messages: []*gantryv1.Message{{QueueId: -1, Body: []byte("x")}}}, codes.NotFound, "Nope"},
		{"properties too large", &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{QueueId: -1, Body: []byte("x"), Properties: map[string]string{"big": strings.Repeat("p", 40<<10)}}}}, codes.InvalidArgument, "propert"},
		{"no messages", &gantryv1.SendRequest{Topic: "T"}, codes.InvalidArgument, "no messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cl.msg.Send(t.Context(), tt.req, grpc.MaxCallSendMsgSize(16<<20))
			require.Error(t, err)
			assert.Equal(t, tt.code, status.Code(err), status.Convert(err).Message())
			assert.Contains(t, status.Convert(err).Message(), tt.msg)
		})
	}
}

// A held pull is answered as soon as a send reaches its queue, not when
// its hold ends.
func TestLongPollingWakesOnSend(t *testing.T) {
	const hold = 5 * time.Second
	_, cl := start(t, embedded.Options{})
	_, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Events", Messages: []*gantryv1.Message{{QueueId: 0, Body: []byte("x")}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // dispatched
		o, err := cl.msg.GetQueueOffsets(t.Context(), &gantryv1.GetQueueOffsetsRequest{Topic: "Events", QueueId: 0})
		return err == nil && o.MaxOffset == 1
	}, 5*time.Second, time.Millisecond)
	var lat []time.Duration
	for i := range 20 {
		got := make(chan time.Time, 1)
		go func() {
			resp, err := cl.msg.Pull(context.Background(), &gantryv1.PullRequest{Group: "g", Topic: "Events", QueueId: 0, Offset: int64(i + 1), HoldMs: hold.Milliseconds()})
			if err == nil && resp.Status == gantryv1.PullStatus_PULL_STATUS_FOUND {
				got <- time.Now()
			}
			close(got)
		}()
		time.Sleep(20 * time.Millisecond) // the pull is held
		sent := time.Now()
		_, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Events", Messages: []*gantryv1.Message{{QueueId: 0, Body: []byte("y")}}})
		require.NoError(t, err)
		at, ok := <-got
		require.True(t, ok, "the held pull returned the message")
		lat = append(lat, at.Sub(sent))
	}
	slices.Sort(lat)
	t.Logf("pull answered after the send started: median %v, worst %v of %d", lat[len(lat)/2], lat[len(lat)-1], len(lat))
	// Woken by the send, not answered when the hold (5 s) ends: the median
	// (CI runs every package's tests at once under -race) far below it.
	assert.Less(t, lat[len(lat)/2], hold/20)
}

// Offsets committed before a broker restart are there after it, and no
// acknowledged message is lost by a restart in the middle of a stream.
func TestRestartKeepsOffsetsAndMessages(t *testing.T) {
	c, cl := start(t, embedded.Options{})
	acked := 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { // keeps sending through the restart; counts acknowledgements
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			_, err := cl.msg.Send(ctx, &gantryv1.SendRequest{Topic: "Stream", Messages: []*gantryv1.Message{{QueueId: 0, Body: fmt.Appendf(nil, "m%d", i)}}})
			if err == nil {
				acked++
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	_, err := cl.msg.CommitOffset(t.Context(), &gantryv1.CommitOffsetRequest{Group: "g", Topic: "Stream", QueueId: 0, Offset: 7})
	require.NoError(t, err)
	require.NoError(t, c.RestartBroker(t.Context()))
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	require.Positive(t, acked)

	// The failed sends during the restart put the connection in gRPC's
	// reconnect backoff: wait for it to be ready again.
	qctx, qcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer qcancel()
	off, err := cl.msg.QueryOffset(qctx, &gantryv1.QueryOffsetRequest{Group: "g", Topic: "Stream", QueueId: 0}, grpc.WaitForReady(true))
	require.NoError(t, err)
	assert.True(t, off.Found)
	assert.Equal(t, int64(7), off.Offset)
	got := pullAll(t, cl, "Stream", 0, 0, "")
	assert.GreaterOrEqual(t, len(got), acked, "every acknowledged message is there")
}

// A broker that stops disappears from the routes; metrics and health are served.
func TestRouteExpiryAndHTTP(t *testing.T) {
	c, cl := start(t, embedded.Options{})
	_, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Orders", Messages: []*gantryv1.Message{{QueueId: -1, Body: []byte("x")}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := cl.ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "auto-created topic is registered at once")

	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "rocketmq_messages_in_total"} {
		resp, err := http.Get("http://" + c.HTTPAddr() + path)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(b), want, path)
	}

	require.NoError(t, c.StopBroker(t.Context()))
	_, err = cl.ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	assert.Equal(t, codes.NotFound, status.Code(err))
	require.NoError(t, c.StartBroker(t.Context()))
	require.Eventually(t, func() bool {
		_, err := cl.ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)
	assert.NotNil(t, c.Broker())

	// A broker that dies without unregistering leaves the routes as soon as
	// its registration stream breaks, not 120 s later.
	require.NoError(t, c.KillBroker())
	require.Eventually(t, func() bool {
		_, err := cl.ns.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
		return status.Code(err) == codes.NotFound
	}, 5*time.Second, 5*time.Millisecond, "route of a dead broker expires")
	require.NoError(t, c.StartBroker(t.Context()))
}

// A nameserver restarted while one of its ports is taken fails to start,
// naming the port, as often as it is tried, and starts on its addresses
// once the port is free.
func TestStartNameServerOnATakenPort(t *testing.T) {
	c, _ := start(t, embedded.Options{})
	nsAddr, nsRemotingAddr := c.NameServerAddr(), c.NameServerRemotingAddr()
	require.NoError(t, c.StopNameServer(t.Context()))
	taken, err := net.Listen("tcp", nsRemotingAddr)
	require.NoError(t, err)
	for range 2 {
		started := make(chan error, 1)
		go func() { started <- c.StartNameServer(t.Context()) }()
		select {
		case err := <-started:
			require.ErrorContains(t, err, "nameserver remoting listen")
		case <-time.After(30 * time.Second):
			t.Fatal("StartNameServer did not return")
		}
	}
	require.NoError(t, taken.Close())
	require.NoError(t, c.StartNameServer(t.Context()))
	assert.Equal(t, nsAddr, c.NameServerAddr())
	assert.Equal(t, nsRemotingAddr, c.NameServerRemotingAddr())
	for _, addr := range []string{nsAddr, nsRemotingAddr} {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err, "the nameserver listens on %s", addr)
		conn.Close()
	}
}

// SendStream pipelines requests in both flush modes: every request is
// answered by its id, the log holds them in the order they were written
// (under SYNC_FLUSH too, where the broker starts the next request before
// the previous one is flushed), and closing the send side ends the stream
// only after the last answer.
func TestSendStreamPipelined(t *testing.T) {
	for _, mode := range []commitlog.FlushMode{commitlog.AsyncFlush, commitlog.SyncFlush} {
		t.Run(mode.String(), func(t *testing.T) {
			_, cl := start(t, embedded.Options{Broker: func(c *broker.Config) { c.FlushDiskType = mode }})
			_, err := cl.admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "Piped", ReadQueueNums: 1, WriteQueueNums: 1}})
			require.NoError(t, err)
			st, err := cl.msg.SendStream(t.Context())
			require.NoError(t, err)
			const n = 500
			for i := range n {
				require.NoError(t, st.Send(&gantryv1.SendRequest{Topic: "Piped", RequestId: uint64(i + 1),
					Messages: []*gantryv1.Message{{Body: fmt.Appendf(nil, "m%03d", i)}}}))
			}
			require.NoError(t, st.CloseSend())
			offsets := map[uint64]int64{}
			for {
				resp, err := st.Recv()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				require.Nil(t, resp.Error)
				require.Len(t, resp.Results, 1)
				offsets[resp.RequestId] = resp.Results[0].QueueOffset
			}
			require.Len(t, offsets, n, "one answer per request")
			for id, off := range offsets {
				require.Equal(t, int64(id-1), off, "request %d stored in order", id)
			}
			ms := pullAll(t, cl, "Piped", 0, 0, "")
			require.Len(t, ms, n)
			for i, m := range ms {
				require.Equal(t, fmt.Sprintf("m%03d", i), string(m.Body))
			}
		})
	}
}
