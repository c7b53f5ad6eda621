package nameserver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Registry is the nameserver's view of live brokers and their topics. Its
// methods are safe for concurrent use.
type Registry struct {
	cfg Config
	log *slog.Logger

	mu     sync.RWMutex
	groups map[string]*group               // by broker name
	byAddr map[string]brokerKey            // gRPC address → the broker registered at it
	routes map[string]map[string]QueueData // topic → broker name → queue data
}

type brokerKey struct {
	name string
	id   int64
}

// broker is one live broker. Its topics map is never modified once stored:
// a registration replaces it.
type broker struct {
	id           int64
	addr         string
	remotingAddr string
	haAddr       string
	conn         string
	topics       map[string]TopicInfo
	version      DataVersion
	lastUpdate   time.Time
}

// group is the live brokers of one broker name: a master and its slaves.
type group struct {
	name    string
	cluster string
	members map[int64]*broker
	// indexed is the topic set the group has in Registry.routes: its
	// source's, as of the last reindex.
	indexed map[string]TopicInfo
}

// source is the broker whose topics are the group's: the master, else the
// lowest id; nil for an empty group.
func (g *group) source() *broker {
	var src *broker
	for id, b := range g.members {
		if src == nil || id < src.id {
			src = b
		}
	}
	return src
}

// NewRegistry returns an empty registry. Call Run to expire silent brokers.
func NewRegistry(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Registry{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "nameserver"),
		groups: make(map[string]*group),
		byAddr: make(map[string]brokerKey),
		routes: make(map[string]map[string]QueueData),
	}, nil
}

// Register records a broker, or refreshes it, and replaces its topic set
// with reg.Topics unless reg.DataVersion is older than the stored one. A
// broker already registered at reg.Addr under another name or id is
// replaced. An invalid registration (ErrInvalid, with an *InvalidError per
// problem) or one whose broker name is alive in another cluster
// (ErrConflict) changes nothing.
func (r *Registry) Register(reg Registration) (RegisterResult, error) {
	if err := reg.validate(); err != nil {
		return RegisterResult{}, err
	}
	topics := maps.Clone(reg.Topics)
	if topics == nil {
		topics = map[string]TopicInfo{}
	}
	now := r.cfg.Now()

	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkCluster(reg); err != nil {
		return RegisterResult{}, err
	}
	changed := r.apply(reg, topics, now)
	return r.result(reg, changed), nil
}

// checkCluster refuses a broker name that other live brokers hold in
// another cluster. The broker itself (same id, or same address) may move.
func (r *Registry) checkCluster(reg Registration) error {
	g := r.groups[reg.BrokerName]
	if g == nil || g.cluster == reg.Cluster {
		return nil
	}
	for id, b := range g.members {
		if id != reg.BrokerID && b.addr != reg.Addr {
			return fmt.Errorf("%w: Cluster %q: broker name %q is registered in cluster %q (broker id %d at %s is alive)",
				ErrConflict, reg.Cluster, reg.BrokerName, g.cluster, id, b.addr)
		}
	}
	return nil
}

// apply stores a valid registration and reports whether it changed
// anything queries answer.
func (r *Registry) apply(reg Registration, topics map[string]TopicInfo, now time.Time) bool {
	key := brokerKey{reg.BrokerName, reg.BrokerID}
	changed := false
	if old, ok := r.byAddr[reg.Addr]; ok && old != key {
		r.logBroker(slog.LevelWarn, "broker replaced by a new registration at its address", r.remove(old), old.name,
			"new_broker", reg.BrokerName, "new_id", reg.BrokerID)
		changed = true
	}
	g := r.groups[reg.BrokerName]
	if g == nil {
		g = &group{name: reg.BrokerName, cluster: reg.Cluster, members: make(map[int64]*broker)}
		r.groups[reg.BrokerName] = g
	} else if g.cluster != reg.Cluster {
		r.log.Info("broker name moved to another cluster", "broker", g.name, "from", g.cluster, "to", reg.Cluster)
		g.cluster = reg.Cluster
		changed = true
	}
	b := g.members[reg.BrokerID]
	if b == nil {
		b = &broker{id: reg.BrokerID, topics: topics, version: reg.DataVersion}
		g.members[reg.BrokerID] = b
		b.setAddrs(reg)
		r.logBroker(slog.LevelInfo, "broker registered", b, g.name, "cluster", g.cluster, "topics", len(topics))
		changed = true
	} else {
		changed = r.updateAddrs(b, g.name, reg) || changed
		changed = r.updateTopics(b, g.name, reg.DataVersion, topics) || changed
	}
	r.byAddr[reg.Addr] = key
	b.conn = reg.Conn
	b.lastUpdate = now
	if changed {
		r.reindex(g)
	}
	return changed
}

func (b *broker) setAddrs(reg Registration) {
	b.addr, b.remotingAddr, b.haAddr = reg.Addr, reg.RemotingAddr, reg.HAAddr
}

// updateAddrs stores reg's addresses in b and reports whether any changed.
func (r *Registry) updateAddrs(b *broker, name string, reg Registration) bool {
	if b.addr == reg.Addr && b.remotingAddr == reg.RemotingAddr && b.haAddr == reg.HAAddr {
		return false
	}
	r.logBroker(slog.LevelInfo, "broker addresses changed", b, name,
		"new_addr", reg.Addr, "new_remoting_addr", reg.RemotingAddr, "new_ha_addr", reg.HAAddr)
	if r.byAddr[b.addr] == (brokerKey{name, b.id}) {
		delete(r.byAddr, b.addr)
	}
	b.setAddrs(reg)
	return true
}

// updateTopics replaces b's topics unless v is older than b's version, and
// reports whether they changed.
func (r *Registry) updateTopics(b *broker, name string, v DataVersion, topics map[string]TopicInfo) bool {
	if v.before(b.version) {
		r.logBroker(slog.LevelWarn, "stale registration: topics kept", b, name,
			"version", v, "stored_version", b.version)
		return false
	}
	b.version = v
	if maps.Equal(b.topics, topics) {
		return false
	}
	added, removed, modified := diffTopics(b.topics, topics)
	r.logBroker(slog.LevelInfo, "broker topics changed", b, name,
		"topics", len(topics), "added", added, "removed", removed, "modified", modified)
	b.topics = topics
	return true
}

func diffTopics(old, cur map[string]TopicInfo) (added, removed, modified int) {
	for t, ti := range cur {
		prev, ok := old[t]
		switch {
		case !ok:
			added++
		case prev != ti:
			modified++
		}
	}
	for t := range old {
		if _, ok := cur[t]; !ok {
			removed++
		}
	}
	return added, removed, modified
}

// reindex makes routes hold exactly g's source's topics for g's name.
func (r *Registry) reindex(g *group) {
	var want map[string]TopicInfo
	if src := g.source(); src != nil {
		want = src.topics
	}
	for t := range g.indexed {
		if _, ok := want[t]; ok {
			continue
		}
		byName := r.routes[t]
		delete(byName, g.name)
		if len(byName) == 0 {
			delete(r.routes, t)
		}
	}
	for t, ti := range want {
		byName := r.routes[t]
		if byName == nil {
			byName = make(map[string]QueueData, 1)
			r.routes[t] = byName
		}
		byName[g.name] = QueueData{
			BrokerName:     g.name,
			ReadQueueNums:  ti.ReadQueueNums,
			WriteQueueNums: ti.WriteQueueNums,
			Perm:           ti.Perm,
			TopicSysFlag:   ti.TopicSysFlag,
		}
	}
	g.indexed = want
}

// remove drops a live broker and returns it.
func (r *Registry) remove(key brokerKey) *broker {
	g := r.groups[key.name]
	b := g.members[key.id]
	delete(g.members, key.id)
	if r.byAddr[b.addr] == key {
		delete(r.byAddr, b.addr)
	}
	r.reindex(g)
	if len(g.members) == 0 {
		delete(r.groups, key.name)
	}
	return b
}

// result is Register's answer; for a slave it names the live master.
func (r *Registry) result(reg Registration, changed bool) RegisterResult {
	res := RegisterResult{Changed: changed}
	if reg.BrokerID == MasterID {
		return res
	}
	if m := r.groups[reg.BrokerName].members[MasterID]; m != nil {
		res.MasterAddr, res.MasterRemotingAddr, res.MasterHAAddr = m.addr, m.remotingAddr, m.haAddr
	}
	return res
}

// Unregister drops a broker on its clean shutdown. addr must be the
// broker's registered Addr or RemotingAddr, so that a late call from an old
// process cannot drop its successor. It reports whether a broker was dropped.
func (r *Registry) Unregister(cluster, brokerName string, brokerID int64, addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[brokerName]
	if g == nil || g.cluster != cluster || addr == "" {
		return false
	}
	b := g.members[brokerID]
	if b == nil || (addr != b.addr && addr != b.remotingAddr) {
		return false
	}
	r.remove(brokerKey{brokerName, brokerID})
	r.logBroker(slog.LevelInfo, "broker unregistered", b, brokerName)
	return true
}

// Disconnected drops every broker whose latest registration came through
// connection conn, and returns how many. An empty conn drops nothing.
func (r *Registry) Disconnected(conn string) int {
	if conn == "" {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := r.collect(func(b *broker) bool { return b.conn == conn })
	for _, k := range keys {
		r.logBroker(slog.LevelInfo, "broker disconnected", r.remove(k), k.name)
	}
	return len(keys)
}

// collect returns the keys of the brokers match selects, sorted. The
// caller holds mu.
func (r *Registry) collect(match func(*broker) bool) []brokerKey {
	var keys []brokerKey
	for name, g := range r.groups {
		for id, b := range g.members {
			if match(b) {
				keys = append(keys, brokerKey{name, id})
			}
		}
	}
	slices.SortFunc(keys, func(a, b brokerKey) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.id, b.id))
	})
	return keys
}

func (r *Registry) logBroker(level slog.Level, msg string, b *broker, name string, args ...any) {
	args = append([]any{"broker", name, "id", b.id, "addr", b.addr, "conn", b.conn}, args...)
	r.log.Log(context.Background(), level, msg, args...)
}
