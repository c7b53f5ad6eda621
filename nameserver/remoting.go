package nameserver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/remoting"
)

// NewRemotingHandler returns the nameserver's RocketMQ remoting front end:
// the queries RocketMQ clients send, answered from reg. Server.Serve
// serves it on every port, beside the gRPC service; on its own, serve it
// with a remoting.Server:
//
//	srv, err := remoting.NewServer(remoting.Config{Logger: logger}, nameserver.NewRemotingHandler(reg, nil))
//	go srv.Serve(lis)
//	defer srv.Close()
//
// It answers GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO,
// GET_ALL_TOPIC_LIST_FROM_NAMESERVER and DELETE_TOPIC_IN_NAMESRV. Every
// answer shows the brokers' remoting addresses: a broker without one
// cannot serve a RocketMQ client and is left out. Brokers register over
// gRPC, so REGISTER_BROKER and every other code get
// REQUEST_CODE_NOT_SUPPORTED.
//
// Like the gRPC GetRoute, a topic no broker serves gets TOPIC_NOT_EXIST,
// never the TBW102 route in its place: a RocketMQ producer that gets 17
// asks for TBW102 itself, which brokers with auto-creation on register
// like any topic (perm 7), and sends there (docs/BROKER.md, "RocketMQ
// clients").
//
// With guard (nil: authentication off), every request's ACL signature is
// checked and its code's class (RemotingClass) authorized first: a
// refusal is NO_PERMISSION naming why (docs/SECURITY.md, "Cluster").
func NewRemotingHandler(reg *Registry, guard *auth.Guard) remoting.Handler {
	h := remotingHandler{reg: reg}
	mux := remoting.NewMux()
	for _, r := range remotingRoutes {
		mux.HandleFunc(r.code, func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
			return r.handle(h, ctx, c, req)
		})
	}
	if guard == nil {
		return mux
	}
	return guardedRemoting{next: mux, guard: guard}
}

// remotingRoutes are the codes the nameserver handles, each with the right
// it needs with authentication on: queries nothing, a topic deletion an
// admin, a broker's (un)registration a cluster user (answered
// REQUEST_CODE_NOT_SUPPORTED all the same: brokers register over gRPC).
var remotingRoutes = []struct {
	code   remoting.RequestCode
	class  auth.Class
	handle func(remotingHandler, context.Context, *remoting.Conn, *remoting.Command) *remoting.Command
}{
	{remoting.ReqGetRouteInfoByTopic, auth.ClassPublic, remotingHandler.route},
	{remoting.ReqGetBrokerClusterInfo, auth.ClassPublic, remotingHandler.clusterInfo},
	{remoting.ReqGetAllTopicListFromNameServer, auth.ClassPublic, remotingHandler.topicList},
	{remoting.ReqDeleteTopicInNameServer, auth.ClassAdmin, remotingHandler.deleteTopic},
	{remoting.ReqRegisterBroker, auth.ClassCluster, remotingHandler.registerOverGRPC},
	{remoting.ReqUnregisterBroker, auth.ClassCluster, remotingHandler.registerOverGRPC},
}

type remotingHandler struct {
	reg *Registry
}

// route answers GET_ROUTEINFO_BY_TOPIC with a TopicRouteData body the Go
// client parses: compact JSON, queueDatas an array,
// brokerAddrs always present and keyed by broker id.
func (h remotingHandler) route(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	if topic == "" {
		return remoting.ErrorResponse(req, remoting.ResInvalidParameter, "GET_ROUTEINFO_BY_TOPIC needs the ext field topic")
	}
	route, err := h.reg.Route(topic)
	if errors.Is(err, ErrTopicNotFound) {
		return remoting.ErrorResponse(req, remoting.ResTopicNotExist, "No topic route info in name server for the topic: %s", topic)
	}
	if err != nil {
		return remoting.ErrorResponse(req, remoting.ResSystemError, "route of %s: %v", topic, err)
	}
	route = route.ForRemoting()
	if len(route.QueueDatas) == 0 {
		return remoting.ErrorResponse(req, remoting.ResTopicNotExist,
			"No topic route info in name server for the topic: %s (no broker serving it has a RocketMQ remoting address)", topic)
	}
	return jsonResponse(req, route)
}

// clusterInfo answers GET_BROKER_CLUSTER_INFO with RocketMQ's ClusterInfo
// (brokerAddrTable, clusterAddrTable), remoting addresses only.
func (h remotingHandler) clusterInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	all := h.reg.ClusterInfo()
	info := ClusterInfo{Clusters: make(map[string][]string), Brokers: make(map[string]BrokerData)}
	for name, bd := range all.Brokers {
		if len(bd.RemotingAddrs) == 0 {
			continue
		}
		info.Brokers[name] = BrokerData{Cluster: bd.Cluster, BrokerName: name, BrokerAddrs: bd.RemotingAddrs}
		info.Clusters[bd.Cluster] = append(info.Clusters[bd.Cluster], name)
	}
	for _, names := range info.Clusters {
		slices.Sort(names)
	}
	return jsonResponse(req, info)
}

// topicList answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER with RocketMQ's
// TopicList, {"topicList":[...]}: the topics a remoting client can route.
func (h remotingHandler) topicList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topics := []string{}
	for _, t := range h.reg.Topics() {
		if r, err := h.reg.Route(t); err == nil && len(r.ForRemoting().QueueDatas) > 0 {
			topics = append(topics, t)
		}
	}
	return jsonResponse(req, struct {
		TopicList []string `json:"topicList"`
	}{topics})
}

func (remotingHandler) registerOverGRPC(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return remoting.ErrorResponse(req, remoting.ResRequestCodeNotSupported,
		"request code %d (%s) is not supported by Gantry: brokers register with the nameserver over gRPC", req.Code, req.RequestCode().Name())
}

// jsonResponse is SUCCESS with v as its JSON body.
func jsonResponse(req *remoting.Command, v any) *remoting.Command {
	body, err := json.Marshal(v)
	if err != nil {
		return remoting.ErrorResponse(req, remoting.ResSystemError, "encoding the answer to %s: %v", req.RequestCode(), err)
	}
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.Body = body
	return resp
}
