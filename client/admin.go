package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// Defaults of TopicConfig.
const (
	DefaultQueueNums = 8
	DefaultPerm      = PermRead | PermWrite
)

// TopicConfig describes a topic to create. Zero fields take the defaults.
type TopicConfig struct {
	Name string
	// ReadQueueNums and WriteQueueNums are the topic's queues per broker.
	// Default 8 each.
	ReadQueueNums, WriteQueueNums int32
	// Perm is PermRead|PermWrite (default) or one of them.
	Perm int32
	// Order marks an ordered topic.
	Order bool
	// Attributes are the topic's attributes (priority lanes, retention...).
	Attributes map[string]string
}

// GroupConfig describes a consumer group. The zero value (but the name) is
// an enabled clustering group with the broker's default retries.
type GroupConfig struct {
	Name string
	// Disabled stops the group's consumption.
	Disabled bool
	// Broadcast lets the group consume in broadcast mode.
	Broadcast bool
	// Orderly marks a group that consumes in order.
	Orderly bool
	// RetryMaxTimes is how often a message is retried before it is
	// dead-lettered; 0 means the broker's default (16).
	RetryMaxTimes int32
	// RetryPolicy, if set, makes retries wait exponentially growing delays
	// instead of the delay-level ladder (10 s, 30 s, 1 m ... 2 h).
	RetryPolicy *RetryPolicy
}

// RetryPolicy is an exponential retry policy: retry n waits
// Initial * Multiplier^(n-1), at most Max, spread by Jitter (0 to 1, a
// fraction either way). Delays are kept to the millisecond.
type RetryPolicy struct {
	Initial, Max time.Duration
	Multiplier   int64
	Jitter       float64
}

// ClusterInfo lists the clusters and their brokers.
type ClusterInfo struct {
	// Clusters maps a cluster name to its broker names, sorted.
	Clusters map[string][]string
	// Brokers maps a broker name to its data.
	Brokers map[string]BrokerData
}

// QueueStatus is one queue's offsets on its broker.
type QueueStatus struct {
	Queue         Queue
	MinOffset     int64
	MaxOffset     int64
	LastStoreTime time.Time
	// Limits are the queue's retention, backlog limit and TTL (its topic's
	// on its broker) and its backlog, expired and dropped messages.
	Limits QueueLimits
}

// QueueLimits are a queue's retention, backlog limit and default TTL (its
// topic's attributes on its broker; zero: not set) and its figures
// (docs/BROKER.md, "Retention, limits and TTL").
type QueueLimits struct {
	Retention     time.Duration // 0: the broker's fileReservedTime
	MaxBacklog    int64         // 0: none
	BacklogPolicy string        // "drop-oldest" or "refuse"; "" without MaxBacklog
	DefaultTTL    time.Duration // 0: none
	// Backlog is the queue's messages not yet consumed by every group with
	// an offset in it; Expired the messages found expired (never
	// delivered); Dropped those dropped from the full queue before every
	// group consumed them. The counts survive broker restarts.
	Backlog, Expired, Dropped int64
}

// QueueProgress is a group's progress in one queue.
type QueueProgress struct {
	Queue          Queue
	BrokerOffset   int64
	ConsumerOffset int64
	Lag            int64
	LastTimestamp  time.Time
	// ClientID is the client consuming the queue (as its heartbeats
	// report), "" when none does.
	ClientID string
}

// ConsumerConnection is a live client of a consumer group, as the brokers
// it heartbeats to know it.
type ConsumerConnection struct {
	ClientID string
	// Addr is where the client's latest heartbeat came from.
	Addr string
	// Broadcast: the client consumes every queue with offsets of its own
	// (broadcasting); else the group shares the queues (clustering).
	Broadcast bool
	// Ordered: the client consumes in queue order under queue locks.
	Ordered bool
	// Subscriptions maps each topic the client consumes to its tag
	// expression (as its latest heartbeat said).
	Subscriptions map[string]string
	// LastHeartbeat is the latest heartbeat any broker received from it.
	LastHeartbeat time.Time
	// Assigned are the queues the client consumes, on every broker, sorted
	// by topic, broker name and id.
	Assigned []Queue
}

// Admin administers a cluster: topics, groups, offsets and message
// queries. Calls that concern several brokers ask each in turn and, when
// some fail, return what the others answered together with the failures
// joined (errors.Join). It is safe for concurrent use.
type Admin struct {
	c         *core
	closeOnce sync.Once
}

// NewAdmin returns an admin client for the cluster of cfg. ctx is not used
// after it returns.
func NewAdmin(ctx context.Context, cfg Config) (*Admin, error) {
	c, err := newCore(ctx, cfg, "admin")
	if err != nil {
		return nil, err
	}
	return &Admin{c: c}, nil
}

// Close stops the route refresher and closes the connections. Later calls
// return ErrClosed.
func (a *Admin) Close() error {
	err := ErrClosed
	a.closeOnce.Do(func() { err = a.c.close() })
	return err
}

// brokerRef is a broker name and the gRPC address to call.
type brokerRef struct{ name, addr string }

// clusterBrokers returns the master of every broker of the cluster.
func (a *Admin) clusterBrokers(ctx context.Context) ([]brokerRef, error) {
	ci, err := a.c.ns.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var refs []brokerRef
	for name, bd := range ci.GetBrokers() {
		if addr := bd.GetBrokerAddrs()[0]; addr != "" {
			refs = append(refs, brokerRef{name, addr})
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].name < refs[j].name })
	return refs, nil
}

// routeBrokers returns the master of every broker that has topic, from a
// fresh route (the cached one if the nameservers cannot be reached).
func (a *Admin) routeBrokers(ctx context.Context, topic string) ([]brokerRef, error) {
	rt, err := a.c.routes.refresh(ctx, topic)
	if err != nil {
		return nil, err
	}
	var refs []brokerRef
	for _, qd := range rt.route.Queues {
		if addr, ok := rt.masters[qd.BrokerName]; ok {
			refs = append(refs, brokerRef{qd.BrokerName, addr})
		}
	}
	return refs, nil
}

// targets returns the given addresses, or else the cluster's masters.
func (a *Admin) targets(ctx context.Context, addrs []string) ([]brokerRef, error) {
	if len(addrs) == 0 {
		refs, err := a.clusterBrokers(ctx)
		if err == nil && len(refs) == 0 {
			err = fmt.Errorf("client: the cluster has no broker: %w", ErrUnavailable)
		}
		return refs, err
	}
	refs := make([]brokerRef, len(addrs))
	for i, addr := range addrs {
		refs[i] = brokerRef{addr: addr}
	}
	return refs, nil
}

// each calls f on every broker and joins the errors.
func (a *Admin) each(refs []brokerRef, op string, f func(brokerRef, gantryv1.AdminClient) error) error {
	var errs []error
	for _, r := range refs {
		ac, err := a.c.admin(r.addr)
		if err == nil {
			err = callError(op, r.addr, f(r, ac), ErrNotFound)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CreateTopic creates (or updates) a topic on the given brokers' gRPC
// addresses, by default on every broker of the cluster (the master of each
// broker name in the nameservers' cluster info).
func (a *Admin) CreateTopic(ctx context.Context, tc TopicConfig, brokers ...string) error {
	if err := validTopic(tc.Name); err != nil {
		return fmt.Errorf("client: create topic: %w", err)
	}
	if tc.ReadQueueNums == 0 {
		tc.ReadQueueNums = DefaultQueueNums
	}
	if tc.WriteQueueNums == 0 {
		tc.WriteQueueNums = DefaultQueueNums
	}
	if tc.Perm == 0 {
		tc.Perm = DefaultPerm
	}
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return err
	}
	cfg := &gantryv1.TopicConfig{
		Name: tc.Name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
		Perm: tc.Perm, Order: tc.Order, Attributes: tc.Attributes,
	}
	return a.each(refs, "create topic", func(_ brokerRef, ac gantryv1.AdminClient) error {
		_, err := ac.CreateTopic(ctx, &gantryv1.CreateTopicRequest{Topic: cfg})
		return err
	})
}

// DeleteTopic deletes a topic from the given brokers, by default from every
// broker of the cluster. A broker without the topic is not an error.
func (a *Admin) DeleteTopic(ctx context.Context, topic string, brokers ...string) error {
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return err
	}
	return a.each(refs, "delete topic", func(_ brokerRef, ac gantryv1.AdminClient) error {
		_, err := ac.DeleteTopic(ctx, &gantryv1.DeleteTopicRequest{Name: topic})
		if errors.Is(callError("", "", err, ErrNotFound), ErrNotFound) {
			return nil
		}
		return err
	})
}

// Topics lists the topics of every live broker (the nameservers'
// ListTopics), sorted.
func (a *Admin) Topics(ctx context.Context) ([]string, error) {
	var resp *gantryv1.ListTopicsResponse
	err := a.c.ns.call(ctx, "list topics", func(ctx context.Context, c gantryv1.NameServerClient) error {
		var err error
		resp, err = c.ListTopics(ctx, &gantryv1.ListTopicsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	topics := append([]string(nil), resp.GetTopics()...)
	sort.Strings(topics)
	return topics, nil
}

// Route returns the topic's route as the nameservers answer it now.
func (a *Admin) Route(ctx context.Context, topic string) (*Route, error) {
	return a.c.routes.fetch(ctx, topic)
}

// ClusterInfo returns the clusters and brokers the nameservers know.
func (a *Admin) ClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	ci, err := a.c.ns.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	out := &ClusterInfo{Clusters: map[string][]string{}, Brokers: map[string]BrokerData{}}
	for c, names := range ci.GetClusters() {
		out.Clusters[c] = append([]string(nil), names.GetNames()...)
		sort.Strings(out.Clusters[c])
	}
	for name, bd := range ci.GetBrokers() {
		out.Brokers[name] = brokerFromProto(bd)
	}
	return out, nil
}

// TopicStatus returns the offsets of every queue of topic on every broker
// that has it, sorted by broker name and queue id.
func (a *Admin) TopicStatus(ctx context.Context, topic string) ([]QueueStatus, error) {
	refs, err := a.routeBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []QueueStatus
	err = a.each(refs, "topic status", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.TopicStatus(ctx, &gantryv1.TopicStatusRequest{Topic: topic})
		lim := resp.GetLimits()
		for _, qs := range resp.GetQueues() {
			out = append(out, QueueStatus{
				Queue:     Queue{Topic: topic, BrokerName: r.name, Broker: r.addr, ID: qs.GetQueueId()},
				MinOffset: qs.GetMinOffset(), MaxOffset: qs.GetMaxOffset(), LastStoreTime: msTime(qs.GetLastStoreTimestampMs()),
				Limits: QueueLimits{Retention: time.Duration(lim.GetRetentionMs()) * time.Millisecond, MaxBacklog: lim.GetMaxBacklog(),
					BacklogPolicy: lim.GetBacklogPolicy(), DefaultTTL: time.Duration(lim.GetDefaultTtlMs()) * time.Millisecond,
					Backlog: qs.GetBacklog(), Expired: qs.GetExpired(), Dropped: qs.GetDropped()},
			})
		}
		return err
	})
	sort.Slice(out, func(i, j int) bool { return queueLess(out[i].Queue, out[j].Queue) })
	return out, err
}

// BrokerStatus returns a broker's status properties.
func (a *Admin) BrokerStatus(ctx context.Context, addr string) (map[string]string, error) {
	ac, err := a.c.admin(addr)
	if err != nil {
		return nil, err
	}
	resp, err := ac.BrokerStatus(ctx, &gantryv1.BrokerStatusRequest{})
	if err != nil {
		return nil, callError("broker status", addr, err, ErrNotFound)
	}
	return resp.GetStatus(), nil
}

// HAStatus is a broker's part in replication (mqadmin haStatus).
type HAStatus struct {
	Role   string // ASYNC_MASTER, SYNC_MASTER or SLAVE
	LogEnd int64  // the broker's commit log end
	// Slaves are a master's slaves, each with its lag behind LogEnd.
	Slaves []HASlave
	// On a slave: Following says it knows its master's HA address; the
	// rest is how far it follows.
	Following     bool
	MasterHAAddr  string
	Connected     bool
	MasterLogEnd  int64 // as last heard
	LagBytes      int64 // MasterLogEnd - LogEnd
	MetaSnapshots int64
	LastError     string
	Stopped       bool // replication stopped for good (LastError says why)
}

// HASlave is a slave as its master sees it.
type HASlave struct {
	BrokerID  int64
	Addr      string // its replication connection's remote address
	Connected bool
	Acked     int64 // the log end it acknowledged last
	LagBytes  int64 // the master's log end - Acked
}

// HAStatus returns the replication state of the broker at addr (either
// of its addresses).
func (a *Admin) HAStatus(ctx context.Context, addr string) (HAStatus, error) {
	ac, err := a.c.admin(addr)
	if err != nil {
		return HAStatus{}, err
	}
	r, err := ac.HAStatus(ctx, &gantryv1.HAStatusRequest{})
	if err != nil {
		return HAStatus{}, callError("HA status", addr, err, ErrNotFound)
	}
	st := HAStatus{Role: r.GetRole(), LogEnd: r.GetLogEnd(), Following: r.GetFollowing(), MasterHAAddr: r.GetMasterHaAddress(),
		Connected: r.GetConnected(), MasterLogEnd: r.GetMasterLogEnd(), LagBytes: r.GetLagBytes(),
		MetaSnapshots: r.GetMetaSnapshots(), LastError: r.GetLastError(), Stopped: r.GetStopped()}
	for _, s := range r.GetSlaves() {
		st.Slaves = append(st.Slaves, HASlave{BrokerID: s.GetBrokerId(), Addr: s.GetAddress(), Connected: s.GetConnected(),
			Acked: s.GetAckedOffset(), LagBytes: s.GetLagBytes()})
	}
	return st, nil
}

// ConsumerProgress returns group's offsets and lag per queue of topic on
// every broker that has it; with topic "", of every topic the group has
// offsets in, on every broker of the cluster. A group no broker knows (no
// subscription group, offsets or live client) is ErrNotFound.
func (a *Admin) ConsumerProgress(ctx context.Context, group, topic string) ([]QueueProgress, error) {
	var refs []brokerRef
	var err error
	if topic != "" {
		refs, err = a.routeBrokers(ctx, topic)
	} else {
		refs, err = a.clusterBrokers(ctx)
	}
	if err != nil {
		return nil, err
	}
	var out []QueueProgress
	err = a.eachKnowing(refs, "consumer progress", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.ConsumerProgress(ctx, &gantryv1.ConsumerProgressRequest{Group: group, Topic: topic})
		for _, qp := range resp.GetQueues() {
			out = append(out, QueueProgress{
				Queue:        Queue{Topic: qp.GetTopic(), BrokerName: r.name, Broker: r.addr, ID: qp.GetQueueId()},
				BrokerOffset: qp.GetBrokerOffset(), ConsumerOffset: qp.GetConsumerOffset(), Lag: qp.GetLag(),
				LastTimestamp: msTime(qp.GetLastTimestampMs()), ClientID: qp.GetClientId(),
			})
		}
		return err
	})
	sort.Slice(out, func(i, j int) bool { return queueLess(out[i].Queue, out[j].Queue) })
	return out, err
}

// ConsumerConnection returns the live clients of group on every broker of
// the cluster, sorted by client id. A client heartbeating to several
// brokers is listed once: its queues are gathered from every broker, the
// rest is what its latest heartbeat said. A known group may have none; a
// group no broker knows is ErrNotFound.
func (a *Admin) ConsumerConnection(ctx context.Context, group string) ([]ConsumerConnection, error) {
	if group == "" {
		return nil, fmt.Errorf("client: consumer connection: the group is required: %w", ErrInvalidArgument)
	}
	refs, err := a.clusterBrokers(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*ConsumerConnection{}
	err = a.eachKnowing(refs, "consumer connection", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.ConsumerConnection(ctx, &gantryv1.ConsumerConnectionRequest{Group: group})
		for _, cc := range resp.GetConnections() {
			mergeConnection(byID, r, cc)
		}
		return err
	})
	out := make([]ConsumerConnection, 0, len(byID))
	for _, c := range byID {
		sort.Slice(c.Assigned, func(i, j int) bool { return queueLess(c.Assigned[i], c.Assigned[j]) })
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out, err
}

// mergeConnection adds what broker r says of a client to byID.
func mergeConnection(byID map[string]*ConsumerConnection, r brokerRef, cc *gantryv1.ConsumerConnection) {
	c := byID[cc.GetClientId()]
	if c == nil {
		c = &ConsumerConnection{ClientID: cc.GetClientId()}
		byID[c.ClientID] = c
	}
	if at := msTime(cc.GetLastHeartbeatMs()); c.LastHeartbeat.IsZero() || at.After(c.LastHeartbeat) {
		c.LastHeartbeat, c.Addr, c.Ordered = at, cc.GetAddress(), cc.GetOrdered()
		c.Broadcast = cc.GetModel() == gantryv1.ConsumeModel_CONSUME_MODEL_BROADCASTING
		c.Subscriptions = make(map[string]string, len(cc.GetSubscriptions()))
		for _, sub := range cc.GetSubscriptions() {
			c.Subscriptions[sub.GetTopic()] = sub.GetExpression()
		}
	}
	for _, q := range cc.GetAssigned() {
		c.Assigned = append(c.Assigned, Queue{Topic: q.GetTopic(), BrokerName: r.name, Broker: r.addr, ID: q.GetQueueId()})
	}
}

// ResetOffsetByTime moves group's offsets of topic, on every broker that
// has it, to the first messages stored at or after t, and returns the new
// offsets.
func (a *Admin) ResetOffsetByTime(ctx context.Context, group, topic string, t time.Time) (map[Queue]int64, error) {
	refs, err := a.routeBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[Queue]int64{}
	err = a.each(refs, "reset offset", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.ResetOffsetByTime(ctx, &gantryv1.ResetOffsetByTimeRequest{Group: group, Topic: topic, TimestampMs: t.UnixMilli()})
		for id, off := range resp.GetOffsets() {
			out[Queue{Topic: topic, BrokerName: r.name, Broker: r.addr, ID: id}] = off
		}
		return err
	})
	return out, err
}

// QueryMessageByID finds a message by its offset message id (SendResult.
// MsgID, MessageExt.MsgID) or by its UNIQ_KEY (SendResult.UniqKey, the
// message id of RocketMQ's clients), as mqadmin's queryMsgById does.
//
// An offset message id holds the store host of the broker that wrote it,
// which is that broker's message-store (remoting) address, not its gRPC
// address, and only a commit-log offset, which every broker has. So the
// brokers of the cluster are asked in turn, those registering the store
// host as an address first, then the others, masters before slaves; an
// answer counts only if the record's own offset message id is msgID. An id
// no broker knows as an offset id is looked up as a UNIQ_KEY in every
// topic of every broker: of the copies found (a message retried or
// dead-lettered has copies in %RETRY% and %DLQ% topics), the first stored
// in a topic of its own is returned, else the first stored. ErrNotFound
// when no broker has it.
func (a *Admin) QueryMessageByID(ctx context.Context, msgID string) (*MessageExt, error) {
	if msgID == "" {
		return nil, fmt.Errorf("client: query message: the id is required: %w", ErrInvalidArgument)
	}
	host, _, _ := message.DecodeOffsetMsgID(msgID) // not one: no broker matches it first
	ci, err := a.c.ns.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	var byKey []*MessageExt
	for _, r := range idCandidates(ci, host) {
		ac, err := a.c.admin(r.addr)
		if err != nil {
			return nil, err
		}
		resp, err := ac.QueryMessageById(ctx, &gantryv1.QueryMessageByIdRequest{MsgId: msgID})
		if err != nil {
			if err = callError("query message", r.addr, err, ErrNotFound); !errors.Is(err, ErrNotFound) {
				errs = append(errs, err)
			}
			continue
		}
		msgs, err := decodeRecords(resp.GetRecords(), Queue{BrokerName: r.name, Broker: r.addr}, maxByUniqKey)
		for _, m := range msgs {
			if strings.EqualFold(m.MsgID(), msgID) {
				return m, nil
			}
			if m.UniqKey == msgID {
				byKey = append(byKey, m)
			}
		}
		errs = append(errs, err)
	}
	if m := firstCopy(byKey); m != nil {
		return m, nil
	}
	return nil, errors.Join(append([]error{fmt.Errorf("client: message %s (an offset message id or UNIQ_KEY): %w", msgID, ErrNotFound)}, errs...)...)
}

// maxByUniqKey is the most records a broker answers for a UNIQ_KEY.
const maxByUniqKey = 32

// firstCopy returns the first stored of the copies of a message in a
// topic of its own (not a retry or dead-letter topic), else the first
// stored of them all; nil for none.
func firstCopy(ms []*MessageExt) *MessageExt {
	var best *MessageExt
	better := func(m *MessageExt) bool {
		if best == nil {
			return true
		}
		if own, bestOwn := !isGroupTopic(m.Topic), !isGroupTopic(best.Topic); own != bestOwn {
			return own
		}
		return m.StoreTimestamp.Before(best.StoreTimestamp)
	}
	for _, m := range ms {
		if better(m) {
			best = m
		}
	}
	return best
}

// isGroupTopic reports a consumer group's retry or dead-letter topic.
func isGroupTopic(topic string) bool {
	return strings.HasPrefix(topic, "%RETRY%") || strings.HasPrefix(topic, "%DLQ%")
}

// QueryMessageByUniqKey finds the messages of topic whose UNIQ_KEY is key
// (mqadmin's queryMsgByUniqueKey), on every broker that has the topic,
// sorted by store time. ErrNotFound when there is none.
func (a *Admin) QueryMessageByUniqKey(ctx context.Context, topic, key string) ([]*MessageExt, error) {
	ms, err := a.QueryMessageByKey(ctx, topic, key, time.Unix(0, 0), time.Now().Add(time.Hour), maxByUniqKey)
	out := ms[:0]
	for _, m := range ms {
		if m.UniqKey == key {
			out = append(out, m)
		}
	}
	if len(out) == 0 && err == nil {
		err = fmt.Errorf("client: no message of %s has UNIQ_KEY %s: %w", topic, key, ErrNotFound)
	}
	return out, err
}

// idCandidates orders the brokers to ask for a message stored by host:
// those with host among their addresses first, masters before slaves.
func idCandidates(ci *gantryv1.GetClusterInfoResponse, host netip.AddrPort) []brokerRef {
	type cand struct {
		ref   brokerRef
		match bool
		id    int64
	}
	var cs []cand
	for name, bd := range ci.GetBrokers() {
		match := false
		for _, addrs := range []map[int64]string{bd.GetBrokerAddrs(), bd.GetRemotingAddrs()} {
			for _, a := range addrs {
				if ap, err := netip.ParseAddrPort(a); err == nil && ap.Addr().Unmap() == host.Addr().Unmap() && ap.Port() == host.Port() {
					match = true
				}
			}
		}
		for id, addr := range bd.GetBrokerAddrs() {
			cs = append(cs, cand{brokerRef{name, addr}, match, id})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].match != cs[j].match {
			return cs[i].match
		}
		if (cs[i].id == 0) != (cs[j].id == 0) {
			return cs[i].id == 0
		}
		return cs[i].ref.name < cs[j].ref.name || cs[i].ref.name == cs[j].ref.name && cs[i].id < cs[j].id
	})
	refs := make([]brokerRef, len(cs))
	for i, c := range cs {
		refs[i] = c.ref
	}
	return refs
}

// QueryMessageByKey finds up to limit (default 32 when <= 0) messages of
// topic with key among their keys, stored between begin and end, on every
// broker that has the topic. The result is sorted by store time and holds
// each message once.
func (a *Admin) QueryMessageByKey(ctx context.Context, topic, key string, begin, end time.Time, limit int) ([]*MessageExt, error) {
	if limit <= 0 {
		limit = DefaultPullMaxMessages
	}
	refs, err := a.routeBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*MessageExt
	req := &gantryv1.QueryMessageByKeyRequest{Topic: topic, Key: key, BeginMs: begin.UnixMilli(), EndMs: end.UnixMilli(), Max: int32(min(limit, 1<<30))}
	err = a.each(refs, "query message by key", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.QueryMessageByKey(ctx, req)
		if err != nil {
			return err
		}
		msgs, derr := decodeRecords(resp.GetRecords(), Queue{Topic: topic, BrokerName: r.name, Broker: r.addr}, 16)
		for _, m := range msgs {
			if id := r.name + "/" + m.MsgID(); !seen[id] {
				seen[id] = true
				out = append(out, m)
			}
		}
		return derr
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// CreateGroup creates (or updates) a consumer group on the given brokers,
// by default on every broker of the cluster.
func (a *Admin) CreateGroup(ctx context.Context, g GroupConfig, brokers ...string) error {
	if g.Name == "" {
		return fmt.Errorf("client: create group: the name is required: %w", ErrInvalidArgument)
	}
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return err
	}
	cfg := &gantryv1.GroupConfig{
		Name: g.Name, ConsumeEnable: !g.Disabled, ConsumeBroadcastEnable: g.Broadcast,
		ConsumeMessageOrderly: g.Orderly, RetryMaxTimes: g.RetryMaxTimes,
	}
	if p := g.RetryPolicy; p != nil {
		cfg.RetryPolicy = &gantryv1.RetryPolicy{InitialMs: p.Initial.Milliseconds(), MaxMs: p.Max.Milliseconds(), Multiplier: p.Multiplier, Jitter: p.Jitter}
	}
	return a.each(refs, "create group", func(_ brokerRef, ac gantryv1.AdminClient) error {
		_, err := ac.CreateGroup(ctx, &gantryv1.CreateGroupRequest{Group: cfg})
		return err
	})
}

// DeleteGroup deletes a consumer group's config from the given brokers, by
// default from every broker of the cluster; its offsets and its retry and
// dead-letter topics stay. A broker without it is not an error.
func (a *Admin) DeleteGroup(ctx context.Context, name string, brokers ...string) error {
	return a.deleteGroup(ctx, name, false, brokers)
}

// DeleteGroupClean is DeleteGroup that also removes the group's committed
// offsets and its retry and dead-letter topics (%RETRY%<name>,
// %DLQ%<name>) with their messages, as mqadmin deleteSubGroup -r: a client
// that uses the name again inherits nothing. The brokers' next
// registration removes the topics' routes from the nameservers.
func (a *Admin) DeleteGroupClean(ctx context.Context, name string, brokers ...string) error {
	return a.deleteGroup(ctx, name, true, brokers)
}

func (a *Admin) deleteGroup(ctx context.Context, name string, clean bool, brokers []string) error {
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return err
	}
	return a.each(refs, "delete group", func(_ brokerRef, ac gantryv1.AdminClient) error {
		_, err := ac.DeleteGroup(ctx, &gantryv1.DeleteGroupRequest{Name: name, Clean: clean})
		if errors.Is(callError("", "", err, ErrNotFound), ErrNotFound) {
			return nil
		}
		return err
	})
}

// Groups lists the consumer groups of the given brokers, by default of
// every broker of the cluster, each name once (as the first broker
// describes it), sorted by name.
func (a *Admin) Groups(ctx context.Context, brokers ...string) ([]GroupConfig, error) {
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []GroupConfig
	err = a.each(refs, "list groups", func(_ brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.ListGroups(ctx, &gantryv1.ListGroupsRequest{})
		for _, g := range resp.GetGroups() {
			if !seen[g.GetName()] {
				seen[g.GetName()] = true
				gc := GroupConfig{
					Name: g.GetName(), Disabled: !g.GetConsumeEnable(), Broadcast: g.GetConsumeBroadcastEnable(),
					Orderly: g.GetConsumeMessageOrderly(), RetryMaxTimes: g.GetRetryMaxTimes(),
				}
				if p := g.GetRetryPolicy(); p != nil {
					gc.RetryPolicy = &RetryPolicy{Initial: time.Duration(p.GetInitialMs()) * time.Millisecond,
						Max: time.Duration(p.GetMaxMs()) * time.Millisecond, Multiplier: p.GetMultiplier(), Jitter: p.GetJitter()}
				}
				out = append(out, gc)
			}
		}
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// msTime converts Unix milliseconds, 0 being the zero time.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// queueLess orders queues by topic, broker name and id.
func queueLess(a, b Queue) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.BrokerName != b.BrokerName {
		return a.BrokerName < b.BrokerName
	}
	return a.ID < b.ID
}
