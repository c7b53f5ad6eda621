// Package replication ships a master's commit log to its slaves, byte for
// byte at the same offsets, over its own TCP protocol on the HA port
// (10912 by default; docs/REPLICATION.md describes the protocol).
//
// A Master listens for slaves. A slave's hello carries its protocol
// version (Version; another is refused with a reason naming both), its
// log's segment size (both logs must have the same, so that every
// segment's end filler lies where the master put it), its log end and the
// largest frame it takes; the master refuses it with a reason, or
// welcomes it and streams whole log entries from that end
// (commitlog.CopyReplica) as data frames, with a heartbeat when it has sent
// nothing for a while. Either welcome carries the master's epoch list
// (MasterConfig.Epochs); each data frame is labelled with its data's epoch
// and never holds two epochs' bytes. The slave acks its log end as it
// grows; the master tracks each replica's last ack, which WaitAcked waits
// for, counting a replica's bytes only once it acked them.
//
// A Slave connects to the master (again, with back-off, after a failure).
// With an epoch file (SlaveConfig.Epochs) it first finds the end of the
// history it shares with the master (epoch.LastCommonPoint): if its log
// extends past it, it appends nothing and stops for good with a
// *TruncateNeededError naming the offset, which its owner cuts the log to
// (commitlog.Truncate) before it starts the slave again. Otherwise it
// appends each data frame with commitlog.AppendReplica, which refuses any
// bytes that are not whole, valid entries at the log's end, records in
// its epoch file each epoch where the frames start it, and acks. It drops
// the connection on a frame that is not at its log end, of an epoch older
// than its last, larger than its limit (refused from the header, before
// the body is read or allocated) or otherwise malformed.
//
// Every goroutine belongs to a Master or Slave and is joined by its Close.
// Master and Slave methods are safe for concurrent use.
package replication
