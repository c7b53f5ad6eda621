// Package grpcapi is the broker's gRPC front end: the Messaging and Admin
// services of api/gantry/v1 over the broker core, and the Registrar that
// keeps the broker registered with the nameservers.
package grpcapi
