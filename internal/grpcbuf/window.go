package grpcbuf

// FlowWindow is the HTTP/2 flow-control window, per stream and per
// connection, that the broker's server and Gantry's client set
// (grpc.InitialWindowSize and InitialConnWindowSize, and their Dial
// counterparts): 16 MiB, the largest window gRPC's own estimator grows to.
//
// Any window set by hand turns that estimator off, and that is the point:
// it sends a PING (and a connection window update) with the first DATA
// frame after each acknowledged PING, so a request and its answer, one at
// a time, carried two extra frames each way and woke the peer's reader and
// writer goroutines for them. One send at a time, alternating runs
// (docs/BENCHMARKS.md): p50 57–72 µs against 65–86 µs, and the broker
// spent 37–46 µs of CPU per send against 45–63 µs.
const FlowWindow = 16 << 20
