// Package faultproxy is a TCP proxy that injects network faults between a
// client and a server, for the reliability suite (docs/RELIABILITY.md):
// no tc or iptables needed, only loopback sockets.
//
// A Proxy listens on one address and forwards each accepted connection to
// its target. Set changes the fault at any time; it applies to the
// connections already open and to new ones:
//
//	Pass           bytes flow both ways (after Fault.Latency, when set)
//	Blackhole      nothing flows either way; connections stay open and the
//	               bytes wait, as in a partition where TCP keeps retrying:
//	               back to Pass they arrive (unless a peer gave up first)
//	DropResponses  requests reach the server, its answers are held: the
//	               one-way partition that turns every call into a timeout
//	               whose effect happened (the "indeterminate" case)
//	DropRequests   the other one-way partition: answers flow, requests wait
//	Drop           connections are closed (FIN) and new ones are closed as
//	               soon as they are accepted
//	Reset          connections are reset (RST) and new ones too
//
// Bytes are never discarded from the middle of a stream: TCP does not do
// that, and a protocol would only see garbage. Latency delays each chunk
// read in either direction by the given time.
//
// All methods are safe for concurrent use. Close stops the listener, closes
// every connection and waits for the proxy's goroutines.
package faultproxy
