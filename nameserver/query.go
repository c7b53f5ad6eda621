package nameserver

import (
	"cmp"
	"maps"
	"slices"
)

// Route returns where topic lives: each live broker name that serves it,
// with its queue data and addresses. A topic no live broker serves gets a
// *TopicNotFoundError (errors.Is(err, ErrTopicNotFound)). The result is the
// caller's to keep.
func (r *Registry) Route(topic string) (TopicRoute, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	byName := r.routes[topic]
	if len(byName) == 0 {
		return TopicRoute{}, &TopicNotFoundError{Topic: topic}
	}
	route := TopicRoute{
		QueueDatas:  make([]QueueData, 0, len(byName)),
		BrokerDatas: make([]BrokerData, 0, len(byName)),
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		route.QueueDatas = append(route.QueueDatas, byName[name])
		route.BrokerDatas = append(route.BrokerDatas, r.groups[name].brokerData())
	}
	return route, nil
}

// brokerData is a fresh BrokerData of g. The caller holds mu.
func (g *group) brokerData() BrokerData {
	bd := BrokerData{Cluster: g.cluster, BrokerName: g.name, BrokerAddrs: make(map[int64]string, len(g.members))}
	for id, b := range g.members {
		bd.BrokerAddrs[id] = b.addr
		if b.remotingAddr != "" {
			if bd.RemotingAddrs == nil {
				bd.RemotingAddrs = make(map[int64]string, len(g.members))
			}
			bd.RemotingAddrs[id] = b.remotingAddr
		}
	}
	return bd
}

// ClusterInfo returns every live broker by cluster and by broker name.
func (r *Registry) ClusterInfo() ClusterInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ci := ClusterInfo{Clusters: make(map[string][]string), Brokers: make(map[string]BrokerData, len(r.groups))}
	for name, g := range r.groups {
		ci.Clusters[g.cluster] = append(ci.Clusters[g.cluster], name)
		ci.Brokers[name] = g.brokerData()
	}
	for _, names := range ci.Clusters {
		slices.Sort(names)
	}
	return ci
}

// Topics returns, sorted, every topic Route answers: the topics of each
// live master, and of the lowest-id slave of a broker name whose master is
// gone.
func (r *Registry) Topics() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	topics := make([]string, 0, len(r.routes))
	for t := range r.routes {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics
}

// Brokers returns every live broker, sorted by cluster, broker name and id.
func (r *Registry) Brokers() []BrokerInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []BrokerInfo
	for name, g := range r.groups {
		for _, b := range g.members {
			out = append(out, BrokerInfo{
				Cluster:      g.cluster,
				BrokerName:   name,
				BrokerID:     b.id,
				Addr:         b.addr,
				RemotingAddr: b.remotingAddr,
				HAAddr:       b.haAddr,
				Conn:         b.conn,
				Topics:       len(b.topics),
				DataVersion:  b.version,
				LastUpdate:   b.lastUpdate,
			})
		}
	}
	slices.SortFunc(out, func(a, b BrokerInfo) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.BrokerID, b.BrokerID))
	})
	return out
}
