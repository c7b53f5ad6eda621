// Package index is the message-key index: it maps the hash of a key
// ("topic#key", as the broker's dispatcher builds it) to the commit-log
// offsets of the records carrying it, in RocketMQ's IndexFile format. It
// stores int64 offsets only and never reads the commit log.
//
// # On-disk format
//
// Dir holds files named by creation time, yyyyMMddHHmmssSSS (bumped by 1 ms
// when a name would repeat or go backwards, so name order is creation
// order). Each file is mapped and is 40 + SlotCount*4 + EntryCount*20
// bytes (sparse: see Disk space), all integers big-endian:
//
//	header (40 B)  beginTimestamp int64, endTimestamp int64 (ms),
//	               beginPhyOffset int64, endPhyOffset int64,
//	               hashSlotCount int32, indexCount int32 (starts at 1)
//	slots          SlotCount × int32: slot s holds the number of the newest
//	               entry whose keyHash % hashSlotCount == s; 0 = empty
//	entries        EntryCount × 20 B; entry n (n >= 1) at 40+SlotCount*4+n*20:
//	               keyHash int32, phyOffset int64,
//	               timeDiff int32 (seconds since beginTimestamp, clamped
//	               to 0..MaxInt32), prevIndex int32 (older entry of the
//	               same slot, 0 = end of chain)
//
// keyHash is |Java String.hashCode(key)| with MinInt32 mapped to 0 (see
// KeyHash). beginTimestamp/beginPhyOffset come from the first entry,
// endPhyOffset from the last, endTimestamp is the largest store time. A file
// is full when indexCount reaches its entry capacity; Put then starts a new
// one. Existing files keep the sizes they were created with (the entry
// capacity is derived from the file size and hashSlotCount).
//
// # Disk space
//
// A file is created at its full size with ftruncate, so it is sparse, and
// its disk blocks are reserved (fallocate) from offset 0 up, in chunks of
// 4 MiB aligned on 4 MiB: at creation the header, the slot table (written
// at random, so reserved whole) and the entries up to the end of that
// chunk; then, before Put writes an entry past the reserved end, the chunk
// holding it: a new file takes its slot table's disk and one chunk, and
// grows a chunk at a time (docs/STORAGE.md). Chunks are
// multiples of 2 MiB, the largest folio the page cache gives a mapped file:
// a write fault makes the filesystem back the whole folio it falls in, and
// a page it cannot back is SIGBUS. A reservation that fails (no room, or
// fsx.CheckRoom saying there is none, checked first as for any
// preallocation) fails Put with an error wrapping ENOSPC before any byte
// of the entry is written; Put works again once there is room. A file
// reopened is reserved again up to the end of the chunk holding its last
// entry before anything writes into it (Open's rebuild, Truncate's cut): a
// crash may have lost a reservation no sync had made durable while the
// header counting those entries reached the disk. That needs no new space
// unless a crash lost it (so no CheckRoom); on a full disk it fails, and
// Open with it, rather than write into a hole. Files preallocated whole by
// earlier versions open and work unchanged.
//
// # Lookup
//
// Lookup visits files newest first, skipping those whose
// [beginTimestamp, endTimestamp] misses the range, and in each walks the
// slot's chain through prevIndex, keeping entries whose keyHash matches and
// whose time (beginTimestamp + timeDiff*1000) is in range. A walk stops at
// an entry number <= 0 or >= indexCount, at a prevIndex that does not
// decrease (so a damaged file cannot loop), or at an entry older than the
// range. Hashes collide: callers compare the key in the record.
//
// # Guarantees and recovery
//
// Flush msyncs, per file, the new entries, then the slots (once, when the
// file is full), then the header, so a durable indexCount implies durable
// entries. A file that fills is synced whole before the next one is
// started, so only the newest file can hold bytes written since the last
// sync, however fast files fill. After a crash, pages written since then
// may be torn in any order, so Open rebuilds the slots and chains of the
// two newest files (the newest may be an empty one, prepared or just
// started) from their entries (up to indexCount), skipping entries that
// cannot be right. Its work follows the entries in use, not the file's
// size: a file that is not full (whose slots no Flush has synced) has its
// slot table zeroed by the filesystem (fallocate FALLOC_FL_ZERO_RANGE,
// which keeps the blocks reserved; if that fails, the table is reserved
// again and cleared through the mapping, and Open fails if it cannot be),
// and only the pages of its header and entries are read. A full file's
// table, synced when it filled, is cleared in memory and rebuilt the same.
// Open deletes a file whose
// header is impossible (bad slot count, size, indexCount or ranges, or a
// phyOffset range below the previous file's) together with every newer
// file, and logs a warning; EndPhyOffset then names the record where
// indexing must resume. On start-up the broker calls Truncate with the
// commit log's recovered end and re-dispatches from the offset it returns.
// Re-indexing the record at EndPhyOffset or at Truncate's result may
// duplicate entries; Lookup returns each offset once.
//
// # Concurrency
//
// One writer at a time calls Put, Truncate, DeleteBelow, Flush and Close
// (they serialize on an internal mutex, so calling them from several
// goroutines is safe but pointless). Lookup, EndPhyOffset and Files may run
// concurrently with them and with each other. The package starts no
// goroutines.
//
// Two locks, taken in this order: the writer mutex, then an RWMutex over
// the file list. Lookup holds the RWMutex shared for its whole walk; the
// writer takes it exclusively only to change the list (roll, Truncate,
// DeleteBelow, Close) and unmaps removed files after that, so a reader
// never touches an unmapped file.
//
// Within the file being written, Put writes the entry's 20 bytes and the
// header bytes with plain stores, then atomically publishes, in order, the
// header mirror fields, indexCount, and last the slot (an atomic 32-bit
// store of the big-endian word). Readers never read header bytes: they load
// the slot first, then indexCount, then the mirrors, all atomically. A slot
// value therefore always points at a fully written entry below the
// indexCount the reader sees, and an entry's bytes are never rewritten
// once published. A concurrent Lookup sees each Put entirely or not at all.
package index
