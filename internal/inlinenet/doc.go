// Package inlinenet gives TCP connections whose reads and writes are
// system calls made inline: the goroutine keeps its processor (P) for the
// call, as for a copy of the same length, instead of handing it over.
//
// A goroutine in an ordinary system call lets the runtime's monitor
// (sysmon) take its P away once the call has lasted 20 µs and hand it to
// another thread; after each such retake the monitor polls every 20 µs for
// a millisecond or more (golang/go#18236), and the goroutine coming back
// from the call must find a P again. A socket's read or write never
// blocks (the socket is non-blocking: would-block waits in the runtime's
// network poller, as net does), but on a virtual machine whose guest pays
// a trip to its host for each switch of thread, a loopback write of 32 KiB
// (which runs the receiver's side of TCP in the same call) outlasts 20 µs
// often enough that the monitor and the hand-overs are a large share of a
// broker's and a client's CPU under load
// (docs/decisions/0007-inline-system-calls.md). The fsx package does the
// same for the commit log's writes and syncs.
//
// Dial and Listen wrap what net gives; Wrap wraps one connection. Any
// other kind of connection, or any platform but Linux, is left as it is.
// Wrapped connections also implement gRPC's optional ReadOnReady (its
// transport's non-pinning read: a buffer is taken from gRPC's pool only
// once data is there), so gRPC keeps reading them without holding a
// buffer per idle connection.
package inlinenet
