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
// (EndOf). A new master appends {its new epoch, its log end} before it
// accepts writes; a slave appends an entry when the master's frames carry a
// newer epoch than its last. Within one epoch only one master writes, so two
// replicas that both list epoch e at the same start hold the same bytes up to
// the smaller of their two ends of e.
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
// # Use with the commit log
//
// When the log is truncated to an offset, truncate the log first and then
// call TruncateAfter with the same offset; at start, after the log's
// recovery, call TruncateAfter(the recovered end). That repairs a crash
// between the two truncations, and an entry that a new master recorded at a
// log end whose unflushed tail a crash then lost. Entries left beyond the
// log's end are harmless to LastCommonPoint meanwhile: EndOf never returns
// more than the log's end.
//
// A File is safe for concurrent use.
package epoch
