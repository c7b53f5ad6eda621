package remotingapi_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/remoting"
)

// createTopicExt is UPDATE_AND_CREATE_TOPIC's header as the official Go
// client's admin.CreateTopic sends it, with set applied ("" deletes).
func createTopicExt(topic string, set map[string]string) map[string]string {
	ext := map[string]string{
		"topic": topic, "defaultTopic": "defaultTopic", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}
	for k, v := range set {
		if v == "" {
			delete(ext, k)
			continue
		}
		ext[k] = v
	}
	return ext
}

// fill sends n messages to a queue and waits until they are visible.
func (e *env) fill(t *testing.T, cl *remoting.Client, topic string, qid int32, n int64) {
	t.Helper()
	for range n {
		requireCode(t, remoting.ResSuccess, sendOne(t, cl, topic, qid, "x", nil))
	}
	e.waitVisible(t, topic, qid, n)
}

// badRequest checks that resp refuses a request with code, its remark
// containing what.
func badRequest(t *testing.T, code remoting.ResponseCode, what string, resp *remoting.Command) {
	t.Helper()
	requireCode(t, code, resp)
	assert.Contains(t, resp.Remark, what)
}

// UPDATE_AND_CREATE_TOPIC creates and updates a topic (attributes changed
// as mqadmin's "+k=v,-k" says), GET_ALL_TOPIC_CONFIG lists it, and
// DELETE_TOPIC_IN_BROKER removes it; bad headers and unknown or system
// topics are refused naming the problem.
func TestAdminTopics(t *testing.T) {
	var changes int
	e := newEnv(t, func(bc *broker.Config, _ *remotingapi.Config) { bc.OnTopicsChanged = func() { changes++ } })
	cl := e.dial(t, nil)

	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqUpdateAndCreateTopic, createTopicExt("Orders", map[string]string{
		"readQueueNums": "4", "writeQueueNums": "2", "order": "true", "attributes": "+message.type=NORMAL,+a=1"}), nil)))
	tc, ok := e.b.Topic("Orders")
	require.True(t, ok)
	assert.Equal(t, int32(4), tc.ReadQueueNums)
	assert.Equal(t, int32(2), tc.WriteQueueNums)
	assert.Equal(t, int32(6), tc.Perm)
	assert.True(t, tc.Order)
	assert.Equal(t, map[string]string{"message.type": "NORMAL", "a": "1"}, tc.Attributes)
	assert.Equal(t, 1, changes, "the nameservers are told")

	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqUpdateAndCreateTopic, createTopicExt("Orders", map[string]string{
		"readQueueNums": "4", "writeQueueNums": "2", "order": "true", "perm": "4", "topicFilterType": "", "attributes": "-a"}), nil)))
	tc, _ = e.b.Topic("Orders")
	assert.Equal(t, int32(4), tc.Perm)
	assert.Equal(t, "SINGLE_TAG", tc.TopicFilterType)
	assert.Equal(t, map[string]string{"message.type": "NORMAL"}, tc.Attributes)

	resp := invoke(t, cl, request(remoting.ReqGetAllTopicConfig, map[string]string{"topicSeq": "0", "maxTopicNum": "100"}, nil))
	requireCode(t, remoting.ResSuccess, resp)
	var all struct {
		DataVersion struct {
			Counter   int64 `json:"counter"`
			Timestamp int64 `json:"timestamp"`
		} `json:"dataVersion"`
		TopicConfigTable map[string]struct {
			TopicName       string            `json:"topicName"`
			ReadQueueNums   int32             `json:"readQueueNums"`
			WriteQueueNums  int32             `json:"writeQueueNums"`
			Perm            int32             `json:"perm"`
			TopicFilterType string            `json:"topicFilterType"`
			Order           bool              `json:"order"`
			Attributes      map[string]string `json:"attributes"`
		} `json:"topicConfigTable"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &all), "%s", resp.Body)
	assert.NotContains(t, resp.ExtFields, "totalTopicNum", "mqadmin then reads the answer as the whole table")
	assert.Positive(t, all.DataVersion.Counter)
	assert.Positive(t, all.DataVersion.Timestamp)
	orders := all.TopicConfigTable["Orders"]
	assert.Equal(t, "Orders", orders.TopicName)
	assert.Equal(t, int32(4), orders.ReadQueueNums)
	assert.Equal(t, int32(2), orders.WriteQueueNums)
	assert.Equal(t, "SINGLE_TAG", orders.TopicFilterType)
	assert.True(t, orders.Order)
	assert.NotContains(t, all.TopicConfigTable, broker.ScheduleTopic, "the parking topics are not listed")

	for _, tt := range []struct {
		name string
		ext  map[string]string
		code remoting.ResponseCode
		what string
	}{
		{"no topic", createTopicExt("", nil), remoting.ResInvalidParameter, "ext field topic is required"},
		{"no readQueueNums", createTopicExt("X", map[string]string{"readQueueNums": ""}), remoting.ResInvalidParameter, "ext field readQueueNums is required"},
		{"perm not a number", createTopicExt("X", map[string]string{"perm": "rw"}), remoting.ResInvalidParameter, `ext field perm "rw" is not an int32`},
		{"queues too many", createTopicExt("X", map[string]string{"writeQueueNums": "5000"}), remoting.ResInvalidParameter, "writeQueueNums 5000"},
		{"queues zero", createTopicExt("X", map[string]string{"readQueueNums": "0"}), remoting.ResInvalidParameter, "readQueueNums 0"},
		{"perm too big", createTopicExt("X", map[string]string{"perm": "8"}), remoting.ResInvalidParameter, "perm 8"},
		{"filter type", createTopicExt("X", map[string]string{"topicFilterType": "SQL"}), remoting.ResInvalidParameter, `topicFilterType "SQL"`},
		{"attributes", createTopicExt("X", map[string]string{"attributes": "a=1"}), remoting.ResInvalidParameter, `"a=1": want +key=value or -key`},
		{"topic name", createTopicExt("a/b", nil), remoting.ResInvalidParameter, `topic name "a/b"`},
		{"system topic", createTopicExt("TBW102", nil), remoting.ResNoPermission, "TBW102"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			badRequest(t, tt.code, tt.what, invoke(t, cl, request(remoting.ReqUpdateAndCreateTopic, tt.ext, nil)))
		})
	}
	_, ok = e.b.Topic("X")
	assert.False(t, ok, "no refused request created anything")

	require.NoError(t, e.b.CommitOffset("CG", "Orders", 1, 3))
	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqDeleteTopicInBroker, map[string]string{"topic": "Orders"}, nil)))
	_, ok = e.b.Topic("Orders")
	assert.False(t, ok)
	_, ok = e.b.QueryOffset("CG", "Orders", 1)
	assert.False(t, ok, "the groups' offsets go with the topic")
	badRequest(t, remoting.ResTopicNotExist, `"Orders"`, invoke(t, cl, request(remoting.ReqDeleteTopicInBroker, map[string]string{"topic": "Orders"}, nil)))
	badRequest(t, remoting.ResInvalidParameter, "ext field topic is required", invoke(t, cl, request(remoting.ReqDeleteTopicInBroker, nil, nil)))
	badRequest(t, remoting.ResNoPermission, "SCHEDULE_TOPIC_XXXX", invoke(t, cl, request(remoting.ReqDeleteTopicInBroker, map[string]string{"topic": broker.ScheduleTopic}, nil)))
}

// groupBody is an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body as mqadmin
// (fastjson) writes it.
func groupBody(name string, retryMax int, policy string) []byte {
	return fmt.Appendf(nil, `{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,`+
		`"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":%q,`+
		`"groupRetryPolicy":%s,"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":%d,`+
		`"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}`, name, policy, retryMax)
}

const customizedPolicy = `{"customizedRetryPolicy":{"next":[1000,5000,10000]},"type":"CUSTOMIZED"}`

// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP creates and replaces a group from
// mqadmin's body, GET_ALL_SUBSCRIPTIONGROUP_CONFIG lists it in the body
// the official client's admin.GetAllSubscriptionGroup decodes, and
// DELETE_SUBSCRIPTIONGROUP removes it (its offsets only with cleanOffset)
// and succeeds for a group already gone, as RocketMQ's broker does; bad
// bodies are refused naming the problem.
func TestAdminGroups(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)

	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqUpdateAndCreateSubscriptionGroup, nil, groupBody("billing", 3, customizedPolicy))))
	g, ok := e.b.Group("billing")
	require.True(t, ok)
	assert.Equal(t, int32(3), g.RetryMaxTimes)
	assert.True(t, g.ConsumeBroadcastEnable)
	assert.Nil(t, g.GroupRetryPolicy, "CUSTOMIZED is the delay-level ladder")
	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqUpdateAndCreateSubscriptionGroup, nil,
		groupBody("billing", 5, `{"exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3},"type":"EXPONENTIAL"}`))))
	g, _ = e.b.Group("billing")
	assert.Equal(t, int32(5), g.RetryMaxTimes)
	require.NotNil(t, g.GroupRetryPolicy)
	assert.Equal(t, int64(60000), g.GroupRetryPolicy.Exponential.Max)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"minimal"}`))))
	g, _ = e.b.Group("minimal")
	assert.True(t, g.ConsumeEnable, "a field left out has the default")
	assert.Equal(t, int32(16), g.RetryMaxTimes)

	resp := invoke(t, cl, request(remoting.ReqGetAllSubscriptionGroupConfig, nil, nil))
	requireCode(t, remoting.ResSuccess, resp)
	var all struct { // the official client's admin.SubscriptionGroupWrapper, which decodes field names case-insensitively
		SubscriptionGroupTable map[string]struct {
			GroupName     string
			ConsumeEnable bool
			RetryMaxTimes int
		}
		DataVersion struct {
			Timestamp int64
			Counter   int32
		}
		ForbiddenTable map[string]map[string]int
	}
	require.NoError(t, json.Unmarshal(resp.Body, &all), "%s", resp.Body)
	assert.Equal(t, 5, all.SubscriptionGroupTable["billing"].RetryMaxTimes)
	assert.True(t, all.SubscriptionGroupTable["minimal"].ConsumeEnable)
	assert.Equal(t, int32(3), all.DataVersion.Counter)
	assert.NotNil(t, all.ForbiddenTable)

	for _, tt := range []struct {
		name string
		body []byte
		what string
	}{
		{"no body", nil, "no SubscriptionGroupConfig body"},
		{"not JSON", []byte("groupName=x"), "SubscriptionGroupConfig body"},
		{"wrong type", []byte(`{"groupName":"x","retryMaxTimes":"many"}`), "SubscriptionGroupConfig body"},
		{"no name", []byte(`{}`), `group name ""`},
		{"bad name", groupBody("a b", 1, "null"), `group name "a b"`},
		{"retries", groupBody("x", 5000, "null"), "retryMaxTimes 5000"},
		{"policy type", groupBody("x", 1, `{"type":"LINEAR"}`), `type "LINEAR"`},
		{"policy values", groupBody("x", 1, `{"type":"EXPONENTIAL"}`), "EXPONENTIAL without exponentialRetryPolicy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			badRequest(t, remoting.ResInvalidParameter, tt.what, invoke(t, cl, request(remoting.ReqUpdateAndCreateSubscriptionGroup, nil, tt.body)))
		})
	}
	_, ok = e.b.Group("x")
	assert.False(t, ok)

	require.NoError(t, e.b.CommitOffset("billing", "T", 0, 7))
	del := func(group, clean string) *remoting.Command {
		ext := map[string]string{"groupName": group}
		if clean != "" {
			ext["cleanOffset"] = clean
		}
		return invoke(t, cl, request(remoting.ReqDeleteSubscriptionGroup, ext, nil))
	}
	requireCode(t, remoting.ResSuccess, del("billing", "false"))
	_, ok = e.b.Group("billing")
	assert.False(t, ok)
	off, ok := e.b.QueryOffset("billing", "T", 0)
	assert.True(t, ok, "without cleanOffset the offsets stay, as in RocketMQ")
	assert.Equal(t, int64(7), off)
	resp = del("billing", "")
	requireCode(t, remoting.ResSuccess, resp)
	assert.Contains(t, resp.Remark, "billing not found", "a group already deleted: SUCCESS, as from RocketMQ's broker")
	requireCode(t, remoting.ResSuccess, del("billing", "true"))
	_, ok = e.b.QueryOffset("billing", "T", 0)
	assert.False(t, ok, "cleanOffset removes them")
	requireCode(t, remoting.ResSuccess, del("billing", "true"))
	resp = del("nobody", "true")
	requireCode(t, remoting.ResSuccess, resp)
	assert.Contains(t, resp.Remark, "nobody not found")
	badRequest(t, remoting.ResInvalidParameter, "ext field groupName is required", del("", ""))
	badRequest(t, remoting.ResInvalidParameter, `group name "a b"`, del("a b", ""))
}

// GET_TOPIC_STATS_INFO answers each queue's offsets and last store time
// in a TopicStatsTable keyed by MessageQueue objects, as fastjson writes
// it for mqadmin.
func TestAdminTopicStats(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	e.fill(t, cl, "T", 1, 3)
	qs, err := e.b.TopicStatus("T")
	require.NoError(t, err)
	last := qs[1].LastStoreTimestamp
	require.Positive(t, last)

	resp := invoke(t, cl, request(remoting.ReqGetTopicStatsInfo, map[string]string{"topic": "T"}, nil))
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, `{"offsetTable":{`+
		`{"topic":"T","brokerName":"broker-a","queueId":0}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0},`+
		`{"topic":"T","brokerName":"broker-a","queueId":1}:{"lastUpdateTimestamp":`+strconv.FormatInt(last, 10)+`,"maxOffset":3,"minOffset":0}}}`,
		string(resp.Body))

	badRequest(t, remoting.ResTopicNotExist, `"Nope"`, invoke(t, cl, request(remoting.ReqGetTopicStatsInfo, map[string]string{"topic": "Nope"}, nil)))
	badRequest(t, remoting.ResInvalidParameter, "ext field topic is required", invoke(t, cl, request(remoting.ReqGetTopicStatsInfo, nil, nil)))
	badRequest(t, remoting.ResInvalidParameter, "topic name", invoke(t, cl, request(remoting.ReqGetTopicStatsInfo, map[string]string{"topic": "a b"}, nil)))
}

// GET_CONSUME_STATS answers a group's progress per read queue of the
// topics it consumes (or those asked for) in a ConsumeStats; an unknown
// group or topic is refused.
func TestAdminConsumeStats(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	e.createTopic(t, "U", 1)
	cl := e.dial(t, nil)
	e.fill(t, cl, "T", 0, 4)
	require.NoError(t, e.b.CommitOffset("CG", "T", 0, 2))
	require.NoError(t, e.b.CommitOffset("CG", "U", 0, 0))
	m, err := e.b.MessageByQueueOffset("T", 0, 1)
	require.NoError(t, err)
	stats := func(ext map[string]string) *remoting.Command {
		return invoke(t, cl, request(remoting.ReqGetConsumeStats, ext, nil))
	}

	resp := stats(map[string]string{"consumerGroup": "CG", "topic": "T"})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, `{"offsetTable":{`+
		`{"topic":"T","brokerName":"broker-a","queueId":0}:{"brokerOffset":4,"consumerOffset":2,"lastTimestamp":`+strconv.FormatInt(m.StoreTimestamp, 10)+`,"pullOffset":2},`+
		`{"topic":"T","brokerName":"broker-a","queueId":1}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}`,
		string(resp.Body))
	resp = stats(map[string]string{"consumerGroup": "CG"})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Contains(t, string(resp.Body), `{"topic":"U","brokerName":"broker-a","queueId":0}:`, "without a topic: those with offsets")
	assert.Contains(t, string(resp.Body), `{"topic":"T","brokerName":"broker-a","queueId":1}:`)
	resp = stats(map[string]string{"consumerGroup": "CG", "topicList": "U;;U;U"})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, `{"offsetTable":{{"topic":"U","brokerName":"broker-a","queueId":0}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}`, string(resp.Body))

	badRequest(t, remoting.ResSubscriptionGroupNotExist, `"Nope"`, stats(map[string]string{"consumerGroup": "Nope"}))
	badRequest(t, remoting.ResTopicNotExist, "topic[Gone]", stats(map[string]string{"consumerGroup": "CG", "topic": "Gone"}))
	badRequest(t, remoting.ResTopicNotExist, "topic[Gone]", stats(map[string]string{"consumerGroup": "CG", "topicList": "T;Gone"}))
	badRequest(t, remoting.ResInvalidParameter, "ext field consumerGroup is required", stats(map[string]string{"topic": "T"}))
}

// GET_CONSUMER_CONNECTION_LIST answers a group's live clients with what
// their heartbeats said, in a ConsumerConnection; a group without live
// clients is CONSUMER_NOT_ONLINE.
func TestAdminConsumerConnection(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, golden(t, "frame_heartbeat_request", nil)))
	require.NoError(t, e.b.Heartbeat(broker.Heartbeat{ClientID: "grpc-client", Group: "CG", Addr: "10.0.0.9:5000",
		Subscriptions: []broker.Subscription{{Topic: "T", Expression: "TagA || TagB"}}}))

	resp := invoke(t, cl, request(remoting.ReqGetConsumerConnectionList, map[string]string{"consumerGroup": "CG"}, nil))
	requireCode(t, remoting.ResSuccess, resp)
	var cc struct {
		ConnectionSet []struct {
			ClientID   string `json:"clientId"`
			ClientAddr string `json:"clientAddr"`
			Language   string `json:"language"`
			Version    int    `json:"version"`
		} `json:"connectionSet"`
		SubscriptionTable map[string]struct {
			Topic          string   `json:"topic"`
			SubString      string   `json:"subString"`
			ExpressionType string   `json:"expressionType"`
			TagsSet        []string `json:"tagsSet"`
			CodeSet        []int32  `json:"codeSet"`
		} `json:"subscriptionTable"`
		ConsumeType      string `json:"consumeType"`
		MessageModel     string `json:"messageModel"`
		ConsumeFromWhere string `json:"consumeFromWhere"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &cc), "%s", resp.Body)
	require.Len(t, cc.ConnectionSet, 2)
	assert.Equal(t, "127.0.0.1@vectors-consumer", cc.ConnectionSet[0].ClientID)
	assert.Equal(t, cl.Conn().LocalAddr().String(), cc.ConnectionSet[0].ClientAddr)
	assert.Equal(t, "GO", cc.ConnectionSet[0].Language, "the heartbeat's language and version")
	assert.Equal(t, 317, cc.ConnectionSet[0].Version)
	assert.Equal(t, "grpc-client", cc.ConnectionSet[1].ClientID)
	assert.Equal(t, "OTHER", cc.ConnectionSet[1].Language)
	assert.Equal(t, "CONSUME_PASSIVELY", cc.ConsumeType)
	assert.Equal(t, "CLUSTERING", cc.MessageModel)
	assert.Equal(t, "CONSUME_FROM_LAST_OFFSET", cc.ConsumeFromWhere)
	sub := cc.SubscriptionTable["T"]
	assert.Equal(t, "TagA || TagB", sub.SubString)
	assert.Equal(t, "TAG", sub.ExpressionType)
	assert.Equal(t, []string{"TagA", "TagB"}, sub.TagsSet)
	assert.Equal(t, []int32{2598919, 2598920}, sub.CodeSet, "Java's String.hashCode, as the Go client sends them")
	assert.Equal(t, "*", cc.SubscriptionTable["%RETRY%CG"].SubString)

	badRequest(t, remoting.ResConsumerNotOnline, "the consumer group[Nope] not online",
		invoke(t, cl, request(remoting.ReqGetConsumerConnectionList, map[string]string{"consumerGroup": "Nope"}, nil)))
	badRequest(t, remoting.ResInvalidParameter, "ext field consumerGroup is required",
		invoke(t, cl, request(remoting.ReqGetConsumerConnectionList, nil, nil)))
}

// GET_BROKER_RUNTIME_INFO answers a KVTable with Java's key names.
func TestAdminRuntimeInfo(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)
	e.fill(t, cl, "T", 0, 1)

	resp := invoke(t, cl, request(remoting.ReqGetBrokerRuntimeInfo, nil, nil))
	requireCode(t, remoting.ResSuccess, resp)
	var kv struct {
		Table map[string]string `json:"table"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &kv), "%s", resp.Body)
	st := e.b.Status()
	assert.Equal(t, "V5_3_3", kv.Table["brokerVersionDesc"])
	assert.Equal(t, "true", kv.Table["brokerActive"])
	assert.Equal(t, "1", kv.Table["msgPutTotalTodayNow"])
	assert.Equal(t, strconv.FormatInt(st.MaxLogOffset, 10), kv.Table["commitLogMaxOffset"])
	assert.Equal(t, "0", kv.Table["commitLogMinOffset"])
	assert.Equal(t, strconv.FormatInt(st.StartedAt.UnixMilli(), 10), kv.Table["bootTimestamp"])
	assert.Regexp(t, `^\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]$`, kv.Table["runtime"])
	ts, err := strconv.ParseInt(kv.Table["earliestMessageTimeStamp"], 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, time.Now().UnixMilli(), ts, float64(time.Minute.Milliseconds()))
	ratio, err := strconv.ParseFloat(kv.Table["commitLogDiskRatio"], 64)
	require.NoError(t, err)
	assert.True(t, ratio >= 0 && ratio <= 1, "ratio %v", ratio)
	assert.Regexp(t, `^Total : [\d.]+ [KMGTPE]iB, Free : [\d.]+ [KMGTPE]iB\.$`, kv.Table["commitLogDirCapacity"])
	assert.Contains(t, kv.Table, "dispatchBehindBytes")
	assert.Equal(t, "0", kv.Table["dispatchHeldBytes"], "a broker of static role holds nothing back")
}

// INVOKE_BROKER_TO_RESET_OFFSET resets a group's offsets in every read
// queue of a topic by time and answers them in a ResetOffsetBody; one
// queue's reset, bad headers, unknown topics and groups are refused.
func TestAdminResetOffset(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	e.fill(t, cl, "T", 1, 3)
	require.NoError(t, e.b.CommitOffset("CG", "T", 1, 1))
	reset := func(set map[string]string) *remoting.Command {
		ext := map[string]string{"topic": "T", "group": "CG", "timestamp": "0", "isForce": "true", "offset": "-1"}
		for k, v := range set {
			if v == "" {
				delete(ext, k)
				continue
			}
			ext[k] = v
		}
		return invoke(t, cl, request(remoting.ReqInvokeBrokerToResetOffset, ext, nil))
	}

	resp := reset(nil)
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, `{"offsetTable":{{"topic":"T","brokerName":"broker-a","queueId":0}:0,{"topic":"T","brokerName":"broker-a","queueId":1}:0}}`, string(resp.Body))
	off, _ := e.b.QueryOffset("CG", "T", 1)
	assert.Equal(t, int64(0), off)
	resp = reset(map[string]string{"timestamp": "-1", "offset": ""})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, `{"offsetTable":{{"topic":"T","brokerName":"broker-a","queueId":0}:0,{"topic":"T","brokerName":"broker-a","queueId":1}:3}}`, string(resp.Body),
		"a negative timestamp is the latest offset")

	badRequest(t, remoting.ResInvalidParameter, "resetting one queue (queueId 1, offset 2)", reset(map[string]string{"queueId": "1", "offset": "2"}))
	badRequest(t, remoting.ResTopicNotExist, "topic[Nope]", reset(map[string]string{"topic": "Nope"}))
	badRequest(t, remoting.ResSubscriptionGroupNotExist, `"Nobody"`, reset(map[string]string{"group": "Nobody"}))
	badRequest(t, remoting.ResInvalidParameter, "ext field timestamp is required", reset(map[string]string{"timestamp": ""}))
	badRequest(t, remoting.ResInvalidParameter, `ext field timestamp "yesterday" is not an int64`, reset(map[string]string{"timestamp": "yesterday"}))
	badRequest(t, remoting.ResInvalidParameter, "ext field group is required", reset(map[string]string{"group": ""}))
	assert.Empty(t, e.b.OffsetKeys("Nobody"), "a refused reset creates no group")
}

// Requests that would change the broker's configuration at run time stay
// refused, naming their code; the connection stays usable.
func TestConfigChangesRefused(t *testing.T) {
	e := newEnv(t)
	cl := e.dial(t, nil)
	resp := invoke(t, cl, request(remoting.ReqUpdateBrokerConfig, nil, []byte("autoCreateTopicEnable=true\n")))
	badRequest(t, remoting.ResRequestCodeNotSupported, "request code 25 (UPDATE_BROKER_CONFIG) is not supported by Gantry: the broker's configuration is broker.conf's", resp)
	assert.False(t, e.b.Config().AutoCreateTopicEnable)
	for _, code := range []remoting.RequestCode{remoting.ReqWipeWritePermOfBroker, remoting.ReqUpdateNameServerConfig,
		remoting.ReqPutKVConfig, remoting.ReqDeleteKVConfig, remoting.ReqTriggerDeleteFiles, remoting.ReqCleanUnusedTopic,
		remoting.ReqCleanExpiredConsumeQueue, remoting.ReqResetConsumerOffsetInBroker, remoting.ReqCloneGroupOffset} {
		resp := invoke(t, cl, request(code, map[string]string{"topic": "T"}, nil))
		badRequest(t, remoting.ResRequestCodeNotSupported, fmt.Sprintf("request code %d (%s)", code, code.Name()), resp)
	}
	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqGetAllTopicConfig, nil, nil)))
}
