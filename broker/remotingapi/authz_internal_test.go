package remotingapi

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/remoting"
)

// Every request code the front end answers has a class, and the table
// names no code it does not answer.
func TestEveryRouteHasAClass(t *testing.T) {
	h := &Handler{}
	h.routes()
	require.NotEmpty(t, h.codes)
	for _, code := range h.codes {
		c, ok := CodeClass(code)
		if assert.True(t, ok, "%s is routed without a class", code) {
			assert.Contains(t, []auth.Class{auth.ClassPublic, auth.ClassPub, auth.ClassSub, auth.ClassAdmin, auth.ClassCluster}, c, "%s", code)
		}
	}
	assert.ElementsMatch(t, h.codes, keys(codeClasses), "codeClasses names a code that is not routed")
	assert.Panics(t, func() {
		m := &classedMux{Mux: remoting.NewMux(), h: &Handler{}}
		m.HandleFunc(remoting.ReqEndTransaction, refuseConfigChange)
	}, "a route without a class")
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func testGuard(t testing.TB) (*auth.Guard, func() *auth.Users) {
	t.Helper()
	u, err := auth.NewUsers(auth.File{Users: []auth.User{
		{AccessKey: "producer1", SecretKey: "producer-secret", Rules: []auth.Rule{{Resource: "Topic:T", Actions: []string{"Pub"}}}},
		{AccessKey: "consumer1", SecretKey: "consumer-secret", Rules: []auth.Rule{{Resource: "Topic:T", Actions: []string{"Sub"}}, {Resource: "Group:G", Actions: []string{"Sub"}}}},
	}})
	require.NoError(t, err)
	users := func() *auth.Users { return u }
	return auth.NewGuard(auth.GuardConfig{Users: users}), users
}

func signed(code remoting.RequestCode, ak, sk string, ext map[string]string, body []byte) *remoting.Command {
	ext[auth.ExtAccessKey] = ak
	ext[auth.ExtSignature] = auth.SignRemoting(sk, ext, body)
	return &remoting.Command{Code: int16(code), ExtFields: ext, Body: body}
}

// An allowed request costs its HMAC and no allocation: the peer's address
// is read for a refusal only.
func TestCheckAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled objects at random")
	}
	g, users := testGuard(t)
	h := &Handler{guard: g, users: users}
	send := signed(remoting.ReqSendMessageV2, "producer1", "producer-secret",
		map[string]string{"a": "PG", "b": "T", "e": "1", "g": strconv.FormatInt(1700000000000, 10)}, []byte("hello"))
	pull := signed(remoting.ReqPullMessage, "consumer1", "consumer-secret",
		map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "0", "queueOffset": "0"}, nil)
	for _, req := range []*remoting.Command{send, pull} {
		require.Nil(t, h.check(nil, req)) // fills the HMAC pools
		assert.Zero(t, testing.AllocsPerRun(100, func() { _ = h.check(nil, req) }), "%s", req.RequestCode())
	}
}

// The resources of each request, and the class of a send to a group's
// retry topic: SUB on the group, as RocketMQ checks it.
func TestResources(t *testing.T) {
	hb := []byte(`{"clientID":"c1","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T"},{"topic":"%RETRY%G"}]},` +
		`{"groupName":"H","subscriptionDataSet":[{"topic":"U"}]}]}`)
	lock := []byte(`{"consumerGroup":"G","clientId":"c1","mqSet":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"U","queueId":1}]}`)
	for _, tt := range []struct {
		code  remoting.RequestCode
		ext   map[string]string
		body  []byte
		class auth.Class
		want  []auth.Resource
	}{
		{remoting.ReqSendMessage, map[string]string{"topic": "T"}, nil, auth.ClassPub, []auth.Resource{auth.Topic("T")}},
		{remoting.ReqSendMessage, map[string]string{"topic": "%RETRY%G"}, nil, auth.ClassSub, []auth.Resource{auth.Topic("%RETRY%G")}},
		{remoting.ReqSendMessageV2, map[string]string{"b": "T"}, nil, auth.ClassPub, []auth.Resource{auth.Topic("T")}},
		{remoting.ReqSendBatchMessage, map[string]string{"b": "%RETRY%G"}, nil, auth.ClassSub, []auth.Resource{auth.Topic("%RETRY%G")}},
		{remoting.ReqPullMessage, map[string]string{"topic": "T", "consumerGroup": "G"}, nil, auth.ClassSub, []auth.Resource{auth.Group("G"), auth.Topic("T")}},
		{remoting.ReqHeartBeat, nil, hb, auth.ClassSub, []auth.Resource{auth.Group("G"), auth.Topic("T"), auth.Topic("%RETRY%G"), auth.Group("H"), auth.Topic("U")}},
		{remoting.ReqHeartBeat, nil, []byte(`{"clientID":"p1","producerDataSet":[{"groupName":"PG"}]}`), auth.ClassSub, nil},
		{remoting.ReqUnregisterClient, map[string]string{"clientID": "c", "producerGroup": "PG"}, nil, auth.ClassSub, nil},
		{remoting.ReqUnregisterClient, map[string]string{"clientID": "c", "consumerGroup": "G"}, nil, auth.ClassSub, []auth.Resource{auth.Group("G")}},
		{remoting.ReqLockBatchMQ, nil, lock, auth.ClassSub, []auth.Resource{auth.Group("G"), auth.Topic("T"), auth.Topic("U")}},
		{remoting.ReqConsumerSendMsgBack, map[string]string{"group": "G", "offset": "1"}, nil, auth.ClassSub, []auth.Resource{auth.Group("G")}},
		{remoting.ReqGetConsumeStats, map[string]string{"consumerGroup": "G", "topicList": "T;U;"}, nil, auth.ClassSub,
			[]auth.Resource{auth.Group("G"), auth.Topic("T"), auth.Topic("U")}},
		{remoting.ReqDeleteTopicInBroker, map[string]string{"topic": "T"}, nil, auth.ClassAdmin, nil},
	} {
		req := &remoting.Command{Code: int16(tt.code), ExtFields: tt.ext, Body: tt.body}
		class, rs := resources(codeClasses[tt.code], req, nil)
		assert.Equal(t, tt.class, class, "%s %v", tt.code, tt.ext)
		assert.Equal(t, tt.want, rs, "%s %v", tt.code, tt.ext)
	}
}

// docs/SECURITY.md lists every request code with its name, number and
// class, as codeClasses has it.
func TestSecurityDocListsEveryCode(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "SECURITY.md"))
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\((\\d+)\\) \\| (\\w+) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		documented[m[1]+"("+m[2]+")"] = m[3]
	}
	want := map[string]string{}
	for code, c := range codeClasses {
		want[code.String()] = c.String()
	}
	assert.Equal(t, want, documented, "docs/SECURITY.md, \"RocketMQ remoting request codes\"")
}
