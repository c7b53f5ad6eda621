// Package nameserver is Gantry's route registry: which brokers are alive,
// which topics each serves, and the route a client needs to reach a topic.
// It keeps no files: every nameserver builds its whole view from broker
// registrations, and nameservers never talk to each other.
//
// The Registry is the transport-independent core. Server is its front end:
// the gRPC NameServer service and the RocketMQ remoting handler
// (NewRemotingHandler), served together on every listener given to
// Server.Serve, which tells them apart by the first bytes of each
// connection (internal/muxlisten). The front ends turn requests into calls
// on the Registry:
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
// Authentication (Config.AuthenticationEnabled, ACLFile): both front ends
// check every request's signature and its class (MethodClass,
// RemotingClass) before it reaches the Registry: a registration needs a
// cluster user, a topic deletion an admin, queries nothing
// (docs/SECURITY.md, "Cluster").
//
// Expiry: Run scans every Config.ScanInterval (default 10 s; RocketMQ's
// scanNotActiveBroker runs every 5 s) and drops every broker not heard from
// for Config.BrokerExpiry (default 120 s, RocketMQ's
// BrokerChannelExpiredTime). A silent broker therefore stays routable for up
// to BrokerExpiry+ScanInterval.
//
// Every method of Registry is safe for concurrent use. One sync.RWMutex
// guards all state; queries take it shared. Run is the Registry's only
// goroutine, and its caller owns it (Server runs it, and its servers'
// goroutines, until Close).
package nameserver
