// Package nameserver is Gantry's route registry (DESIGN.md §5, PROTOCOL §6):
// which brokers are alive, which topics each serves, and the route a client
// needs to reach a topic. It keeps no files: every nameserver builds its
// whole view from broker registrations, and nameservers never talk to each
// other.
//
// This file set is the transport-independent core. A front end (gRPC, and
// later RocketMQ remoting) turns requests into calls on a Registry:
//
//   - Register for every broker registration (brokers send one every 30 s
//     and at once when their topics change). Re-registration refreshes the
//     broker and replaces its topic set, unless its DataVersion is older than
//     the one stored, in which case only the liveness is refreshed.
//   - Unregister on a clean broker shutdown, Disconnected when the
//     connection a broker registered through closes.
//   - Route, ClusterInfo, Topics and Brokers for queries.
//
// Brokers that share a broker name (a master, id 0, and its slaves) form one
// BrokerData. A topic's queue data for a broker name comes from the master's
// registration when the master is alive, else from the slave with the lowest
// id. The JSON encodings of TopicRoute and ClusterInfo use RocketMQ's field
// names (TopicRouteData, ClusterInfo); TopicRoute.ForRemoting gives the view a
// RocketMQ client must see, with remoting addresses in brokerAddrs.
//
// Expiry: Run scans every Config.ScanInterval (default 10 s; RocketMQ's
// scanNotActiveBroker runs every 5 s) and drops every broker not heard from
// for Config.BrokerExpiry (default 120 s, RocketMQ's
// BrokerChannelExpiredTime). A silent broker therefore stays routable for up
// to BrokerExpiry+ScanInterval.
//
// Every method of Registry is safe for concurrent use. One sync.RWMutex
// guards all state; queries take it shared. Run is the only goroutine the
// package ever runs, and its caller owns it.
package nameserver
