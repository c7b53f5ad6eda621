package nameserver

import (
	"maps"
	"time"
)

// Permission bits of TopicInfo.Perm and QueueData.Perm, as in RocketMQ.
const (
	PermInherit = 1
	PermWrite   = 2
	PermRead    = 4
)

// MaxQueueNums bounds a topic's read and write queue counts.
const MaxQueueNums = 1024

// MasterID is the broker id of a master; slaves have ids above it.
const MasterID = 0

// Registration is one broker's report of itself and its topics.
type Registration struct {
	Cluster    string `json:"clusterName"`
	BrokerName string `json:"brokerName"`
	// BrokerID is 0 (MasterID) for a master, above 0 for a slave.
	BrokerID int64 `json:"brokerId"`
	// Addr is the broker's gRPC address (host:port), what Gantry clients dial.
	Addr string `json:"addr"`
	// RemotingAddr is the broker's RocketMQ remoting address (host:port),
	// what RocketMQ clients dial. Empty when remoting is off.
	RemotingAddr string `json:"remotingAddr,omitempty"`
	// HAAddr is the master's replication address, handed to its slaves in
	// RegisterResult. May be empty.
	HAAddr string `json:"haServerAddr,omitempty"`
	// Conn identifies the connection the registration came through; when
	// it closes, the front end calls Disconnected(Conn). Empty means
	// untracked: only expiry and Unregister remove the broker.
	Conn string `json:"-"`
	// Topics is every topic the broker serves, by name. It replaces the
	// topic set of the broker's previous registration.
	Topics map[string]TopicInfo `json:"topicConfigTable"`
	// DataVersion stamps Topics; a registration older than the stored one
	// refreshes the broker but leaves its topics alone.
	DataVersion DataVersion `json:"dataVersion"`
}

// TopicInfo is a broker's configuration of one topic (RocketMQ's TopicConfig).
type TopicInfo struct {
	// ReadQueueNums and WriteQueueNums are each 0..MaxQueueNums, not both 0
	// (0 on one side lets a topic drain or fill).
	ReadQueueNums  int32 `json:"readQueueNums"`
	WriteQueueNums int32 `json:"writeQueueNums"`
	// Perm is a combination of PermRead, PermWrite and PermInherit.
	Perm         int32 `json:"perm"`
	TopicSysFlag int32 `json:"topicSysFlag"`
	Order        bool  `json:"order"`
}

// DataVersion is RocketMQ's change stamp for a broker's topic table: the
// time of the last change (Unix ms) and the number of changes. Versions
// order by Timestamp, then Counter.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// before reports whether v is older than w.
func (v DataVersion) before(w DataVersion) bool {
	if v.Timestamp != w.Timestamp {
		return v.Timestamp < w.Timestamp
	}
	return v.Counter < w.Counter
}

// RegisterResult is Register's answer.
type RegisterResult struct {
	// Changed reports that the registration changed what the registry
	// answers: a new broker, a new address or cluster, or a different
	// topic set. A plain refresh reports false.
	Changed bool `json:"changed"`
	// For a slave whose master (id 0) is alive: the master's addresses.
	MasterAddr         string `json:"masterAddr,omitempty"`
	MasterRemotingAddr string `json:"masterRemotingAddr,omitempty"`
	MasterHAAddr       string `json:"haServerAddr,omitempty"`
}

// TopicRoute is where a topic lives (RocketMQ's TopicRouteData). Both
// slices are sorted by broker name, hold the same names, and are never nil.
type TopicRoute struct {
	QueueDatas  []QueueData  `json:"queueDatas"`
	BrokerDatas []BrokerData `json:"brokerDatas"`
}

// QueueData is one broker name's queues of a topic, from the master's
// registration, or from the lowest-id slave's when no master is alive.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

// BrokerData is the live brokers of one broker name (a master and its
// slaves). BrokerAddrs is never nil; it encodes as {"0":"host:port",...}.
type BrokerData struct {
	Cluster    string `json:"cluster"`
	BrokerName string `json:"brokerName"`
	// BrokerAddrs maps broker id to gRPC address.
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
	// RemotingAddrs maps broker id to RocketMQ remoting address, for the
	// brokers that have one.
	RemotingAddrs map[int64]string `json:"remotingAddrs,omitempty"`
}

// ClusterInfo is every live broker by cluster (RocketMQ's ClusterInfo).
type ClusterInfo struct {
	// Clusters maps a cluster name to its broker names, sorted.
	Clusters map[string][]string `json:"clusterAddrTable"`
	// Brokers maps a broker name to its brokers.
	Brokers map[string]BrokerData `json:"brokerAddrTable"`
}

// BrokerInfo describes one live broker, for admin and metrics.
type BrokerInfo struct {
	Cluster      string      `json:"clusterName"`
	BrokerName   string      `json:"brokerName"`
	BrokerID     int64       `json:"brokerId"`
	Addr         string      `json:"addr"`
	RemotingAddr string      `json:"remotingAddr,omitempty"`
	HAAddr       string      `json:"haServerAddr,omitempty"`
	Conn         string      `json:"conn,omitempty"`
	Topics       int         `json:"topics"` // how many topics it registered
	DataVersion  DataVersion `json:"dataVersion"`
	// LastUpdate is when the broker last registered.
	LastUpdate time.Time `json:"lastUpdate"`
}

// ForRemoting returns the route as a RocketMQ client must see it: each
// BrokerAddrs holds the remoting addresses (RemotingAddrs) instead of the
// gRPC ones, and a broker name with no remoting address is left out, with
// its queue data. The result may be empty; r is not modified.
func (r TopicRoute) ForRemoting() TopicRoute {
	out := TopicRoute{QueueDatas: []QueueData{}, BrokerDatas: []BrokerData{}}
	kept := make(map[string]bool, len(r.BrokerDatas))
	for _, bd := range r.BrokerDatas {
		if len(bd.RemotingAddrs) == 0 {
			continue
		}
		kept[bd.BrokerName] = true
		out.BrokerDatas = append(out.BrokerDatas, BrokerData{
			Cluster:     bd.Cluster,
			BrokerName:  bd.BrokerName,
			BrokerAddrs: maps.Clone(bd.RemotingAddrs),
		})
	}
	for _, qd := range r.QueueDatas {
		if kept[qd.BrokerName] {
			out.QueueDatas = append(out.QueueDatas, qd)
		}
	}
	return out
}
