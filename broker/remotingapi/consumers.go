package remotingapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// heartbeatData is HEART_BEAT's body (Java's HeartbeatData); the
// fields Gantry does not use (tag sets and codes, versions, producers) are
// not decoded.
type heartbeatData struct {
	ClientID        string         `json:"clientID"`
	ConsumerDataSet []consumerData `json:"consumerDataSet"`
}

type consumerData struct {
	GroupName           string             `json:"groupName"`
	MessageModel        string             `json:"messageModel"`
	ConsumeType         string             `json:"consumeType"`      // CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
	ConsumeFromWhere    string             `json:"consumeFromWhere"` // CONSUME_FROM_LAST_OFFSET, ...
	SubscriptionDataSet []subscriptionData `json:"subscriptionDataSet"`
}

type subscriptionData struct {
	Topic          string `json:"topic"`
	SubString      string `json:"subString"`
	ExpressionType string `json:"expressionType"`
}

// heartbeat answers HEART_BEAT (34): each consumer of the client is
// registered with (or refreshed in) its group, which creates the group's
// retry topic and registers it with the nameservers at once; the consumer
// is tied to this connection, with what the heartbeat said of it beyond
// what the broker keeps (memberConn). The groups and retry topics a heartbeat
// creates are saved together, once; a heartbeat listing more consumers
// than maxGroupsPerHeartbeat is refused whole. Producers need nothing.
// The answer's version (479) is what the Go client records as the
// broker's.
func (h *Handler) heartbeat(_ context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var data heartbeatData
	if err := json.Unmarshal(req.Body, &data); err != nil {
		return errorResponse(req, fmt.Errorf("%w: heartbeat body: %w", errBadHeader, err))
	}
	if len(data.ConsumerDataSet) == 0 {
		return remoting.NewResponse(req, remoting.ResSuccess, "")
	}
	hbs := make([]broker.Heartbeat, len(data.ConsumerDataSet))
	regs := make([]registration, len(data.ConsumerDataSet))
	subs := make([]map[string]subscription, len(data.ConsumerDataSet))
	for i, cd := range data.ConsumerDataSet {
		hbs[i], subs[i] = toHeartbeat(data.ClientID, cd, c.RemoteAddr().String())
		regs[i] = registration{member{cd.GroupName, data.ClientID},
			memberConn{language: req.Language, version: req.Version, consumeType: cd.ConsumeType, consumeFromWhere: cd.ConsumeFromWhere}}
	}
	errs, err := h.register(c, regs, hbs)
	if err != nil {
		h.log.Debug("heartbeat refused", "client", data.ClientID, "err", err)
		return errorResponse(req, err)
	}
	var failed []error
	for i, cd := range data.ConsumerDataSet {
		if errs[i] != nil {
			failed = append(failed, fmt.Errorf("consumer group %q: %w", cd.GroupName, errs[i]))
			continue
		}
		h.subs.put(cd.GroupName, subs[i])
	}
	if len(failed) > 0 {
		h.log.Debug("heartbeat refused", "client", data.ClientID, "err", failed[0])
		return errorResponse(req, errors.Join(failed...))
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// toHeartbeat converts a consumer's heartbeat. A subscription of another
// expression type than TAG is registered as "*": the core evaluates tags
// only, and pulls refuse it (pullExpression).
func toHeartbeat(clientID string, cd consumerData, addr string) (broker.Heartbeat, map[string]subscription) {
	hb := broker.Heartbeat{ClientID: clientID, Group: cd.GroupName, Addr: addr, Model: broker.Clustering}
	if strings.EqualFold(cd.MessageModel, "BROADCASTING") {
		hb.Model = broker.Broadcasting
	}
	subs := make(map[string]subscription, len(cd.SubscriptionDataSet))
	for _, sd := range cd.SubscriptionDataSet {
		expr := sd.SubString
		if sd.ExpressionType != "" && !strings.EqualFold(sd.ExpressionType, expressionTag) {
			expr = "*"
		}
		hb.Subscriptions = append(hb.Subscriptions, broker.Subscription{Topic: sd.Topic, Expression: expr})
		subs[sd.Topic] = subscription{expression: sd.SubString, kind: sd.ExpressionType}
	}
	return hb, subs
}

// register heartbeats hbs and ties their clients to c, as regs[i] says of
// hbs[i]; the first consumer registered on c arranges for c's consumers to
// be unregistered when it closes. It returns the broker's answer
// (Broker.Heartbeats).
func (h *Handler) register(c *remoting.Conn, regs []registration, hbs []broker.Heartbeat) ([]error, error) {
	first, errs, err := h.clients.register(c, regs, func() ([]error, error) { return h.b.Heartbeats(hbs) })
	if first { // a handler is running on c: the hook cannot run before it is added
		c.OnClose(func() { h.connClosed(c) })
	}
	return errs, err
}

// connClosed unregisters the consumers whose last heartbeat came over c:
// the Go client never sends UNREGISTER_CLIENT, it just closes its
// connections. Their groups' other members are told (notifier).
func (h *Handler) connClosed(c *remoting.Conn) {
	h.clients.closed(c, func(m member) {
		h.log.Debug("connection closed: consumer unregistered", "group", m.group, "client", m.clientID, "conn", c.String())
		h.b.UnregisterClient(m.group, m.clientID)
	})
}

// unregisterClient answers UNREGISTER_CLIENT (35), which Java clients send
// at shutdown: the consumer leaves its group.
func (h *Handler) unregisterClient(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	clientID := rd.str("clientID", true)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	if group := req.Ext("consumerGroup"); group != "" {
		h.clients.unregister(member{group, clientID}, func() { h.b.UnregisterClient(group, clientID) })
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// consumerList answers GET_CONSUMER_LIST_BY_GROUP (38) with
// {"consumerIdList":[...]}, the group's live clients; like Java, a group
// without any is SYSTEM_ERROR with no body (the Go client reads an empty
// list either way).
func (h *Handler) consumerList(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("consumerGroup", true)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	ids := h.b.ConsumerList(group)
	if len(ids) == 0 {
		return remoting.ErrorResponse(req, remoting.ResSystemError, "no consumer for this group, %s", group)
	}
	return jsonResponse(req, struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
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

// member names a consumer client of a group.
type member struct{ group, clientID string }

// memberConn is the connection of a member's last heartbeat and what that
// heartbeat said of the member beyond what the broker keeps: the
// request's language and version, and the consumer's consumeType and
// consumeFromWhere. GET_CONSUMER_CONNECTION_LIST shows them, as a Java
// broker does.
type memberConn struct {
	conn             *remoting.Conn
	language         string
	version          int32
	consumeType      string
	consumeFromWhere string
}

// registration is a member's heartbeat, as the client table keeps it.
type registration struct {
	member
	memberConn
}

// clientTable ties each consumer to the connection of its last heartbeat.
// regMu serializes the changes that call the broker (a heartbeat, the
// cleanup of a closed connection, an unregistration), so that a client
// moving to a new connection is never unregistered by its old one; it is
// taken before mu, which guards the maps.
type clientTable struct {
	regMu sync.Mutex

	mu     sync.Mutex
	owner  map[member]memberConn                  // the member's last heartbeat
	byConn map[*remoting.Conn]map[member]struct{} // a connection's members; present once hooked
}

func newClientTable() clientTable {
	return clientTable{owner: map[member]memberConn{}, byConn: map[*remoting.Conn]map[member]struct{}{}}
}

// register makes c the connection of each of regs and runs heartbeat, which
// reports the outcome of each (errs) or of the whole (err); a member whose
// heartbeat failed has the connection it had before. It reports whether c
// had no member before (its close must be hooked). The connections are
// recorded first, so that the notification of a member's joining, which
// heartbeat triggers, reaches c.
func (t *clientTable) register(c *remoting.Conn, regs []registration, heartbeat func() ([]error, error)) (first bool, errs []error, err error) {
	t.regMu.Lock()
	defer t.regMu.Unlock()
	type before struct {
		owner memberConn
		had   bool // c had it
	}
	t.mu.Lock()
	byC, hooked := t.byConn[c]
	if !hooked {
		byC = map[member]struct{}{}
		t.byConn[c] = byC
	}
	was := make([]before, len(regs))
	for i, r := range regs {
		_, had := byC[r.member]
		was[i] = before{t.owner[r.member], had}
		r.conn = c
		t.setOwner(r.member, r.memberConn)
	}
	t.mu.Unlock()
	errs, err = heartbeat()
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(regs) - 1; i >= 0; i-- { // backwards: a repeated member gets its first state back
		if err == nil && errs[i] == nil {
			continue
		}
		m := regs[i].member
		if !was[i].had {
			delete(byC, m)
		}
		if was[i].owner.conn != nil {
			t.setOwner(m, was[i].owner)
		} else {
			delete(t.owner, m)
		}
	}
	return !hooked, errs, err
}

// setOwner makes mc m's last heartbeat. t.mu is held.
func (t *clientTable) setOwner(m member, mc memberConn) {
	if prev := t.owner[m].conn; prev != nil && prev != mc.conn {
		delete(t.byConn[prev], m)
	}
	t.owner[m] = mc
	t.byConn[mc.conn][m] = struct{}{}
}

// closed forgets c and calls unregister for each member whose connection
// it was.
func (t *clientTable) closed(c *remoting.Conn, unregister func(member)) {
	t.regMu.Lock()
	defer t.regMu.Unlock()
	t.mu.Lock()
	var gone []member
	for m := range t.byConn[c] {
		if t.owner[m].conn == c {
			delete(t.owner, m)
			gone = append(gone, m)
		}
	}
	delete(t.byConn, c)
	t.mu.Unlock()
	for _, m := range gone {
		unregister(m)
	}
}

// unregister forgets m and calls leave.
func (t *clientTable) unregister(m member, leave func()) {
	t.regMu.Lock()
	defer t.regMu.Unlock()
	t.mu.Lock()
	if mc, ok := t.owner[m]; ok {
		delete(t.byConn[mc.conn], m)
		delete(t.owner, m)
	}
	t.mu.Unlock()
	leave()
}

// conns returns the connections of group's members for which live says
// yes, each once.
func (t *clientTable) conns(group string, live func(clientID string) bool) []*remoting.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[*remoting.Conn]bool{}
	var out []*remoting.Conn
	for m, mc := range t.owner {
		if c := mc.conn; m.group == group && !seen[c] && live(m.clientID) {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// lastHeartbeat returns m's last heartbeat, if it came over a remoting
// connection that is still open.
func (t *clientTable) lastHeartbeat(m member) (memberConn, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mc, ok := t.owner[m]
	return mc, ok
}

// subscription is a group's subscription to a topic, from its last
// heartbeat.
type subscription struct {
	expression string // "*", "TagA || TagB", or a SQL92 expression
	kind       string // expressionType: "TAG" (or empty), "SQL92"
}

type subKey struct{ group, topic string }

// subscriptions caches the groups' subscriptions for the pulls that carry
// none. The last heartbeat of a group wins, as in Java.
type subscriptions struct {
	mu    sync.RWMutex
	byKey map[subKey]subscription
}

func (s *subscriptions) put(group string, subs map[string]subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, sub := range subs {
		s.byKey[subKey{group, topic}] = sub
	}
}

func (s *subscriptions) get(group, topic string) (subscription, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sub, ok := s.byKey[subKey{group, topic}]
	return sub, ok
}
