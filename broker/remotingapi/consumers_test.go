package remotingapi_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/remoting"
)

// The official consumer's heartbeat registers it (the group's retry topic
// created, with 1 queue and perm 6), GET_CONSUMER_LIST_BY_GROUP lists it
// in the body the Go client parses, and closing its connection
// unregisters it. A producer's heartbeat is answered and changes nothing.
func TestHeartbeatConsumerListGolden(t *testing.T) {
	var changed []string
	var mu sync.Mutex
	e := newEnv(t, func(bc *broker.Config, _ *remotingapi.Config) {
		bc.OnTopicsChanged = func() {}
		bc.OnConsumersChanged = func(g string) { mu.Lock(); changed = append(changed, g); mu.Unlock() }
	})
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)

	resp := invoke(t, cl, golden(t, "frame_heartbeat_producer_request", nil))
	requireCode(t, remoting.ResSuccess, resp)
	resp = invoke(t, cl, golden(t, "frame_heartbeat_request", nil))
	requireCode(t, remoting.ResSuccess, resp)
	assert.GreaterOrEqual(t, resp.Version, int32(0), "the Go client records it as the broker version")
	tc, ok := e.b.Topic("%RETRY%CG")
	require.True(t, ok, "the heartbeat creates the retry topic")
	assert.Equal(t, int32(1), tc.WriteQueueNums)
	assert.Equal(t, int32(6), tc.Perm)

	resp = invoke(t, cl, golden(t, "frame_consumer_list_request", nil))
	requireCode(t, remoting.ResSuccess, resp)
	assert.JSONEq(t, `{"consumerIdList":["127.0.0.1@vectors-consumer"]}`, string(resp.Body))
	cs := e.b.Consumers("CG")
	require.Len(t, cs, 1)
	assert.Equal(t, broker.Clustering, cs[0].Model)
	assert.Equal(t, []broker.Subscription{{Topic: "T", Expression: "TagA || TagB"}, {Topic: "%RETRY%CG", Expression: "*"}}, cs[0].Subscriptions)

	require.NoError(t, cl.Close())
	require.Eventually(t, func() bool { return len(e.b.ConsumerList("CG")) == 0 }, 5*time.Second, time.Millisecond,
		"closing the connection unregisters its consumers")
	// The hook runs just after the table drops the client, so wait for it
	// too rather than read it the moment the list is empty.
	changes := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), changed...) }
	require.Eventually(t, func() bool { return len(changes()) >= 2 }, 5*time.Second, time.Millisecond,
		"the leave fires OnConsumersChanged")
	assert.Equal(t, []string{"CG", "CG"}, changes(), "joined, then left")

	cl2 := e.dial(t, nil)
	resp = invoke(t, cl2, golden(t, "frame_consumer_list_request", nil))
	requireCode(t, remoting.ResSystemError, resp) // Java's answer for a group without consumers
	assert.Empty(t, resp.Body)
}

// notifications records the NOTIFY_CONSUMER_IDS_CHANGED requests a client
// gets.
type notifications struct {
	mu     sync.Mutex
	groups []string
	oneway bool
	got    chan struct{}
}

func newNotifications() *notifications { return &notifications{got: make(chan struct{}, 16)} }

func (n *notifications) handler() remoting.Handler {
	m := remoting.NewMux()
	m.HandleFunc(remoting.ReqNotifyConsumerIDsChanged, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		n.mu.Lock()
		n.groups = append(n.groups, req.Ext("consumerGroup"))
		n.oneway = req.IsOneway()
		n.mu.Unlock()
		n.got <- struct{}{}
		return nil // the Go client answers nothing
	})
	return m
}

func (n *notifications) wait(t *testing.T) {
	t.Helper()
	select {
	case <-n.got:
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY_CONSUMER_IDS_CHANGED")
	}
}

func heartbeatOf(t *testing.T, clientID, group string) *remoting.Command {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"clientID": clientID, "producerDataSet": []any{},
		"consumerDataSet": []any{map[string]any{
			"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
			"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": false,
			"subscriptionDataSet": []any{map[string]any{"classFilterMode": false, "topic": "T", "subString": "*",
				"tagsSet": []string{}, "codeSet": []string{}, "subVersion": 1, "expressionType": "TAG"}},
		}},
	})
	require.NoError(t, err)
	return request(remoting.ReqHeartBeat, nil, body)
}

// When a member joins or its connection closes, the group's other members
// get NOTIFY_CONSUMER_IDS_CHANGED (oneway, ext consumerGroup), so they
// rebalance at once; a refreshing heartbeat is no change.
func TestNotifyConsumerIDsChanged(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	na := newNotifications()
	a := e.dial(t, na.handler())
	requireCode(t, remoting.ResSuccess, invoke(t, a, heartbeatOf(t, "10.0.0.1@a", "G")))
	na.wait(t) // its own join

	b := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, b, heartbeatOf(t, "10.0.0.2@b", "G")))
	na.wait(t)
	requireCode(t, remoting.ResSuccess, invoke(t, b, heartbeatOf(t, "10.0.0.2@b", "G"))) // refresh
	assert.Equal(t, []string{"10.0.0.1@a", "10.0.0.2@b"}, e.b.ConsumerList("G"))

	require.NoError(t, b.Close())
	na.wait(t)
	assert.Equal(t, []string{"10.0.0.1@a"}, e.b.ConsumerList("G"))
	na.mu.Lock()
	assert.Equal(t, []string{"G", "G", "G"}, na.groups)
	assert.True(t, na.oneway)
	na.mu.Unlock()
	select {
	case <-na.got:
		t.Fatal("a refresh is no membership change")
	default:
	}
}

// A client that moved to a new connection is not unregistered when its
// old connection closes.
func TestMovedClientSurvivesOldConnection(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 1)
	old := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, old, heartbeatOf(t, "10.0.0.1@a", "G")))
	cur := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, cur, heartbeatOf(t, "10.0.0.1@a", "G")))
	require.NoError(t, old.Close())
	require.Eventually(t, func() bool { return e.rs.Stats().ConnsOpen == 1 }, 5*time.Second, time.Millisecond,
		"the server is done with the old connection, its close hooks included")
	assert.Equal(t, []string{"10.0.0.1@a"}, e.b.ConsumerList("G"))

	require.NoError(t, cur.Close())
	require.Eventually(t, func() bool { return len(e.b.ConsumerList("G")) == 0 }, 5*time.Second, time.Millisecond)
}

// UNREGISTER_CLIENT (Java clients at shutdown) removes the consumer; a
// malformed heartbeat is INVALID_PARAMETER.
func TestUnregisterClientAndBadHeartbeat(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, heartbeatOf(t, "10.0.0.1@a", "G")))
	resp := invoke(t, cl, request(remoting.ReqUnregisterClient, map[string]string{"clientID": "10.0.0.1@a", "consumerGroup": "G"}, nil))
	requireCode(t, remoting.ResSuccess, resp)
	assert.Empty(t, e.b.ConsumerList("G"))

	requireCode(t, remoting.ResInvalidParameter, invoke(t, cl, request(remoting.ReqHeartBeat, nil, []byte("{"))))
	requireCode(t, remoting.ResInvalidParameter, invoke(t, cl, heartbeatOf(t, "", "G")))
	requireCode(t, remoting.ResInvalidParameter, invoke(t, cl, heartbeatOf(t, "10.0.0.1@a", "bad group")))
}
