package remotingapi

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/gantrymq/gantry/remoting"
)

// clientInfos remembers, per connection, what its last successful
// HEART_BEAT said of its client beyond what the broker keeps: the
// request's language and version, and each consumer group's consumeType
// and consumeFromWhere. GET_CONSUMER_CONNECTION_LIST shows them, as a Java
// broker does. A connection's entry goes when it closes.
type clientInfos struct {
	mu     sync.Mutex
	byConn map[*remoting.Conn]clientInfo
}

type clientInfo struct {
	language string
	version  int32
	groups   map[string]groupInfo // by consumer group
}

// groupInfo is what a client's heartbeat says of one of its consumers.
type groupInfo struct {
	ConsumeType      string `json:"consumeType"`      // CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
	ConsumeFromWhere string `json:"consumeFromWhere"` // CONSUME_FROM_LAST_OFFSET, ...
}

// heartbeatRecorded answers HEART_BEAT (heartbeat) and, when it succeeds,
// records what it said of the client.
func (h *Handler) heartbeatRecorded(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := h.heartbeat(ctx, c, req)
	if resp.ResponseCode() == remoting.ResSuccess {
		h.infos.record(c, req)
	}
	return resp
}

// record stores what req, a HEART_BEAT the broker accepted, says of c's
// client.
func (ci *clientInfos) record(c *remoting.Conn, req *remoting.Command) {
	var data struct {
		ConsumerDataSet []struct {
			GroupName string `json:"groupName"`
			groupInfo
		} `json:"consumerDataSet"`
	}
	if json.Unmarshal(req.Body, &data) != nil { // the heartbeat decoded it: never
		return
	}
	info := clientInfo{language: req.Language, version: req.Version, groups: make(map[string]groupInfo, len(data.ConsumerDataSet))}
	for _, cd := range data.ConsumerDataSet {
		info.groups[cd.GroupName] = cd.groupInfo
	}
	ci.mu.Lock()
	if ci.byConn == nil {
		ci.byConn = map[*remoting.Conn]clientInfo{}
	}
	_, known := ci.byConn[c]
	ci.byConn[c] = info
	ci.mu.Unlock()
	if !known { // a handler is running on c: the hook runs after it returns
		c.OnClose(func() { ci.forget(c) })
	}
}

func (ci *clientInfos) forget(c *remoting.Conn) {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	delete(ci.byConn, c)
}

func (ci *clientInfos) get(c *remoting.Conn) (clientInfo, bool) {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	info, ok := ci.byConn[c]
	return info, ok
}

// connOf returns the connection of m's last heartbeat, nil if it came
// over gRPC.
func (t *clientTable) connOf(m member) *remoting.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owner[m]
}
