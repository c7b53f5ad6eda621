package client

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// Permission bits of a topic (QueueData.Perm).
const (
	PermInherit = 1
	PermWrite   = 2
	PermRead    = 4
)

// Queue is one queue of a topic on one broker. It is comparable, so it can
// key a map.
type Queue struct {
	Topic      string
	BrokerName string
	// Broker is the gRPC address of the broker's master when the route was
	// read. Calls go to the master the current route names, if it changed.
	Broker string
	ID     int32
}

// String returns "topic@broker#id".
func (q Queue) String() string { return fmt.Sprintf("%s@%s#%d", q.Topic, q.BrokerName, q.ID) }

// QueueData is a topic's queues on one broker (RocketMQ's QueueData).
type QueueData struct {
	BrokerName     string
	ReadQueueNums  int32
	WriteQueueNums int32
	Perm           int32 // PermWrite | PermRead
	TopicSysFlag   int32
}

// BrokerData is one broker name and its replicas' addresses by broker id,
// 0 being the master (RocketMQ's BrokerData).
type BrokerData struct {
	Cluster       string
	Name          string
	Addrs         map[int64]string // gRPC addresses
	RemotingAddrs map[int64]string // RocketMQ remoting addresses, if served
}

// Route is where a topic's queues live, as a nameserver answered.
type Route struct {
	Topic   string
	Queues  []QueueData  // sorted by broker name
	Brokers []BrokerData // sorted by name
}

// WriteQueues returns the queues a producer may write: for each broker
// whose perm includes PermWrite and which has a master, its WriteQueueNums
// queues, in broker-name then id order.
func (r *Route) WriteQueues() []Queue {
	return r.queues(PermWrite, func(q QueueData) int32 { return q.WriteQueueNums })
}

// ReadQueues returns the queues a consumer may read: for each broker whose
// perm includes PermRead and which has a master, its ReadQueueNums queues.
func (r *Route) ReadQueues() []Queue {
	return r.queues(PermRead, func(q QueueData) int32 { return q.ReadQueueNums })
}

func (r *Route) queues(perm int32, n func(QueueData) int32) []Queue {
	masters := r.masters()
	var qs []Queue
	for _, qd := range r.Queues {
		addr, ok := masters[qd.BrokerName]
		if qd.Perm&perm == 0 || !ok {
			continue
		}
		for id := range n(qd) {
			qs = append(qs, Queue{Topic: r.Topic, BrokerName: qd.BrokerName, Broker: addr, ID: id})
		}
	}
	return qs
}

// masters maps each broker name to its master's gRPC address.
func (r *Route) masters() map[string]string {
	m := make(map[string]string, len(r.Brokers))
	for _, b := range r.Brokers {
		if addr := b.Addrs[0]; addr != "" {
			m[b.Name] = addr
		}
	}
	return m
}

// routeFromProto converts a GetRouteResponse.
func routeFromProto(topic string, resp *gantryv1.GetRouteResponse) *Route {
	r := &Route{Topic: topic}
	for _, qd := range resp.GetQueueDatas() {
		r.Queues = append(r.Queues, QueueData{
			BrokerName: qd.GetBrokerName(), ReadQueueNums: qd.GetReadQueueNums(),
			WriteQueueNums: qd.GetWriteQueueNums(), Perm: qd.GetPerm(), TopicSysFlag: qd.GetTopicSysFlag(),
		})
	}
	for _, bd := range resp.GetBrokerDatas() {
		r.Brokers = append(r.Brokers, brokerFromProto(bd))
	}
	sort.Slice(r.Queues, func(i, j int) bool { return r.Queues[i].BrokerName < r.Queues[j].BrokerName })
	sort.Slice(r.Brokers, func(i, j int) bool { return r.Brokers[i].Name < r.Brokers[j].Name })
	return r
}

func brokerFromProto(bd *gantryv1.BrokerData) BrokerData {
	b := BrokerData{Cluster: bd.GetCluster(), Name: bd.GetBrokerName(), Addrs: map[int64]string{}, RemotingAddrs: map[int64]string{}}
	for id, a := range bd.GetBrokerAddrs() {
		b.Addrs[id] = a
	}
	for id, a := range bd.GetRemotingAddrs() {
		b.RemotingAddrs[id] = a
	}
	return b
}

// topicRoute is a cached Route with its derived queue lists. It is
// immutable once cached.
type topicRoute struct {
	route   *Route
	masters map[string]string
	write   []Queue
	read    []Queue
}

// AutoCreateTemplate is RocketMQ's TBW102: brokers that create topics on
// first send (autoCreateTopicEnable) register it with the inherit bit.
const AutoCreateTemplate = "TBW102"

// templateRoute is the route a producer uses for a topic nobody created
// yet: the brokers whose TBW102 perm has the inherit bit, which create the
// topic on its first message, each with as many queues as TBW102 has (the
// broker's defaultTopicQueueNums). The same count as the topic will have
// keeps a ShardingKey's queue when the topic's own route replaces this
// one. The route is not cached: once the topic exists, its own route is
// used.
func templateRoute(topic string, tmpl *Route) *topicRoute {
	r := &Route{Topic: topic, Brokers: tmpl.Brokers}
	for _, q := range tmpl.Queues {
		if q.Perm&PermInherit == 0 {
			continue
		}
		n := q.WriteQueueNums
		r.Queues = append(r.Queues, QueueData{BrokerName: q.BrokerName, ReadQueueNums: n, WriteQueueNums: n, Perm: PermRead | PermWrite})
	}
	return newTopicRoute(r)
}

func newTopicRoute(r *Route) *topicRoute {
	return &topicRoute{route: r, masters: r.masters(), write: r.WriteQueues(), read: r.ReadQueues()}
}

// routeCall is one route fetch that concurrent callers share.
type routeCall struct {
	done chan struct{}
	rt   *topicRoute
	err  error
}

// routeCache keeps the route of every topic the client used. Routes are
// fetched on first use and on demand, refreshed every RouteRefresh by run,
// and kept when the nameservers cannot be reached: clients keep working
// while every nameserver is down.
type routeCache struct {
	ns  *nameServers
	log *slog.Logger

	mu       sync.Mutex
	routes   map[string]*topicRoute
	inflight map[string]*routeCall
	kicked   map[string]bool
	kickCh   chan struct{}

	refreshFailures atomic.Int64 // refreshes that kept a cached route (tests)
}

func newRouteCache(ns *nameServers, log *slog.Logger) *routeCache {
	return &routeCache{
		ns: ns, log: log,
		routes:   map[string]*topicRoute{},
		inflight: map[string]*routeCall{},
		kicked:   map[string]bool{},
		kickCh:   make(chan struct{}, 1),
	}
}

// cached returns the cached route of topic, or nil.
func (r *routeCache) cached(topic string) *topicRoute {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.routes[topic]
}

// get returns the route of topic, fetching it if it is not cached.
func (r *routeCache) get(ctx context.Context, topic string) (*topicRoute, error) {
	if rt := r.cached(topic); rt != nil {
		return rt, nil
	}
	return r.refresh(ctx, topic)
}

// refresh fetches the route of topic now. Concurrent refreshes of one topic
// share one fetch. When the fetch fails and a route is cached, the cached
// route is kept and returned, with a warning in the log.
func (r *routeCache) refresh(ctx context.Context, topic string) (*topicRoute, error) {
	r.mu.Lock()
	c, ok := r.inflight[topic]
	if !ok {
		c = &routeCall{done: make(chan struct{})}
		r.inflight[topic] = c
	}
	r.mu.Unlock()
	if !ok {
		r.do(ctx, topic, c)
	}
	select {
	case <-c.done:
		return c.rt, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// do runs the fetch of c.
func (r *routeCache) do(ctx context.Context, topic string, c *routeCall) {
	route, err := r.fetch(ctx, topic)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, topic)
	defer close(c.done)
	if err == nil {
		c.rt = newTopicRoute(route)
		r.routes[topic] = c.rt
		return
	}
	if old := r.routes[topic]; old != nil {
		r.refreshFailures.Add(1)
		r.log.Warn("route refresh failed; keeping the cached route", "topic", topic, "err", err)
		c.rt = old
		return
	}
	c.err = err
}

// fetch asks the nameservers for the route of topic.
func (r *routeCache) fetch(ctx context.Context, topic string) (*Route, error) {
	var resp *gantryv1.GetRouteResponse
	err := r.ns.call(ctx, "route "+topic, func(ctx context.Context, c gantryv1.NameServerClient) error {
		var err error
		resp, err = c.GetRoute(ctx, &gantryv1.GetRouteRequest{Topic: topic})
		return err
	})
	if err != nil {
		return nil, err
	}
	return routeFromProto(topic, resp), nil
}

// kick asks run to refresh topic's route soon (after a broker failed).
func (r *routeCache) kick(topic string) {
	r.mu.Lock()
	r.kicked[topic] = true
	r.mu.Unlock()
	select {
	case r.kickCh <- struct{}{}:
	default:
	}
}

// run refreshes every cached route each interval, and kicked routes at
// once, until ctx ends.
func (r *routeCache) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.refreshAll(ctx, r.topics(false))
		case <-r.kickCh:
			r.refreshAll(ctx, r.topics(true))
		}
	}
}

// topics lists the cached topics, or only (and clears) the kicked ones.
func (r *routeCache) topics(kicked bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ts []string
	if kicked {
		for t := range r.kicked {
			ts = append(ts, t)
		}
		clear(r.kicked)
		return ts
	}
	for t := range r.routes {
		ts = append(ts, t)
	}
	return ts
}

func (r *routeCache) refreshAll(ctx context.Context, topics []string) {
	for _, t := range topics {
		if ctx.Err() != nil {
			return
		}
		if _, err := r.refresh(ctx, t); err != nil && ctx.Err() == nil {
			r.log.Debug("route refresh failed", "topic", t, "err", err)
		}
	}
}
