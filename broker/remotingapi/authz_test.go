package remotingapi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// The users of the authorization tests: an admin, a cluster member, a
// producer and a consumer of topic T (group G), and a user with every
// right but on T and G.
const testACL = `{"users": [
  {"accessKey": "admin1", "secretKey": "admin-secret", "role": "admin"},
  {"accessKey": "cluster1", "secretKey": "cluster-secret", "role": "cluster"},
  {"accessKey": "producer1", "secretKey": "producer1-secret", "rules": [{"resource": "Topic:T", "actions": ["Pub"]}]},
  {"accessKey": "consumer1", "secretKey": "consumer1-secret", "rules": [
    {"resource": "Topic:T", "actions": ["Sub"]}, {"resource": "Group:G", "actions": ["Sub"]}]},
  {"accessKey": "grouponly1", "secretKey": "grouponly1-secret", "rules": [{"resource": "Group:G", "actions": ["Sub"]}]},
  {"accessKey": "other1", "secretKey": "other1-secret", "rules": [{"resource": "*", "actions": ["All"]},
    {"resource": "Topic:T", "actions": ["All"], "decision": "Deny"}, {"resource": "Group:G", "actions": ["All"], "decision": "Deny"}]}
]}`

// cred is a user's keys, signing requests as the official clients do.
type cred struct{ ak, sk string }

var (
	admin1   = &cred{"admin1", "admin-secret"}
	cluster1 = &cred{"cluster1", "cluster-secret"}
	pub1     = &cred{"producer1", "producer1-secret"}
	sub1     = &cred{"consumer1", "consumer1-secret"}
	other1   = &cred{"other1", "other1-secret"}
	group1   = &cred{"grouponly1", "grouponly1-secret"} // SUB on G, no topic
)

// sign signs req (nil c: leaves it unsigned) and returns it.
func (c *cred) sign(req *remoting.Command) *remoting.Command {
	if c != nil {
		req.ExtFields[auth.ExtAccessKey] = c.ak
		req.ExtFields[auth.ExtSignature] = auth.SignRemoting(c.sk, req.ExtFields, req.Body)
	}
	return req
}

// withAuth turns authentication on with the users of testACL.
func withAuth(t testing.TB) envOption {
	acl := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(acl, []byte(testACL), 0o600))
	return func(bc *broker.Config, _ *remotingapi.Config) {
		bc.AuthenticationEnabled, bc.ACLFile = true, acl
		// Sent-back messages wait an hour: none lands in a retry topic while
		// a test compares the broker's state before and after a refusal.
		bc.MessageDelayLevel = slices.Repeat([]time.Duration{time.Hour}, 18)
	}
}

// remotingOp is one request code the front end answers: its class, a
// request that succeeds with the right user on the fixture, and the
// answers that count as success.
type remotingOp struct {
	code  remoting.RequestCode
	class auth.Class
	req   func() *remoting.Command
	ok    []remoting.ResponseCode
}

// remotingFixture: topic T (4 queues) with messages keyed key-<i>, group
// G with an offset and consumer c1, a dead letter of G, TDel and GDel to
// delete.
type remotingFixture struct {
	e    *env
	phys int64 // the commit-log offset of T's first message
}

func newRemotingFixture(t *testing.T, e *env) *remotingFixture {
	t.Helper()
	b := e.b
	e.createTopic(t, "T", 4)
	e.createTopic(t, "TDel", 1)
	for _, g := range []string{"G", "GDel"} {
		require.NoError(t, b.PutGroup(broker.DefaultSubscriptionGroup(g)))
	}
	var phys []int64
	for i := range 3 {
		res, err := b.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: 0, Body: fmt.Appendf(nil, "m%d", i),
			Properties: message.Properties{{Key: message.PropKeys, Value: fmt.Sprintf("key-%d", i)}}}})
		require.NoError(t, err)
		phys = append(phys, res[0].PhysicalOffset)
	}
	_, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: phys[2], DelayLevel: -1})
	require.NoError(t, err)
	require.NoError(t, b.CommitOffset("G", "T", 0, 1))
	e.waitVisible(t, "T", 0, 3)
	return &remotingFixture{e: e, phys: phys[0]}
}

// snapshot is what a refused request must not change (as the gRPC
// front end's tests check it).
func (f *remotingFixture) snapshot() string {
	b := f.e.b
	var sb strings.Builder
	writeLog(&sb, b)
	for _, tc := range b.Topics() {
		fmt.Fprintf(&sb, "topic %s:", tc.TopicName)
		for q := range tc.ReadQueueNums {
			lo, hi := b.QueueOffsets(tc.TopicName, q)
			fmt.Fprintf(&sb, " %d-%d", lo, hi)
		}
		sb.WriteString("\n")
	}
	for _, g := range b.Groups() {
		fmt.Fprintf(&sb, "group %s\n", g.GroupName)
	}
	for _, k := range b.OffsetKeys("") {
		for q := range int32(4) {
			off, ok := b.QueryOffset(k.Group, k.Topic, q)
			fmt.Fprintf(&sb, "offset %s %s %d: %d %v\n", k.Group, k.Topic, q, off, ok)
		}
	}
	stats := b.DLQStats()
	slices.SortFunc(stats, func(x, y broker.DLQGroupStats) int { return strings.Compare(x.Group, y.Group) })
	for _, s := range stats {
		fmt.Fprintf(&sb, "dlq %s: %d stored, %d held, %d resent\n", s.Group, s.Stored, s.Held, s.Resent)
	}
	fmt.Fprintf(&sb, "consumers of G: %v\n", b.ConsumerList("G"))
	return sb.String()
}

func (f *remotingFixture) ops(t *testing.T) []remotingOp {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	phys := strconv.FormatInt(f.phys, 10)
	ext := func(kv ...string) func() map[string]string {
		return func() map[string]string {
			m := map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
	}
	r := func(code remoting.RequestCode, ext func() map[string]string, body string) func() *remoting.Command {
		return func() *remoting.Command {
			var b []byte
			if body != "" {
				b = []byte(body)
			}
			return request(code, ext(), b)
		}
	}
	send := ext("producerGroup", "PG", "topic", "T", "queueId", "1", "sysFlag", "0", "bornTimestamp", now, "flag", "0",
		"properties", "", "reconsumeTimes", "0", "unitMode", "false", "maxReconsumeTimes", "0")
	sendV2 := ext("a", "PG", "b", "T", "c", "TBW102", "d", "4", "e", "1", "f", "0", "g", now, "h", "0", "i", "", "j", "0", "k", "false", "l", "0", "m", "false")
	batch := batchBody([][3]string{{"b1", "A", "k1"}, {"b2", "B", "k2"}})
	heartbeat := `{"clientID":"c1","consumerDataSet":[{"groupName":"G","messageModel":"CLUSTERING","consumeType":"CONSUME_PASSIVELY",` +
		`"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*","expressionType":"TAG"}]}]}`
	lock := `{"consumerGroup":"G","clientId":"c1","mqSet":[{"topic":"T","brokerName":"broker-a","queueId":3}]}`
	success := []remoting.ResponseCode{remoting.ResSuccess}
	return []remotingOp{
		{remoting.ReqSendMessage, auth.ClassPub, r(remoting.ReqSendMessage, send, "x"), success},
		{remoting.ReqSendMessageV2, auth.ClassPub, r(remoting.ReqSendMessageV2, sendV2, "x"), success},
		{remoting.ReqSendBatchMessage, auth.ClassPub, func() *remoting.Command {
			return request(remoting.ReqSendBatchMessage, sendV2(), slices.Clone(batch))
		}, success},
		{remoting.ReqHeartBeat, auth.ClassSub, r(remoting.ReqHeartBeat, ext(), heartbeat), success},
		{remoting.ReqPullMessage, auth.ClassSub, func() *remoting.Command {
			return pullReq(t, "T", 0, 0, map[string]string{"consumerGroup": "G", "suspendTimeoutMillis": "0", "sysFlag": "0"})
		}, success},
		{remoting.ReqQueryConsumerOffset, auth.ClassSub, r(remoting.ReqQueryConsumerOffset, ext("consumerGroup", "G", "topic", "T", "queueId", "0"), ""), success},
		{remoting.ReqUpdateConsumerOffset, auth.ClassSub, r(remoting.ReqUpdateConsumerOffset,
			ext("consumerGroup", "G", "topic", "T", "queueId", "0", "commitOffset", "2"), ""), success},
		{remoting.ReqSearchOffsetByTimestamp, auth.ClassSub, r(remoting.ReqSearchOffsetByTimestamp, ext("topic", "T", "queueId", "0", "timestamp", now), ""), success},
		{remoting.ReqGetMaxOffset, auth.ClassSub, r(remoting.ReqGetMaxOffset, ext("topic", "T", "queueId", "0"), ""), success},
		{remoting.ReqGetMinOffset, auth.ClassSub, r(remoting.ReqGetMinOffset, ext("topic", "T", "queueId", "0"), ""), success},
		{remoting.ReqGetConsumerListByGroup, auth.ClassSub, r(remoting.ReqGetConsumerListByGroup, ext("consumerGroup", "G"), ""), success},
		{remoting.ReqConsumerSendMsgBack, auth.ClassSub, r(remoting.ReqConsumerSendMsgBack,
			ext("group", "G", "offset", phys, "delayLevel", "1", "originTopic", "T", "maxReconsumeTimes", "16"), ""), success},
		{remoting.ReqLockBatchMQ, auth.ClassSub, r(remoting.ReqLockBatchMQ, ext(), lock), success},
		{remoting.ReqUnlockBatchMQ, auth.ClassSub, r(remoting.ReqUnlockBatchMQ, ext(), lock), success},
		{remoting.ReqQueryMessage, auth.ClassSub, r(remoting.ReqQueryMessage, ext("topic", "T", "key", "key-0", "maxNum", "32",
			"beginTimestamp", "0", "endTimestamp", strconv.FormatInt(1<<62, 10)), ""), success},
		{remoting.ReqGetTopicStatsInfo, auth.ClassSub, r(remoting.ReqGetTopicStatsInfo, ext("topic", "T"), ""), success},
		{remoting.ReqGetConsumeStats, auth.ClassSub, r(remoting.ReqGetConsumeStats, ext("consumerGroup", "G", "topic", "T"), ""), success},
		{remoting.ReqGetConsumerConnectionList, auth.ClassSub, r(remoting.ReqGetConsumerConnectionList, ext("consumerGroup", "G"), ""), success},
		{remoting.ReqUnregisterClient, auth.ClassSub, r(remoting.ReqUnregisterClient, ext("clientID", "c1", "consumerGroup", "G"), ""), success},
		{remoting.ReqViewMessageByID, auth.ClassAdmin, r(remoting.ReqViewMessageByID, ext("offset", phys), ""), success},
		{remoting.ReqUpdateAndCreateTopic, auth.ClassAdmin, r(remoting.ReqUpdateAndCreateTopic, ext("topic", "TNew", "readQueueNums", "4",
			"writeQueueNums", "4", "perm", "6", "topicFilterType", "SINGLE_TAG"), ""), success},
		{remoting.ReqDeleteTopicInBroker, auth.ClassAdmin, r(remoting.ReqDeleteTopicInBroker, ext("topic", "TDel"), ""), success},
		{remoting.ReqGetAllTopicConfig, auth.ClassAdmin, r(remoting.ReqGetAllTopicConfig, ext(), ""), success},
		{remoting.ReqUpdateAndCreateSubscriptionGroup, auth.ClassAdmin, r(remoting.ReqUpdateAndCreateSubscriptionGroup, ext(), `{"groupName":"GNew"}`), success},
		{remoting.ReqDeleteSubscriptionGroup, auth.ClassAdmin, r(remoting.ReqDeleteSubscriptionGroup, ext("groupName", "GDel"), ""), success},
		{remoting.ReqGetAllSubscriptionGroupConfig, auth.ClassAdmin, r(remoting.ReqGetAllSubscriptionGroupConfig, ext(), ""), success},
		{remoting.ReqGetBrokerRuntimeInfo, auth.ClassAdmin, r(remoting.ReqGetBrokerRuntimeInfo, ext(), ""), success},
		{remoting.ReqInvokeBrokerToResetOffset, auth.ClassAdmin, r(remoting.ReqInvokeBrokerToResetOffset,
			ext("topic", "T", "group", "G", "timestamp", "0", "isForce", "true"), ""), success},
		// Refused to everyone (broker.conf is read at start): the right
		// user is told it is not supported.
		{remoting.ReqUpdateBrokerConfig, auth.ClassAdmin, r(remoting.ReqUpdateBrokerConfig, ext(), "a=b"),
			[]remoting.ResponseCode{remoting.ResRequestCodeNotSupported}},
	}
}

// Every request code is refused NO_PERMISSION, and changes nothing,
// without credentials, with a wrong secret or an unknown access key, and
// to a user without its right; the right user runs it.
func TestRequestsNeedTheirRights(t *testing.T) {
	e := newEnv(t, withAuth(t))
	f := newRemotingFixture(t, e)
	cl := e.dial(t, nil)
	ops := f.ops(t)
	var codes []remoting.RequestCode
	for _, op := range ops {
		codes = append(codes, op.code)
		c, ok := remotingapi.CodeClass(op.code)
		require.True(t, ok, "%s", op.code)
		require.Equal(t, op.class, c, "%s: the test's table and the front end's agree", op.code)
	}
	require.ElementsMatch(t, e.h.Codes(), codes, "the table covers every code the front end answers")

	unauthenticated := []struct {
		name string
		c    *cred
		want string
	}{
		{"no credentials", nil, "operations need credentials"},
		{"wrong secret", &cred{"admin1", "not-the-secret"}, "Signature does not match"},
		{"unknown access key", &cred{"nobody1", "whatever1"}, `unknown access key "nobody1"`},
	}
	for _, op := range ops {
		t.Run(op.code.Name(), func(t *testing.T) {
			before := f.snapshot()
			for _, u := range unauthenticated {
				resp := invoke(t, cl, u.c.sign(op.req()))
				requireCode(t, remoting.ResNoPermission, resp)
				assert.Contains(t, resp.Remark, u.want, u.name)
			}
			right, wrong := sub1, []*cred{pub1, other1, cluster1}
			switch op.class {
			case auth.ClassPub:
				right, wrong = pub1, []*cred{sub1, other1, cluster1}
			case auth.ClassAdmin:
				right, wrong = admin1, []*cred{pub1, sub1, other1, cluster1}
			}
			for _, u := range wrong {
				resp := invoke(t, cl, u.sign(op.req()))
				requireCode(t, remoting.ResNoPermission, resp)
				assert.Contains(t, resp.Remark, `user "`+u.ak+`"`)
			}
			// A signed request altered in flight is refused.
			tampered := right.sign(op.req())
			tampered.ExtFields["tampered"] = "1"
			requireCode(t, remoting.ResNoPermission, invoke(t, cl, tampered))
			assert.Equal(t, before, f.snapshot(), "a refused request changed something")

			resp := invoke(t, cl, right.sign(op.req()))
			assert.Contains(t, op.ok, resp.ResponseCode(), "%s: %s", right.ak, resp.Remark)
		})
	}
	refused := e.b.Guard().Refused()
	for _, r := range []auth.Reason{auth.ReasonNoCredentials, auth.ReasonBadSignature, auth.ReasonUnknownKey, auth.ReasonDenied} {
		assert.NotZero(t, refused[r], r.String())
	}
}

// A refusal's remark names the user, the right and the resource; a
// consumer stores its own retry in its group's retry topic with SUB on
// the group, as RocketMQ checks it; a code the front end does not answer
// is REQUEST_CODE_NOT_SUPPORTED once signed right.
func TestRemotingRefusals(t *testing.T) {
	e := newEnv(t, withAuth(t))
	e.createTopic(t, "T", 1)
	require.NoError(t, e.b.PutGroup(broker.DefaultSubscriptionGroup("G")))
	cl := e.dial(t, nil)
	resp := invoke(t, cl, sub1.sign(request(remoting.ReqGetMaxOffset, map[string]string{"topic": "U", "queueId": "0"}, nil)))
	requireCode(t, remoting.ResNoPermission, resp)
	assert.Equal(t, `auth: permission denied: user "consumer1": SUB on Topic:U not allowed`, resp.Remark)

	retry := func() *remoting.Command {
		return request(remoting.ReqSendMessage, map[string]string{"producerGroup": "G", "topic": "%RETRY%G", "queueId": "0",
			"bornTimestamp": "1700000000000", "properties": "", "reconsumeTimes": "1", "maxReconsumeTimes": "16"}, []byte("retry"))
	}
	resp = invoke(t, cl, pub1.sign(retry()))
	requireCode(t, remoting.ResNoPermission, resp)
	assert.Contains(t, resp.Remark, "SUB on Topic:%RETRY%G not allowed")
	requireCode(t, remoting.ResSuccess, invoke(t, cl, sub1.sign(retry())))

	// A send-back copies the message into the group's retry topic: it
	// needs SUB on the message's topic too.
	res, err := e.b.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: 0, Body: []byte("secret")}})
	require.NoError(t, err)
	sendBack := func() *remoting.Command {
		return request(remoting.ReqConsumerSendMsgBack, map[string]string{"group": "G",
			"offset": strconv.FormatInt(res[0].PhysicalOffset, 10), "delayLevel": "1"}, nil)
	}
	resp = invoke(t, cl, group1.sign(sendBack()))
	requireCode(t, remoting.ResNoPermission, resp)
	assert.Contains(t, resp.Remark, `user "grouponly1": SUB on Topic:T not allowed`)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, sub1.sign(sendBack())))

	requireCode(t, remoting.ResRequestCodeNotSupported, invoke(t, cl, sub1.sign(request(remoting.ReqEndTransaction, nil, nil))))
	requireCode(t, remoting.ResNoPermission, invoke(t, cl, (&cred{"consumer1", "wrong-secret"}).sign(request(remoting.ReqEndTransaction, nil, nil))))
}

// writeLog writes the commit log's end, once the dispatcher has indexed
// all of it (at most 5 s), so that the queues' offsets that follow are
// every stored message's.
func writeLog(sb *strings.Builder, b *broker.Broker) {
	st := b.Status()
	for deadline := time.Now().Add(5 * time.Second); st.Dispatch.LagBytes > 0 && time.Now().Before(deadline); st = b.Status() {
		time.Sleep(time.Millisecond)
	}
	fmt.Fprintf(sb, "commit log end %d, dispatch lag %d\n", st.MaxLogOffset, st.Dispatch.LagBytes)
}
