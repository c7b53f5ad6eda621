// Package muxlisten serves several protocols on one TCP port. It accepts
// a listener's connections, peeks at the first bytes of each (without
// consuming them) and hands the connection to the listener of the
// protocol they announce: the HTTP/2 client preface of a gRPC client, a
// RocketMQ remoting frame's length, an HTTP/1 request line.
//
// The nameserver and the broker use it so that each of their ports
// speaks both gRPC and RocketMQ's remoting protocol (docs/BROKER.md,
// "Ports"): a RocketMQ broker.conf's namesrvAddr=host:9876 reaches the
// nameserver's gRPC service, and an official RocketMQ client given the
// gRPC port gets its routes.
//
// On Unix the bytes are read with MSG_PEEK, so the connection handed on is
// the *net.TCPConn the listener accepted, untouched: internal/inlinenet
// still wraps it. Elsewhere (or for a connection that is not a
// syscall.Conn) the bytes read are replayed by a wrapper.
//
// With Config.TLS the Mux also terminates TLS (docs/SECURITY.md, "TLS"):
// a connection that starts with a TLS ClientHello is handshaken, then
// routed by the first bytes it sends inside TLS, so that gRPC, remoting
// and HTTP (HTTPS) are each served over TLS on the same port. With
// Config.RequireTLS plaintext connections go to the Refused listeners,
// whose servers tell each client in its protocol that TLS is required.
// A plaintext connection is handed on as without TLS, unwrapped.
//
// A peer that connects and sends nothing (or does not finish its TLS
// handshake and first bytes) is closed after Config.Timeout;
// each connection waits for its first bytes in a goroutine the Mux owns,
// at most Config.MaxPending at once (accepting pauses beyond that), and
// Close joins them all. Every method is safe for concurrent use.
package muxlisten
