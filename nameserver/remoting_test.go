package nameserver_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
)

// startRemoting serves reg's remoting front end on a loopback port until
// the test ends.
func startRemoting(t *testing.T, r *nameserver.Registry) string {
	t.Helper()
	srv, err := remoting.NewServer(remoting.Config{}, nameserver.NewRemotingHandler(r, nil))
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		assert.NoError(t, srv.Close())
		assert.NoError(t, <-served)
	})
	return lis.Addr().String()
}

func dialRemoting(t *testing.T, addr string) *remoting.Client {
	t.Helper()
	cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cl.Close()) })
	return cl
}

func invoke(t *testing.T, cl *remoting.Client, code remoting.RequestCode, ext map[string]string) *remoting.Command {
	t.Helper()
	resp, err := cl.Invoke(t.Context(), remoting.NewRequest(code, ext))
	require.NoError(t, err)
	require.True(t, resp.IsResponse())
	return resp
}

// remotingReg is a registration of broker name/id in cluster with a gRPC
// and (when not empty) a remoting address, serving topics with 4 queues.
func remotingReg(cluster, name string, id int64, remotingAddr string, perm int32, topics ...string) nameserver.Registration {
	r := nameserver.Registration{
		Cluster: cluster, BrokerName: name, BrokerID: id,
		Addr:         name + "-" + strconv.FormatInt(id, 10) + ".grpc:8081", // unique per broker
		RemotingAddr: remotingAddr,
		Topics:       make(map[string]nameserver.TopicInfo, len(topics)),
	}
	for _, topic := range topics {
		r.Topics[topic] = nameserver.TopicInfo{ReadQueueNums: 4, WriteQueueNums: 4, Perm: perm}
	}
	return r
}

// goClientRoute parses a route body the way the official Go client does
// (internal/route.go): queueDatas with a JSON decoder, each brokerAddrs
// from its raw text, braces stripped, split at ',' then at the first ':'.
type goClientRoute struct {
	QueueDatas []struct {
		BrokerName     string `json:"brokerName"`
		ReadQueueNums  int    `json:"readQueueNums"`
		WriteQueueNums int    `json:"writeQueueNums"`
		Perm           int    `json:"perm"`
	} `json:"queueDatas"`
	BrokerDatas []struct {
		Cluster     string          `json:"cluster"`
		BrokerName  string          `json:"brokerName"`
		BrokerAddrs json.RawMessage `json:"brokerAddrs"`
	} `json:"brokerDatas"`
}

func parseLikeGoClient(t *testing.T, body []byte) (goClientRoute, map[string]map[int64]string) {
	t.Helper()
	var r goClientRoute
	require.NoError(t, json.Unmarshal(body, &r))
	require.NotNil(t, r.QueueDatas, "queueDatas must be an array")
	addrs := make(map[string]map[int64]string)
	for _, bd := range r.BrokerDatas {
		raw := string(bd.BrokerAddrs)
		require.GreaterOrEqual(t, len(raw), 2, "brokerAddrs must be present (the client slices it)")
		assert.NotContains(t, raw, " ", "a space breaks the client's parse")
		m := make(map[int64]string)
		for _, piece := range strings.Split(raw[1:len(raw)-1], ",") {
			i := strings.Index(piece, ":")
			if i < 0 {
				continue
			}
			id, err := strconv.ParseInt(strings.ReplaceAll(piece[:i], `"`, ""), 10, 64)
			require.NoError(t, err)
			m[id] = strings.ReplaceAll(piece[i+1:], `"`, "")
		}
		addrs[bd.BrokerName] = m
	}
	return r, addrs
}

// The captured route query of the official Go producer, sent byte for byte,
// gets the answer of the captured session that the client accepted: the
// same header bytes, the same body.
func TestRemotingRouteMatchesCapture(t *testing.T) {
	var golden struct {
		HeaderText string          `json:"headerText"`
		BodyText   string          `json:"bodyText"`
		BodyJSON   json.RawMessage `json:"bodyJSON"`
	}
	meta, err := os.ReadFile(filepath.Join("testdata", "frame_route_response.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(meta, &golden))
	request, err := os.ReadFile(filepath.Join("testdata", "frame_route_request.bin"))
	require.NoError(t, err)

	r := newRegistry(t, nil, nameserver.Config{})
	mustRegister(t, r, remotingReg("c1", "b1", 0, "127.0.0.1:45367", nameserver.PermRead|nameserver.PermWrite, "T"))
	addr := startRemoting(t, r)

	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write(request)
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := remoting.ReadFrame(bufio.NewReader(nc), 0)
	require.NoError(t, err)

	hdr, err := resp.AppendHeader(nil, remoting.JSON)
	require.NoError(t, err)
	assert.Equal(t, golden.HeaderText, string(hdr))
	assert.JSONEq(t, golden.BodyText, string(resp.Body))

	route, addrs := parseLikeGoClient(t, resp.Body)
	require.Len(t, route.QueueDatas, 1)
	assert.Equal(t, 4, route.QueueDatas[0].WriteQueueNums)
	assert.Equal(t, map[string]map[int64]string{"b1": {0: "127.0.0.1:45367"}}, addrs)
}

// A route lists each broker name's remoting addresses by broker id; broker
// names without a remoting address are left out.
func TestRemotingRoute(t *testing.T) {
	r := newRegistry(t, nil, nameserver.Config{})
	mustRegister(t, r, remotingReg("c", "b1", 0, "10.0.0.1:10911", 6, "T"))
	mustRegister(t, r, remotingReg("c", "b1", 1, "[2001:db8::2]:10911", 6, "T"))
	mustRegister(t, r, remotingReg("c", "b2", 0, "10.0.0.3:10911", 6, "T"))
	mustRegister(t, r, remotingReg("c", "b3", 0, "", 6, "T", "GRPCOnly"))
	cl := dialRemoting(t, startRemoting(t, r))

	resp := invoke(t, cl, remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "T"})
	require.Equal(t, int16(remoting.ResSuccess), resp.Code, resp.Remark)
	assert.Equal(t, `{"queueDatas":[`+
		`{"brokerName":"b1","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0},`+
		`{"brokerName":"b2","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],`+
		`"brokerDatas":[{"cluster":"c","brokerName":"b1","brokerAddrs":{"0":"10.0.0.1:10911","1":"[2001:db8::2]:10911"}},`+
		`{"cluster":"c","brokerName":"b2","brokerAddrs":{"0":"10.0.0.3:10911"}}]}`, string(resp.Body))
	_, addrs := parseLikeGoClient(t, resp.Body)
	assert.Equal(t, map[string]map[int64]string{
		"b1": {0: "10.0.0.1:10911", 1: "[2001:db8::2]:10911"},
		"b2": {0: "10.0.0.3:10911"},
	}, addrs)
}

func TestRemotingRouteErrors(t *testing.T) {
	r := newRegistry(t, nil, nameserver.Config{})
	mustRegister(t, r, remotingReg("c", "b1", 0, "10.0.0.1:10911", 6, "T"))
	mustRegister(t, r, remotingReg("c", "b2", 0, "", 6, "GRPCOnly"))
	cl := dialRemoting(t, startRemoting(t, r))

	resp := invoke(t, cl, remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Nope"})
	assert.Equal(t, int16(remoting.ResTopicNotExist), resp.Code)
	assert.Equal(t, "No topic route info in name server for the topic: Nope", resp.Remark)
	assert.Empty(t, resp.Body)

	resp = invoke(t, cl, remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "GRPCOnly"})
	assert.Equal(t, int16(remoting.ResTopicNotExist), resp.Code)
	assert.Contains(t, resp.Remark, "no broker serving it has a RocketMQ remoting address")

	resp = invoke(t, cl, remoting.ReqGetRouteInfoByTopic, nil)
	assert.Equal(t, int16(remoting.ResInvalidParameter), resp.Code)
	assert.Contains(t, resp.Remark, "topic")
}

// An unknown topic gets 17 even when a broker auto-creates topics, as over
// gRPC; the producer then asks for TBW102, which is routed like any topic.
func TestRemotingAutoCreateTemplate(t *testing.T) {
	r := newRegistry(t, nil, nameserver.Config{})
	mustRegister(t, r, remotingReg("c", "b1", 0, "10.0.0.1:10911", nameserver.PermInherit|nameserver.PermRead|nameserver.PermWrite, "TBW102"))
	cl := dialRemoting(t, startRemoting(t, r))

	resp := invoke(t, cl, remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "NewTopic"})
	assert.Equal(t, int16(remoting.ResTopicNotExist), resp.Code)

	resp = invoke(t, cl, remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "TBW102"})
	require.Equal(t, int16(remoting.ResSuccess), resp.Code)
	route, addrs := parseLikeGoClient(t, resp.Body)
	require.Len(t, route.QueueDatas, 1)
	assert.Equal(t, 7, route.QueueDatas[0].Perm)
	assert.Equal(t, "10.0.0.1:10911", addrs["b1"][0])
}

func TestRemotingClusterInfoAndTopics(t *testing.T) {
	r := newRegistry(t, nil, nameserver.Config{})
	mustRegister(t, r, remotingReg("c1", "b1", 0, "10.0.0.1:10911", 6, "T", "U"))
	mustRegister(t, r, remotingReg("c1", "b1", 1, "10.0.0.2:10911", 6, "T", "U"))
	mustRegister(t, r, remotingReg("c2", "a2", 0, "10.0.0.3:10911", 6, "A"))
	mustRegister(t, r, remotingReg("c2", "g", 0, "", 6, "GRPCOnly"))
	cl := dialRemoting(t, startRemoting(t, r))

	resp := invoke(t, cl, remoting.ReqGetBrokerClusterInfo, nil)
	require.Equal(t, int16(remoting.ResSuccess), resp.Code)
	assert.JSONEq(t, `{
		"clusterAddrTable": {"c1": ["b1"], "c2": ["a2"]},
		"brokerAddrTable": {
			"b1": {"cluster": "c1", "brokerName": "b1", "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}},
			"a2": {"cluster": "c2", "brokerName": "a2", "brokerAddrs": {"0": "10.0.0.3:10911"}}
		}}`, string(resp.Body))

	resp = invoke(t, cl, remoting.ReqGetAllTopicListFromNameServer, nil)
	require.Equal(t, int16(remoting.ResSuccess), resp.Code)
	assert.JSONEq(t, `{"topicList":["A","T","U"]}`, string(resp.Body))
}

func TestRemotingEmptyRegistry(t *testing.T) {
	cl := dialRemoting(t, startRemoting(t, newRegistry(t, nil, nameserver.Config{})))
	resp := invoke(t, cl, remoting.ReqGetBrokerClusterInfo, nil)
	assert.JSONEq(t, `{"clusterAddrTable":{},"brokerAddrTable":{}}`, string(resp.Body))
	resp = invoke(t, cl, remoting.ReqGetAllTopicListFromNameServer, nil)
	assert.JSONEq(t, `{"topicList":[]}`, string(resp.Body))
}

func TestRemotingUnsupportedCodes(t *testing.T) {
	cl := dialRemoting(t, startRemoting(t, newRegistry(t, nil, nameserver.Config{})))
	tests := []struct {
		code   remoting.RequestCode
		remark string
	}{
		{remoting.ReqUpdateNameServerConfig, "request code 318 (UPDATE_NAMESRV_CONFIG) is not supported by Gantry"},
		{remoting.ReqPutKVConfig, "request code 100 (PUT_KV_CONFIG) is not supported by Gantry"},
		{remoting.ReqDeleteKVConfig, "request code 102 (DELETE_KV_CONFIG) is not supported by Gantry"},
		{remoting.ReqWipeWritePermOfBroker, "request code 205 (WIPE_WRITE_PERM_OF_BROKER) is not supported by Gantry"},
		{remoting.ReqSendMessage, "request code 10 (SEND_MESSAGE) is not supported by Gantry"},
		{remoting.RequestCode(31000), "request code 31000 (unknown) is not supported by Gantry"},
		{remoting.ReqRegisterBroker, "request code 103 (REGISTER_BROKER) is not supported by Gantry: brokers register with the nameserver over gRPC"},
		{remoting.ReqUnregisterBroker, "request code 104 (UNREGISTER_BROKER) is not supported by Gantry: brokers register with the nameserver over gRPC"},
	}
	for _, tt := range tests {
		resp := invoke(t, cl, tt.code, nil)
		assert.Equal(t, int16(remoting.ResRequestCodeNotSupported), resp.Code, tt.code.String())
		assert.Equal(t, tt.remark, resp.Remark)
	}
	// The connection survives them all.
	resp := invoke(t, cl, remoting.ReqGetAllTopicListFromNameServer, nil)
	assert.Equal(t, int16(remoting.ResSuccess), resp.Code)
}
