// Package server assembles a running broker: the broker core, its gRPC
// front end (broker/grpcapi) and its RocketMQ remoting front end
// (broker/remotingapi) on the same two data ports, the HTTP port (metrics,
// health, profiles) and the registration with the nameservers. The front
// ends know nothing of each other; this package is where they meet.
package server
