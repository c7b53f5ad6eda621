// Package grpcapi is the broker's gRPC front end: the Messaging and Admin
// services of api/gantry/v1 over the broker core. broker/server serves
// them beside the remoting front end.
package grpcapi
