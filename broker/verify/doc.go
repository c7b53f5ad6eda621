// Package verify checks a broker store directory offline: the commit log,
// the consume queues and the key index, and how they agree. It backs
// `gantry verify DIR`. DIR is the store (a broker's storePathRootDir) or a
// directory holding it as store/ (the data directory of gantry dev).
//
// Run opens every file read-only with plain reads (never a mapping, never
// commitlog.Open or store.Open, which recover and so write), changes
// nothing, and reports what it finds in a Report that marshals to JSON.
// Memory stays bounded whatever the store's size: segments are read in
// chunks of a few MiB and consume-queue and index entries are checked by
// re-reading the record they point at, with no per-record tables (one
// small entry per queue says where its records in the log end).
//
// # What is checked
//
// Commit log (DIR/commitlog/<20-digit start offset>): segment names,
// sizes and contiguity; every record passes message.Check at its position
// with the __CRC32# tail required; a segment's data ends at the 8-byte
// end-of-segment filler, or at zeros after which every byte up to the end
// of the log is zero. After an invalid spot the scan searches for the next
// valid record: if there is one, the problem is "valid data after damage"
// and the scan resumes there; if not, it is a "torn tail". Ranges an
// earlier recovery skipped on request (HOLE markers) are counted, not
// reported.
//
// Consume queues (DIR/consumequeue/<topic>/<queueId>/): file names, sizes
// and contiguity; placeholders only before the first real entry; nothing
// but zeros after the first unused entry; commit-log offsets increasing;
// each entry below the log's min offset is expired (counted), any other
// must be the start of a valid record below the end of the log's valid
// data with the entry's size, the directory's topic and queue id, the
// entry's queue offset and the tags code of its TAGS (not checked for
// SCHEDULE_TOPIC_XXXX, whose code is a delivery time), and not a prepared
// or rolled-back transactional message. Every queue reaches the last
// record of its queue in the log: a queue that ends short of it (or is
// missing) lacks entries for messages that cannot be read until a broker
// dispatches them again.
//
// Index (DIR/index/<yyyyMMddHHmmssSSS>): a sane header, files in
// phyOffset order, slots within 0..indexCount-1, each entry's prevIndex
// below its own number, phyOffsets non-decreasing and within the header's
// range, times within the header's range, and each phyOffset either
// expired or the start of a valid record one of whose keys (topic#key for
// each KEYS value, its UNIQ_KEY and its IDEMPOTENCY_KEY; and for a parked
// record, REAL_TOPIC#key for those last two) hashes to the entry's keyHash.
//
// Other files (dispatch.json, commitlog.checkpoint, config/) are not
// checked; the commit-log checkpoint is read for the segment size.
//
// # Concurrency
//
// Run uses only its caller's goroutine; separate Runs are independent.
// It must not run on a store a broker has open: writes in flight look
// like torn tails (Report.AbortMarker hints at this).
package verify
