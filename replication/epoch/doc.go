// Package epoch keeps a replica's epoch file: the list of the master epochs
// its commit log holds data from, each with the log offset where that
// epoch's data starts, oldest first. A replica that rejoins a group after a
// new master was elected compares its list with the master's
// (LastCommonPoint): the newest epoch present on both sides with the same
// start offset bounds the log prefix the two replicas share, so the replica
// truncates its log after that point and copies the rest from the master.
// With no epoch in common it must resync from scratch.
//
// # Meaning of an entry
//
// An entry {Epoch: e, StartOffset: s} says: epoch e's master wrote its first
// record of epoch e at offset s, and this replica's log [0, s) was equal to
// that master's at the time. Epoch e's data on this replica is [s, end), end
// being the next entry's start or, for the last entry, the log's end
// (EndOf); several entries may share a start when epochs ended with no data.
// Within one epoch only one master writes, so two replicas that both list
// epoch e at the same start hold the same bytes up to the smaller of their
// two ends of e. That holds only while every list describes its log: the
// entry covering an offset (IndexAt) names the epoch whose master wrote the
// record there. The rules below keep it so.
//
// # On-disk format
//
// Big-endian, a 16-byte header followed by one 16-byte slot per entry, the
// file ending right after the last slot:
//
//	header: [magic u32 "GEPO"][version u16 = 1][flags u16 = 0][count u32][crc u32]
//	entry:  [epoch i32][startOffset i64][crc u32]
//
// Each crc is CRC-32C (Castagnoli) of the 12 bytes before it. count is at
// most MaxEntries, and entries are ordered: epochs strictly increasing, start
// offsets non-decreasing, both non-negative. The count in the header makes a
// file cut at an entry boundary detectable, not only one cut inside an entry.
//
// # Wire encoding
//
// A replica sends its list to a peer (the master's answer to a rejoining
// follower) as AppendWire writes it: [count u32] then count times [epoch
// i32][startOffset i64], big-endian. ReadWire checks the count against
// MaxEntries before allocating, grows the list only as entries arrive, and
// refuses a list Validate would refuse.
//
// # Durability and damage
//
// Every change rewrites the whole file: written to <path>.tmp, fsynced,
// renamed over <path>, and the directory fsynced (fsx.WriteFileAtomic). A
// crash at any instant leaves the old or the new list under path; a leftover
// <path>.tmp is ignored and overwritten by the next change. A change that
// fails leaves the file holding the old or the new list, as a crash would,
// and the File's list unchanged; the next change rewrites the whole list.
//
// So a torn or damaged file is never a crash's doing. Open refuses it with a
// *CorruptError naming the file, the byte offset of the first problem, and
// the valid entries before it (for diagnosis). It does not recover a prefix:
// a dropped newest entry would attribute that epoch's data to an older
// epoch. A replica whose epoch file is damaged has lost the record of where
// its history may differ from the master's and must resync from scratch:
// remove the file (Open then finds no entries and LastCommonPoint returns
// ok=false).
//
// # Use with the commit log and replication
//
// Package replication's Master and Slave follow these rules (protocol
// version 2, docs/REPLICATION.md); a stopped Slave's owner makes the
// truncation with commitlog.Truncate.
//
//   - A new master truncates its log to the last whole record, then appends
//     {its new epoch, its log end} before it accepts writes.
//   - The master labels each frame it ships with the epoch of the data in it
//     (IndexAt over its own list, not its current epoch) and ends a frame at
//     that epoch's end (EndOf), so a frame never spans two epochs. A
//     follower appends {frame epoch, frame offset} when a frame's epoch is
//     greater than its last entry's: its log is a prefix of the master's, so
//     that frame starts where the epoch starts.
//   - A follower that (re)joins a master compares lists first: it checks the
//     master's list with Validate, takes p, ok := LastCommonPoint(mine,
//     theirs, myEnd, theirEnd) (p = 0 when !ok), truncates its log to p,
//     then calls TruncateAfter(p), and copies from p on.
//   - At start, after the log's recovery, call TruncateAfter(recovered end).
//     That repairs a crash between a log truncation and the list's, and
//     drops an entry that a new master recorded at a log end whose unflushed
//     tail a crash then lost.
//   - A broker that restarts does not write again in the epoch it was
//     master of: followers may hold the tail it lost, and new records at
//     those offsets under the same epoch would make LastCommonPoint keep
//     different bytes. Writing needs a new epoch (an election).
//
// TruncateAfter(p) drops the entries starting at p too, not only beyond: the
// records appended at p next may belong to an older epoch than such an
// entry, and the list could then not record them. The package's simulation
// test (TestSimulatedGroup) runs these rules through random elections,
// crashes and rejoins and checks that each rejoin keeps exactly the log
// prefix the follower shares with the master.
//
// A File is safe for concurrent use.
package epoch
