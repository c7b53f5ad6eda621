package broker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
)

// expireInterval is how often the broker drops consumer clients whose
// heartbeats stopped (ConsumerList also drops them when it looks).
const expireInterval = 10 * time.Second

// Subscription is one topic a client consumes, with its tag expression.
type Subscription struct {
	Topic      string
	Expression string // "", "*" or "TagA || TagB"
}

// ConsumeModel is how a group shares its topics' messages (RocketMQ's
// MessageModel).
type ConsumeModel int

const (
	// Clustering (the default): each queue is consumed by one member.
	Clustering ConsumeModel = iota
	// Broadcasting: every member consumes every queue, with offsets of its
	// own (CommitClientOffset, QueryClientOffset).
	Broadcasting
)

func (m ConsumeModel) String() string {
	switch m {
	case Clustering:
		return "CLUSTERING"
	case Broadcasting:
		return "BROADCASTING"
	}
	return fmt.Sprintf("ConsumeModel(%d)", int(m))
}

// QueueRef names a queue of this broker: a topic and a queue id.
type QueueRef struct {
	Topic   string
	QueueID int32
}

func (q QueueRef) String() string { return fmt.Sprintf("%s#%d", q.Topic, q.QueueID) }

// Heartbeat is a consumer client's periodic announcement of itself.
type Heartbeat struct {
	ClientID      string
	Group         string
	Subscriptions []Subscription
	Model         ConsumeModel
	// Ordered: the client consumes in queue order under queue locks.
	Ordered bool
	// Assigned are the queues of this broker the client consumes now (for
	// administration: ConsumerProgress shows who consumes a queue).
	Assigned []QueueRef
	// Addr is where the heartbeat came from (the front end fills it in).
	Addr string
}

// Consumer is a live client of a group, as its last heartbeat described it.
type Consumer struct {
	ClientID      string
	Addr          string
	Model         ConsumeModel
	Ordered       bool
	LastHeartbeat time.Time
	Subscriptions []Subscription
	Assigned      []QueueRef
}

// Heartbeat registers a client of a group or refreshes it: its
// subscriptions, model, ordering, assigned queues and address are replaced
// by the heartbeat's. A client silent for channelExpiredTimeout is dropped.
// The group is created when unknown and autoCreateSubscriptionGroup is on
// (else ErrGroupNotFound; ErrTooManyGroups past maxConsumerGroups), and so
// is its retry topic %RETRY%<group>. A new client is a membership change:
// it fires OnConsumersChanged and wakes the group's watches; a refresh is
// not.
func (b *Broker) Heartbeat(hb Heartbeat) error {
	errs, err := b.Heartbeats([]Heartbeat{hb})
	if err != nil {
		return err
	}
	return errs[0]
}

// Heartbeats is Heartbeat for several heartbeats at once: a RocketMQ
// HEART_BEAT lists every consumer of a client process, each in its own
// group. The groups and retry topics they create are made in one change of
// each table and saved together, once. A batch of more than
// maxGroupsPerHeartbeat heartbeats is refused whole (ErrTooManyGroups)
// before anything is done; else errs[i] is the outcome of hbs[i].
func (b *Broker) Heartbeats(hbs []Heartbeat) (errs []error, err error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	if n := len(hbs); n > b.cfg.MaxGroupsPerHeartbeat {
		return nil, fmt.Errorf("%w: a heartbeat of %d consumers: at most %d (maxGroupsPerHeartbeat)",
			ErrTooManyGroups, n, b.cfg.MaxGroupsPerHeartbeat)
	}
	errs = make([]error, len(hbs))
	names := make([]string, 0, len(hbs))
	for i, hb := range hbs {
		if errs[i] = checkHeartbeat(hb); errs[i] == nil {
			names = append(names, hb.Group)
		}
	}
	groups, gerrs := b.ensureGroups(names)
	retry := make([]metadata.TopicConfig, 0, len(groups))
	for _, g := range groups {
		retry = append(retry, groupTopic(RetryTopic(g.GroupName), max(g.RetryQueueNums, 1)))
	}
	terr := b.ensureTopics(retry)
	for i, hb := range hbs {
		if errs[i] == nil {
			errs[i] = cmp.Or(gerrs[hb.Group], terr)
		}
		if errs[i] == nil && b.clients.register(hb) {
			b.log.Info("consumer joined", "group", hb.Group, "client", hb.ClientID, "addr", hb.Addr)
			b.consumersChanged(hb.Group)
		}
	}
	return errs, nil
}

func checkHeartbeat(hb Heartbeat) error {
	if hb.ClientID == "" {
		return fmt.Errorf("%w: heartbeat without a client id", ErrInvalidArgument)
	}
	if err := checkGroupName(hb.Group); err != nil {
		return err
	}
	if hb.Model != Clustering && hb.Model != Broadcasting {
		return fmt.Errorf("%w: heartbeat of %q: consume model %d: want clustering (0) or broadcasting (1)",
			ErrInvalidArgument, hb.ClientID, int(hb.Model))
	}
	for _, s := range hb.Subscriptions {
		if err := checkTopicName(s.Topic); err != nil {
			return err
		}
		if _, err := ParseFilter(s.Expression); err != nil {
			return err
		}
	}
	for _, q := range hb.Assigned {
		if err := checkTopicName(q.Topic); err != nil {
			return err
		}
		if q.QueueID < 0 {
			return fmt.Errorf("%w: heartbeat of %q: assigned queue id %d of %q: want >= 0",
				ErrInvalidArgument, hb.ClientID, q.QueueID, q.Topic)
		}
	}
	return nil
}

// ConsumerList returns the ids of a group's live clients, sorted.
func (b *Broker) ConsumerList(group string) []string {
	b.expireClients()
	return b.clients.ids(group)
}

// Consumers returns a group's live clients, sorted by id.
func (b *Broker) Consumers(group string) []Consumer {
	b.expireClients()
	return b.clients.consumers(group)
}

// UnregisterClient removes a client from a group (it shut down) and
// releases its queue locks; it fires OnConsumersChanged and wakes the
// group's watches if the client was there.
func (b *Broker) UnregisterClient(group, clientID string) {
	left := b.clients.unregister(group, clientID)
	b.clientGone(group, clientID, left, "consumer left")
}

// clientGone releases a client's queue locks and, if it was a member,
// signals the membership change.
func (b *Broker) clientGone(group, clientID string, wasMember bool, why string) {
	if n := b.locks.release(group, clientID); n > 0 {
		b.log.Info("queue locks released", "group", group, "client", clientID, "locks", n)
	}
	if wasMember {
		b.log.Info(why, "group", group, "client", clientID)
		b.consumersChanged(group)
	}
}

// expireClientsAndLocks is the periodic sweep: expireClients, and expired
// queue locks dropped from the lock table (a lock is checked for expiry
// where it is used; this only frees the memory).
func (b *Broker) expireClientsAndLocks() {
	b.expireClients()
	b.locks.sweep()
}

// expireClients drops silent clients, releases their queue locks and
// signals a membership change for each group that lost one. Lookups call
// it, so it costs nothing until the first client may have expired.
func (b *Broker) expireClients() {
	expired := b.clients.expire()
	for _, c := range expired {
		if n := b.locks.release(c.group, c.clientID); n > 0 {
			b.log.Info("queue locks released", "group", c.group, "client", c.clientID, "locks", n)
		}
		b.log.Info("consumer expired", "group", c.group, "client", c.clientID)
	}
	for i, c := range expired {
		if i == 0 || expired[i-1].group != c.group {
			b.consumersChanged(c.group)
		}
	}
}

// consumersChanged signals a change of a group's membership: the hook and
// the group's watches.
func (b *Broker) consumersChanged(group string) {
	b.watches.notify(group)
	if b.cfg.OnConsumersChanged != nil {
		b.cfg.OnConsumersChanged(group)
	}
	b.membership.notify(group)
}

// consumerTable holds the live clients of each group.
type consumerTable struct {
	now func() time.Time
	ttl time.Duration

	mu     sync.Mutex
	byName map[string]map[string]Consumer // group -> client id -> client
	// due is when the first client may expire: at most the earliest
	// LastHeartbeat+ttl of the clients (a heartbeat only moves a client's
	// later, a new client's is now+ttl). Until then expire need not look
	// at every client: every push consumer asks for its group's members on
	// every rebalance, and 5,000 clients made a full scan per ask a
	// quadratic cost (docs/BENCHMARKS.md, "Idle and busy push consumers").
	due time.Time
	// sorted caches each group's client ids, sorted, until its membership
	// changes: every rebalance of every RocketMQ client asks for them.
	sorted map[string][]string
}

func newConsumerTable(now func() time.Time, ttl time.Duration) *consumerTable {
	return &consumerTable{now: now, ttl: ttl, byName: map[string]map[string]Consumer{}, sorted: map[string][]string{}}
}

// register adds or refreshes a client and reports whether it is new.
func (t *consumerTable) register(hb Heartbeat) (joined bool) {
	c := Consumer{
		ClientID: hb.ClientID, Addr: hb.Addr, Model: hb.Model, Ordered: hb.Ordered,
		Subscriptions: slices.Clone(hb.Subscriptions), Assigned: slices.Clone(hb.Assigned),
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c.LastHeartbeat = t.now() // under the mutex, for due (expire)
	g := t.byName[hb.Group]
	if g == nil {
		g = map[string]Consumer{}
		t.byName[hb.Group] = g
	}
	_, known := g[hb.ClientID]
	g[hb.ClientID] = c
	if !known {
		delete(t.sorted, hb.Group)
	}
	return !known
}

// unregister removes a client and reports whether it was there.
func (t *consumerTable) unregister(group, clientID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byName[group]
	if _, ok := g[clientID]; !ok {
		return false
	}
	delete(g, clientID)
	delete(t.sorted, group)
	if len(g) == 0 {
		delete(t.byName, group)
	}
	return true
}

// memberKey names a client of a group.
type memberKey struct{ group, clientID string }

// expire removes clients silent for ttl and returns them, sorted by group
// then client id.
func (t *consumerTable) expire() []memberKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	cutoff := now.Add(-t.ttl)
	if now.Before(t.due) {
		return nil
	}
	var gone []memberKey
	t.due = now.Add(t.ttl) // a client registered from now on expires no earlier
	for name, g := range t.byName {
		maps.DeleteFunc(g, func(id string, c Consumer) bool {
			if c.LastHeartbeat.After(cutoff) {
				if d := c.LastHeartbeat.Add(t.ttl); d.Before(t.due) {
					t.due = d
				}
				return false
			}
			gone = append(gone, memberKey{name, id})
			delete(t.sorted, name)
			return true
		})
		if len(g) == 0 {
			delete(t.byName, name)
		}
	}
	slices.SortFunc(gone, func(a, b memberKey) int {
		return cmp.Or(strings.Compare(a.group, b.group), strings.Compare(a.clientID, b.clientID))
	})
	return gone
}

// has reports whether a client is a live member of a group.
func (t *consumerTable) has(group, clientID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byName[group][clientID]
	return ok
}

func (t *consumerTable) ids(group string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids, ok := t.sorted[group]
	if !ok {
		g := t.byName[group]
		if g == nil {
			return nil
		}
		ids = slices.Sorted(maps.Keys(g))
		t.sorted[group] = ids
	}
	return slices.Clone(ids)
}

func (t *consumerTable) consumers(group string) []Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byName[group]
	out := make([]Consumer, 0, len(g))
	for _, id := range slices.Sorted(maps.Keys(g)) {
		c := g[id]
		c.Subscriptions = slices.Clone(c.Subscriptions)
		c.Assigned = slices.Clone(c.Assigned)
		out = append(out, c)
	}
	return out
}
