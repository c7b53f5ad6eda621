package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

func newTestAdmin(t *testing.T, ns *fakeNameServer) *Admin {
	t.Helper()
	a, err := NewAdmin(t.Context(), testConfig(t, ns))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// byBroker sends to the first queue of the named broker.
func byBroker(name string) QueueSelector {
	return SelectorFunc(func(_ string, qs []Queue, _ *Message) Queue {
		for _, q := range qs {
			if q.BrokerName == name {
				return q
			}
		}
		return qs[0]
	})
}

func TestAdminCreateTopicOnEveryBroker(t *testing.T) {
	a := startBroker(t, "a", 1)
	b := startBroker(t, "b", 1)
	ns := startNameServer(t, a, b)
	adm := newTestAdmin(t, ns)

	require.NoError(t, adm.CreateTopic(t.Context(), TopicConfig{Name: "New"}))
	for _, br := range []*fakeBroker{a, b} {
		br.mu.Lock()
		tp := br.topics["New"]
		br.mu.Unlock()
		require.NotNil(t, tp, "broker %s", br.name)
		assert.Equal(t, [3]int32{8, 8, 6}, [3]int32{tp.read, tp.write, tp.perm})
	}
	route, err := adm.Route(t.Context(), "New")
	require.NoError(t, err)
	require.Len(t, route.Queues, 2)
	assert.Equal(t, "a", route.Queues[0].BrokerName)
	assert.Len(t, route.WriteQueues(), 16)
	assert.Len(t, route.ReadQueues(), 16)

	require.NoError(t, adm.CreateTopic(t.Context(), TopicConfig{Name: "OnlyB", ReadQueueNums: 2, WriteQueueNums: 3, Perm: PermRead}, b.addr))
	route, err = adm.Route(t.Context(), "OnlyB")
	require.NoError(t, err)
	require.Len(t, route.Queues, 1)
	assert.Equal(t, QueueData{BrokerName: "b", ReadQueueNums: 2, WriteQueueNums: 3, Perm: PermRead}, route.Queues[0])
	assert.Empty(t, route.WriteQueues(), "not writable")
	assert.Len(t, route.ReadQueues(), 2)

	topics, err := adm.Topics(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"New", "OnlyB"}, topics)

	require.ErrorIs(t, adm.CreateTopic(t.Context(), TopicConfig{Name: "bad name"}), ErrInvalidArgument)

	require.NoError(t, adm.DeleteTopic(t.Context(), "OnlyB"), "a broker without the topic is fine")
	_, err = adm.Route(t.Context(), "OnlyB")
	require.ErrorIs(t, err, ErrTopicNotFound)
}

func TestAdminClusterAndStatus(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	b := startBroker(t, "b", 2, "T")
	ns := startNameServer(t, a, b)
	adm := newTestAdmin(t, ns)
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(byBroker("b")))
	_, err := p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte("x")}, {Topic: "T", Body: []byte("y")}})
	require.NoError(t, err)

	ci, err := adm.ClusterInfo(t.Context())
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"c1": {"a", "b"}}, ci.Clusters)
	assert.Equal(t, b.addr, ci.Brokers["b"].Addrs[0])

	st, err := adm.TopicStatus(t.Context(), "T")
	require.NoError(t, err)
	require.Len(t, st, 4)
	assert.Equal(t, Queue{Topic: "T", BrokerName: "b", Broker: b.addr, ID: 0}, st[2].Queue)
	assert.Equal(t, int64(2), st[2].MaxOffset)
	assert.False(t, st[2].LastStoreTime.IsZero())
	assert.Equal(t, int64(0), st[0].MaxOffset)

	bs, err := adm.BrokerStatus(t.Context(), a.addr)
	require.NoError(t, err)
	assert.Equal(t, "a", bs["brokerName"])
}

func TestAdminGroupsAndOffsets(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	b := startBroker(t, "b", 1, "T")
	ns := startNameServer(t, a, b)
	adm := newTestAdmin(t, ns)

	require.NoError(t, adm.CreateGroup(t.Context(), GroupConfig{Name: "g", Orderly: true}))
	groups, err := adm.Groups(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []GroupConfig{{Name: "g", Orderly: true}}, groups)
	a.mu.Lock()
	assert.True(t, a.groups["g"].GetConsumeEnable())
	a.mu.Unlock()
	require.NoError(t, adm.DeleteGroup(t.Context(), "g"))
	require.NoError(t, adm.DeleteGroup(t.Context(), "g"), "already gone is fine")
	groups, err = adm.Groups(t.Context())
	require.NoError(t, err)
	assert.Empty(t, groups)

	var ts atomic.Int64 // shared by both brokers
	ts.Store(5000)
	for _, br := range []*fakeBroker{a, b} {
		br.configure(func(br *fakeBroker) { br.now = func() int64 { return ts.Add(1000) } })
	}
	for _, name := range []string{"a", "a", "b", "b"} {
		p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(byBroker(name)))
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
	}
	// store times: a 6000, 7000; b 8000, 9000
	offs, err := adm.ResetOffsetByTime(t.Context(), "g", "T", time.UnixMilli(7000))
	require.NoError(t, err)
	assert.Equal(t, map[Queue]int64{
		{Topic: "T", BrokerName: "a", Broker: a.addr, ID: 0}: 1,
		{Topic: "T", BrokerName: "b", Broker: b.addr, ID: 0}: 0,
	}, offs)

	prog, err := adm.ConsumerProgress(t.Context(), "g", "T")
	require.NoError(t, err)
	require.Len(t, prog, 2)
	assert.Equal(t, QueueProgress{Queue: Queue{Topic: "T", BrokerName: "a", Broker: a.addr}, BrokerOffset: 2, ConsumerOffset: 1, Lag: 1}, prog[0])
	assert.Equal(t, int64(2), prog[1].Lag)
	all, err := adm.ConsumerProgress(t.Context(), "g", "")
	require.NoError(t, err)
	assert.Equal(t, prog, all)
}

func TestAdminQueryByKeyAggregatesBrokers(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	b := startBroker(t, "b", 2, "T")
	ns := startNameServer(t, a, b)
	adm := newTestAdmin(t, ns)
	var ts atomic.Int64 // shared by both brokers
	ts.Store(10_000)
	for _, br := range []*fakeBroker{a, b} {
		br.configure(func(br *fakeBroker) { br.now = func() int64 { return ts.Add(10) } })
	}
	var want []string
	for i, name := range []string{"a", "b", "a", "b", "b"} {
		p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(byBroker(name)))
		body := fmt.Sprint(name, i)
		_, err := p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte(body), Keys: []string{"order-7", fmt.Sprint("x", i)}},
			{Topic: "T", Body: []byte("other"), Keys: []string{"order-8"}}})
		require.NoError(t, err)
		want = append(want, body)
	}

	msgs, err := adm.QueryMessageByKey(t.Context(), "T", "order-7", time.UnixMilli(0), time.UnixMilli(1<<40), 0)
	require.NoError(t, err)
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Body))
		assert.Contains(t, m.Keys(), "order-7")
	}
	assert.Equal(t, want, got, "from both brokers, by store time")

	msgs, err = adm.QueryMessageByKey(t.Context(), "T", "order-7", time.UnixMilli(0), time.UnixMilli(1<<40), 2)
	require.NoError(t, err)
	assert.Len(t, msgs, 2)

	msgs, err = adm.QueryMessageByKey(t.Context(), "T", "order-7", time.UnixMilli(10_025), time.UnixMilli(10_065), 10)
	require.NoError(t, err)
	assert.Len(t, msgs, 2, "within the time range only")
}

func TestAdminQueryMessageByID(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	b := startBroker(t, "b", 1, "T")
	ns := startNameServer(t, a, b)
	adm := newTestAdmin(t, ns)
	// Both brokers store a record at physical offset 0; only the store host
	// in the id tells them apart.
	pa := newTestProducer(t, testConfig(t, ns), WithQueueSelector(byBroker("a")))
	ra, err := pa.Send(t.Context(), &Message{Topic: "T", Body: []byte("on a")})
	require.NoError(t, err)
	pb := newTestProducer(t, testConfig(t, ns), WithQueueSelector(byBroker("b")))
	rb, err := pb.Send(t.Context(), &Message{Topic: "T", Body: []byte("on b")})
	require.NoError(t, err)

	m, err := adm.QueryMessageByID(t.Context(), rb.MsgID)
	require.NoError(t, err)
	assert.Equal(t, []byte("on b"), m.Body)
	assert.Equal(t, "b", m.Queue.BrokerName)
	m, err = adm.QueryMessageByID(t.Context(), ra.MsgID)
	require.NoError(t, err)
	assert.Equal(t, []byte("on a"), m.Body)

	_, err = adm.QueryMessageByID(t.Context(), "0A00000100002A9F00000000000FFFFF")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = adm.QueryMessageByID(t.Context(), "nope")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestAdminCloseTwice(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, a)
	adm, err := NewAdmin(t.Context(), testConfig(t, ns))
	require.NoError(t, err)
	require.NoError(t, adm.Close())
	require.ErrorIs(t, adm.Close(), ErrClosed)
	_, err = adm.BrokerStatus(t.Context(), a.addr)
	require.ErrorIs(t, err, ErrClosed)
}

// connAdmin is a fake broker's Admin service that also lists a group's
// connections.
type connAdmin struct {
	fakeAdmin
	conns []*gantryv1.ConsumerConnection
}

func (f *connAdmin) ConsumerConnection(_ context.Context, req *gantryv1.ConsumerConnectionRequest) (*gantryv1.ConsumerConnectionResponse, error) {
	if req.GetGroup() != "g" {
		return &gantryv1.ConsumerConnectionResponse{}, nil
	}
	return &gantryv1.ConsumerConnectionResponse{Connections: f.conns}, nil
}

// startConnBroker starts a fake broker whose only service is an Admin that
// answers ConsumerConnection for group g with conns.
func startConnBroker(t *testing.T, name string, conns ...*gantryv1.ConsumerConnection) *fakeBroker {
	t.Helper()
	b := &fakeBroker{name: name, cluster: "c1", topics: map[string]*fakeTopic{}}
	b.srv, b.addr = serve(t, func(s *grpc.Server) {
		gantryv1.RegisterAdminServer(s, &connAdmin{fakeAdmin: fakeAdmin{b: b}, conns: conns})
	})
	return b
}

func TestAdminConsumerConnectionMergesBrokers(t *testing.T) {
	sub := func(topic, expr string) *gantryv1.Subscription {
		return &gantryv1.Subscription{Topic: topic, Expression: expr}
	}
	a := startConnBroker(t, "a", &gantryv1.ConsumerConnection{
		ClientId: "10.0.0.1@1", Address: "10.0.0.1:1000", LastHeartbeatMs: 1000,
		Subscriptions: []*gantryv1.Subscription{sub("T", "*"), sub("Old", "*")},
		Assigned:      []*gantryv1.QueueRef{{Topic: "T", QueueId: 2}, {Topic: "T", QueueId: 0}},
	})
	b := startConnBroker(t, "b",
		&gantryv1.ConsumerConnection{
			ClientId: "10.0.0.2@2", Address: "10.0.0.2:2000", LastHeartbeatMs: 1500, Model: gantryv1.ConsumeModel_CONSUME_MODEL_BROADCASTING,
			Subscriptions: []*gantryv1.Subscription{sub("T", "TagA")},
		},
		&gantryv1.ConsumerConnection{
			ClientId: "10.0.0.1@1", Address: "10.0.0.1:1001", LastHeartbeatMs: 2000, Ordered: true,
			Subscriptions: []*gantryv1.Subscription{sub("T", "TagA || TagB")},
			Assigned:      []*gantryv1.QueueRef{{Topic: "T", QueueId: 1}},
		})
	adm := newTestAdmin(t, startNameServer(t, a, b))

	conns, err := adm.ConsumerConnection(t.Context(), "g")
	require.NoError(t, err)
	assert.Equal(t, []ConsumerConnection{
		{
			ClientID: "10.0.0.1@1", Addr: "10.0.0.1:1001", Ordered: true, LastHeartbeat: time.UnixMilli(2000),
			Subscriptions: map[string]string{"T": "TagA || TagB"}, // the latest heartbeat's
			Assigned: []Queue{
				{Topic: "T", BrokerName: "a", Broker: a.addr, ID: 0},
				{Topic: "T", BrokerName: "a", Broker: a.addr, ID: 2},
				{Topic: "T", BrokerName: "b", Broker: b.addr, ID: 1},
			},
		},
		{
			ClientID: "10.0.0.2@2", Addr: "10.0.0.2:2000", Broadcast: true, LastHeartbeat: time.UnixMilli(1500),
			Subscriptions: map[string]string{"T": "TagA"},
		},
	}, conns)

	conns, err = adm.ConsumerConnection(t.Context(), "other")
	require.NoError(t, err)
	assert.Empty(t, conns)
	_, err = adm.ConsumerConnection(t.Context(), "")
	require.ErrorIs(t, err, ErrInvalidArgument)
}
