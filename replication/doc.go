// Package replication ships a master's commit log to its slaves, byte for
// byte at the same offsets, over its own TCP protocol on the HA port
// (10912 by default; docs/REPLICATION.md describes the protocol).
//
// A Master listens for slaves. A slave's hello carries its protocol
// version, its log's segment size (both logs must have the same, so that
// every segment's end filler lies where the master put it), its log end
// and the largest frame it takes; the master refuses it with a reason, or
// welcomes it and streams whole log entries from that end
// (commitlog.CopyReplica) as data frames, with a heartbeat when it has sent
// nothing for a while. The slave acks its log end as it grows; the master
// tracks each replica's last ack, which WaitAcked waits for.
//
// A Slave connects to the master (again, with back-off, after a failure),
// appends each data frame with commitlog.AppendReplica, which refuses any
// bytes that are not whole, valid entries at the log's end, and acks. It
// drops the connection on a frame that is not at its log end, larger than
// its limit (refused from the header, before the body is read or
// allocated) or otherwise malformed.
//
// Every goroutine belongs to a Master or Slave and is joined by its Close.
// Master and Slave methods are safe for concurrent use.
package replication
