package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// officialAdmin starts the official client's admin on e's nameserver,
// closed by the test's cleanup before the cluster closes.
func (e *env) officialAdmin() admin.Admin {
	e.t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{e.ns})))
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = a.Close() })
	return a
}

// TestOfficialAdmin drives Gantry with the official client's admin
// package: CreateTopic makes a topic (UPDATE_AND_CREATE_TOPIC) the
// nameserver routes at once, FetchAllTopicList and
// FetchPublishMessageQueues show it, GetAllSubscriptionGroup
// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) decodes the broker's groups, and
// DeleteTopic (DELETE_TOPIC_IN_BROKER, then DELETE_TOPIC_IN_NAMESRV)
// removes it everywhere. The official client reports success whatever
// the broker answers, so each step is checked on the broker.
func TestOfficialAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic = "T_admin"
	a := e.officialAdmin()
	ctx := t.Context()
	brokerAddr := e.c.BrokerRemotingAddr()

	require.NoError(t, a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(2), admin.WithOrder(true)))
	qs, err := e.admin.TopicStatus(ctx, topic)
	require.NoError(t, err, "CreateTopic created the topic")
	assert.Len(t, qs, 4)
	tc, ok := e.c.Broker().Topic(topic)
	require.True(t, ok)
	assert.Equal(t, []int32{4, 2, 6}, []int32{tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm})
	assert.True(t, tc.Order)

	eventually(t, waitShort, "the topic in the nameserver's topic list", func() (bool, string) {
		list, err := a.FetchAllTopicList(ctx)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(list.TopicList, topic), fmt.Sprint(list.TopicList)
	})
	mqs, err := a.FetchPublishMessageQueues(ctx, topic)
	require.NoError(t, err)
	require.Len(t, mqs, 2, "the write queues")
	assert.Equal(t, e.c.Broker().Config().BrokerName, mqs[0].BrokerName)

	groups, err := a.GetAllSubscriptionGroup(ctx, brokerAddr, 3*time.Second)
	require.NoError(t, err)
	assert.NotContains(t, groups.SubscriptionGroupTable, "G_admin")
	requireSuccess(t, e.brokerRequest(remoting.ReqUpdateAndCreateSubscriptionGroup, nil,
		fmt.Appendf(nil, `{"groupName":"G_admin","retryMaxTimes":3,"consumeBroadcastEnable":true}`)))
	groups, err = a.GetAllSubscriptionGroup(ctx, brokerAddr, 3*time.Second)
	require.NoError(t, err)
	g := groups.SubscriptionGroupTable["G_admin"]
	assert.Equal(t, "G_admin", g.GroupName)
	assert.Equal(t, 3, g.RetryMaxTimes)
	assert.True(t, g.ConsumeEnable)
	assert.True(t, g.ConsumeBroadcastEnable)
	assert.Positive(t, groups.DataVersion.Timestamp)

	require.NoError(t, a.DeleteTopic(ctx, admin.WithTopicDelete(topic)))
	_, ok = e.c.Broker().Topic(topic)
	assert.False(t, ok, "DeleteTopic deleted the topic on the broker it found in the route")
	eventually(t, waitShort, "the topic gone from the nameserver", func() (bool, string) {
		list, err := a.FetchAllTopicList(ctx)
		if err != nil {
			return false, err.Error()
		}
		_, routeErr := e.admin.Route(ctx, topic)
		return !slices.Contains(list.TopicList, topic) && routeErr != nil, fmt.Sprint(list.TopicList, routeErr)
	})
}

// brokerRequest sends a request to the broker's remoting port as mqadmin
// (Java) builds it and returns the answer.
func (e *env) brokerRequest(code remoting.RequestCode, ext map[string]string, body []byte) *remoting.Command {
	e.t.Helper()
	cl, err := remoting.Dial(e.t.Context(), e.c.BrokerRemotingAddr(), remoting.DialOptions{})
	require.NoError(e.t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(e.t.Context(), waitShort)
	defer cancel()
	resp, err := cl.Invoke(ctx, &remoting.Command{Code: int16(code), Language: "JAVA", Version: remoting.VersionV5_3_3, ExtFields: ext, Body: body})
	require.NoError(e.t, err)
	return resp
}

func requireSuccess(t *testing.T, resp *remoting.Command) {
	t.Helper()
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), "remark: %s", resp.Remark)
}

// TestMQAdminRequests sends the requests of mqadmin's topicStatus,
// consumerProgress, consumerConnection, brokerStatus, topicList and
// resetOffsetByTime as mqadmin builds them (the official Go client has no
// call for them) while official clients produce and consume, and checks
// that each answer decodes into RocketMQ's shape with the right figures;
// and that the reset holds: a consumer of the group started afterwards
// reads every message again. UPDATE_BROKER_CONFIG stays refused.
func TestMQAdminRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic, group, n = "T_mqadmin", "G_mqadmin", 40
	e.createTopic(topic, 4)
	brokerName := e.c.Broker().Config().BrokerName
	msgs := make([]*primitive.Message, n)
	for i := range msgs {
		msgs[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "admin-%d", i))
	}
	sendAll(t, e.producer(), msgs)
	e.waitDispatched(topic, n)

	// topicStatus: GET_TOPIC_STATS_INFO.
	stats := queueTable[struct{ MinOffset, MaxOffset, LastUpdateTimestamp int64 }](t,
		e.brokerRequest(remoting.ReqGetTopicStatsInfo, map[string]string{"topic": topic}, nil))
	require.Len(t, stats, 4)
	var stored int64
	for q, s := range stats {
		assert.Equal(t, messageQueue{topic, brokerName, q.QueueID}, q)
		stored += s.MaxOffset - s.MinOffset
		if s.MaxOffset > 0 {
			assert.InDelta(t, time.Now().UnixMilli(), s.LastUpdateTimestamp, float64(time.Minute.Milliseconds()))
		}
	}
	assert.Equal(t, int64(n), stored)

	// On failure, the group's offsets per queue say which side stopped.
	defer func() {
		if t.Failed() {
			t.Logf("GET_CONSUME_STATS at the end: %s", e.brokerRequest(remoting.ReqGetConsumeStats, map[string]string{"consumerGroup": group}, nil).Body)
		}
	}()

	// consumerProgress and consumerConnection while a consumer runs:
	// GET_CONSUME_STATS, GET_CONSUMER_CONNECTION_LIST. A consumer reads
	// each queue's offset (3 s timeout) when its rebalance takes the
	// queue; a queue whose read failed on a loaded machine waits for the
	// next rebalance, 20 s later: waitLong covers it.
	rec := newRecorder()
	c := e.pushConsumer(group, topic, all, rec.handler("first"))
	rec.waitBodies(t, bodiesOf(msgs), waitLong)
	eventually(t, waitShort, "committed offsets in GET_CONSUME_STATS", func() (bool, string) {
		consumed, behind := progress(t, e.brokerRequest(remoting.ReqGetConsumeStats, map[string]string{"consumerGroup": group}, nil), topic)
		return consumed == n && behind == 0, fmt.Sprintf("consumed %d, lag %d", consumed, behind)
	})
	resp := e.brokerRequest(remoting.ReqGetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
	requireSuccess(t, resp)
	var cc struct {
		ConnectionSet []struct {
			ClientID, ClientAddr, Language string
			Version                        int
		}
		SubscriptionTable                           map[string]struct{ Topic, SubString, ExpressionType string }
		ConsumeType, MessageModel, ConsumeFromWhere string
	}
	require.NoError(t, json.Unmarshal(resp.Body, &cc), "%s", resp.Body)
	require.Len(t, cc.ConnectionSet, 1)
	assert.Contains(t, cc.ConnectionSet[0].ClientID, "TestMQAdminRequests-push")
	assert.Equal(t, "GO", cc.ConnectionSet[0].Language)
	assert.Positive(t, cc.ConnectionSet[0].Version)
	assert.Equal(t, "*", cc.SubscriptionTable[topic].SubString)
	assert.Contains(t, cc.SubscriptionTable, "%RETRY%"+group)
	assert.Equal(t, []string{"CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET"}, []string{cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere})

	// brokerStatus: GET_BROKER_RUNTIME_INFO.
	resp = e.brokerRequest(remoting.ReqGetBrokerRuntimeInfo, nil, nil)
	requireSuccess(t, resp)
	var kv struct{ Table map[string]string }
	require.NoError(t, json.Unmarshal(resp.Body, &kv), "%s", resp.Body)
	put, err := strconv.ParseInt(kv.Table["msgPutTotalTodayNow"], 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, put, int64(n))
	assert.Equal(t, "V5_3_3", kv.Table["brokerVersionDesc"])

	// topicList -c / updateTopic: GET_ALL_TOPIC_CONFIG with the paging
	// fields of a 5.x mqadmin.
	resp = e.brokerRequest(remoting.ReqGetAllTopicConfig, map[string]string{"topicSeq": "0", "maxTopicNum": "2000", "dataVersion": ""}, nil)
	requireSuccess(t, resp)
	var topics struct {
		TopicConfigTable map[string]struct {
			TopicName                           string
			ReadQueueNums, WriteQueueNums, Perm int
		}
		DataVersion struct{ Timestamp, Counter int64 }
	}
	require.NoError(t, json.Unmarshal(resp.Body, &topics), "%s", resp.Body)
	assert.Equal(t, 4, topics.TopicConfigTable[topic].ReadQueueNums)
	assert.Contains(t, topics.TopicConfigTable, "%RETRY%"+group)

	// resetOffsetByTime -t T -g G -s 0: INVOKE_BROKER_TO_RESET_OFFSET, with
	// the group's consumer stopped (a running one would commit over it
	// unless told, which is another matter). Its shutdown commits its
	// offsets oneway: once the broker has seen its connection close (no
	// member online), it has handled them. A consumer started afterwards
	// reads everything again.
	require.NoError(t, c.Shutdown())
	eventually(t, waitShort, "the consumer gone", func() (bool, string) {
		resp := e.brokerRequest(remoting.ReqGetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
		return resp.ResponseCode() == remoting.ResConsumerNotOnline, resp.ResponseCode().String() + " " + resp.Remark
	})
	resp = e.brokerRequest(remoting.ReqInvokeBrokerToResetOffset, map[string]string{
		"topic": topic, "group": group, "timestamp": "0", "isForce": "true", "queueId": "-1", "offset": "-1"}, nil)
	reset := queueTable[int64](t, resp)
	require.Len(t, reset, 4)
	for q, off := range reset {
		assert.Equal(t, brokerName, q.BrokerName)
		assert.Zero(t, off, "queue %d", q.QueueID)
	}
	consumed, behind := progress(t, e.brokerRequest(remoting.ReqGetConsumeStats, map[string]string{"consumerGroup": group, "topic": topic}, nil), topic)
	assert.Equal(t, [2]int64{0, n}, [2]int64{consumed, behind})
	again := newRecorder()
	e.pushConsumer(group, topic, all, again.handler("second"))
	again.waitBodies(t, bodiesOf(msgs), waitLong) // see the first consumer's

	resp = e.brokerRequest(remoting.ReqUpdateBrokerConfig, nil, []byte("autoCreateTopicEnable=false\n"))
	assert.Equal(t, remoting.ResRequestCodeNotSupported, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "request code 25 (UPDATE_BROKER_CONFIG) is not supported")
}

// messageQueue is RocketMQ's MessageQueue, the key of the queue tables.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

// queueTable decodes the offsetTable of a successful answer: a Java
// Map<MessageQueue, V> as fastjson writes it, keys being MessageQueue
// objects (what Java's mqadmin reads).
func queueTable[V any](t *testing.T, resp *remoting.Command) map[messageQueue]V {
	t.Helper()
	requireSuccess(t, resp)
	var body struct{ OffsetTable map[string]V }
	require.NoError(t, json.Unmarshal(objectKeysQuoted(t, resp.Body), &body), "%s", resp.Body)
	out := make(map[messageQueue]V, len(body.OffsetTable))
	for k, v := range body.OffsetTable {
		var q messageQueue
		require.NoError(t, json.Unmarshal([]byte(k), &q), "key %s", k)
		out[q] = v
	}
	return out
}

// progress sums a GET_CONSUME_STATS answer's queues of topic: the
// messages the group consumed and those it has yet to.
func progress(t *testing.T, resp *remoting.Command, topic string) (consumed, behind int64) {
	t.Helper()
	for q, w := range queueTable[struct{ BrokerOffset, ConsumerOffset, PullOffset int64 }](t, resp) {
		if q.Topic == topic {
			consumed += w.ConsumerOffset
			behind += w.BrokerOffset - w.ConsumerOffset
		}
	}
	return consumed, behind
}

// objectKeysQuoted turns fastjson's text of a map with object keys into
// JSON: each object in a key's place becomes a string holding its text.
func objectKeysQuoted(t *testing.T, b []byte) []byte {
	t.Helper()
	type level struct{ object, wantKey bool }
	var stack []level
	var out []byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		top := len(stack) - 1
		switch c {
		case '"':
			j := i + 1
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			require.Less(t, j, len(b), "unterminated string in %s", b)
			out = append(out, b[i:j+1]...)
			i = j
			continue
		case '{':
			if top >= 0 && stack[top].object && stack[top].wantKey {
				j := closingBrace(t, b, i)
				key, err := json.Marshal(string(b[i : j+1]))
				require.NoError(t, err)
				out = append(out, key...)
				i = j
				continue
			}
			stack = append(stack, level{object: true, wantKey: true})
		case '[':
			stack = append(stack, level{})
		case '}', ']':
			require.GreaterOrEqual(t, top, 0, "unbalanced %s", b)
			stack = stack[:top]
		case ':':
			stack[top].wantKey = false
		case ',':
			stack[top].wantKey = stack[top].object
		}
		out = append(out, c)
	}
	return out
}

// closingBrace returns the index of the brace closing the object at b[i].
func closingBrace(t *testing.T, b []byte, i int) int {
	t.Helper()
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			for j++; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return j
			}
		}
	}
	t.Fatalf("unbalanced object key in %s", b)
	return 0
}
