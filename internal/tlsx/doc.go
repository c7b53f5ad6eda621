// Package tlsx holds Gantry's TLS settings and the certificates they name
// (docs/SECURITY.md, "TLS"): a Server is the server side of a port (its
// certificate, the CA its clients' certificates must chain to, whether it
// asks for them), a Client the side that dials (the CA that must have
// signed the servers' certificates, its own certificate for mutual TLS).
//
// Both pick up changed files without a restart: a handshake looks at the
// files' modification times and sizes at most once per
// CheckInterval (1 s) and loads what changed; a file that does not load
// (half written, a key that does not match its certificate) keeps the
// material in use, and the error naming the file is logged once. No
// goroutine watches the files, so neither has anything to close.
//
// The muxlisten package terminates TLS on a multiplexed port with a
// Server's Config; Credentials give gRPC a Client's side, and
// TerminatedCredentials tell a gRPC server which of its connections came
// over TLS. WriteDevCerts makes a throw-away CA and certificates for
// `gantry dev --tls` and for tests. Every method is safe for concurrent
// use.
package tlsx
