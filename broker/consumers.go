package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// expireInterval is how often the broker drops consumer clients whose
// heartbeats stopped (ConsumerList also drops them when it looks).
const expireInterval = 10 * time.Second

// Subscription is one topic a client consumes, with its tag expression.
type Subscription struct {
	Topic      string
	Expression string // "", "*" or "TagA || TagB"
}

// Heartbeat is a consumer client's periodic announcement of itself.
type Heartbeat struct {
	ClientID      string
	Group         string
	Subscriptions []Subscription
}

// Consumer is a live client of a group.
type Consumer struct {
	ClientID      string
	LastHeartbeat time.Time
	Subscriptions []Subscription
}

// Heartbeat registers a client of a group or refreshes it. A client silent
// for channelExpiredTimeout is dropped. The group is created when unknown
// and autoCreateSubscriptionGroup is on (else ErrGroupNotFound), and so is
// its retry topic %RETRY%<group>. A new client fires OnConsumersChanged.
func (b *Broker) Heartbeat(hb Heartbeat) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := checkHeartbeat(hb); err != nil {
		return err
	}
	g, err := b.ensureGroup(hb.Group)
	if err != nil {
		return err
	}
	if _, err := b.ensureTopic(RetryTopic(hb.Group), max(g.RetryQueueNums, 1)); err != nil {
		return err
	}
	if b.clients.register(hb) {
		b.log.Info("consumer joined", "group", hb.Group, "client", hb.ClientID)
		b.consumersChanged(hb.Group)
	}
	return nil
}

func checkHeartbeat(hb Heartbeat) error {
	if hb.ClientID == "" {
		return fmt.Errorf("%w: heartbeat without a client id", ErrInvalidArgument)
	}
	if err := checkGroupName(hb.Group); err != nil {
		return err
	}
	for _, s := range hb.Subscriptions {
		if err := checkTopicName(s.Topic); err != nil {
			return err
		}
		if _, err := ParseFilter(s.Expression); err != nil {
			return err
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

// UnregisterClient removes a client from a group (it shut down); it fires
// OnConsumersChanged if the client was there.
func (b *Broker) UnregisterClient(group, clientID string) {
	if b.clients.unregister(group, clientID) {
		b.log.Info("consumer left", "group", group, "client", clientID)
		b.consumersChanged(group)
	}
}

// expireClients drops silent clients and fires OnConsumersChanged for each
// group that lost one.
func (b *Broker) expireClients() {
	for _, g := range b.clients.expire() {
		b.log.Info("consumer expired", "group", g)
		b.consumersChanged(g)
	}
}

func (b *Broker) consumersChanged(group string) {
	if b.cfg.OnConsumersChanged != nil {
		b.cfg.OnConsumersChanged(group)
	}
}

// consumerTable holds the live clients of each group.
type consumerTable struct {
	now func() time.Time
	ttl time.Duration

	mu     sync.Mutex
	byName map[string]map[string]Consumer // group -> client id -> client
}

func newConsumerTable(now func() time.Time, ttl time.Duration) *consumerTable {
	return &consumerTable{now: now, ttl: ttl, byName: map[string]map[string]Consumer{}}
}

// register adds or refreshes a client and reports whether it is new.
func (t *consumerTable) register(hb Heartbeat) (joined bool) {
	c := Consumer{ClientID: hb.ClientID, LastHeartbeat: t.now(), Subscriptions: slices.Clone(hb.Subscriptions)}
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byName[hb.Group]
	if g == nil {
		g = map[string]Consumer{}
		t.byName[hb.Group] = g
	}
	_, known := g[hb.ClientID]
	g[hb.ClientID] = c
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
	if len(g) == 0 {
		delete(t.byName, group)
	}
	return true
}

// expire removes clients silent for ttl and returns the groups that lost
// one, sorted.
func (t *consumerTable) expire() []string {
	cutoff := t.now().Add(-t.ttl)
	t.mu.Lock()
	defer t.mu.Unlock()
	var changed []string
	for name, g := range t.byName {
		n := len(g)
		maps.DeleteFunc(g, func(_ string, c Consumer) bool { return !c.LastHeartbeat.After(cutoff) })
		if len(g) != n {
			changed = append(changed, name)
		}
		if len(g) == 0 {
			delete(t.byName, name)
		}
	}
	slices.Sort(changed)
	return changed
}

func (t *consumerTable) ids(group string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.byName[group]))
}

func (t *consumerTable) consumers(group string) []Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byName[group]
	out := make([]Consumer, 0, len(g))
	for _, id := range slices.Sorted(maps.Keys(g)) {
		c := g[id]
		c.Subscriptions = slices.Clone(c.Subscriptions)
		out = append(out, c)
	}
	return out
}

// groups returns the groups with live clients.
func (t *consumerTable) groups() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Keys(t.byName))
}
