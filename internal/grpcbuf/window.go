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
// writer goroutines for them, which one send at a time pays in latency
// and broker CPU (docs/decisions/0009-grpc-buffers-and-flow-window.md).
const FlowWindow = 16 << 20
