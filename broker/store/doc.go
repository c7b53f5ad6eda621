// Package store is the broker's message store: the commit log (every
// message, in arrival order), one consume queue per (topic, queue) and the
// key index, kept in step by one dispatcher goroutine.
//
// Records come to PutBatch encoded and checked where they entered the
// broker (a Batch: the records and what the check read of each; Encode
// makes one of message structs). PutBatch assigns each record the next
// offset of its queue under the commit log's append lock and appends the
// batch as one unit; the dispatcher follows
// the log right behind the appender (woken by it, not polling), decodes each
// record once, appends its consume-queue entry, indexes its KEYS, UNIQ_KEY
// and IDEMPOTENCY_KEY as "topic#key" (a parked record's also under its
// REAL_TOPIC, for the broker's de-duplication), and calls Config.OnDispatch. A message is visible to Get
// once dispatched.
//
// A new queue's first file is made by the store's creator goroutine, not
// the dispatcher (creator.go); its first entries wait in memory, readable.
//
// Every FlushInterval the queues and the index are flushed and
// Root/dispatch.json records the log offset below which all of that is
// durable (no later than the first entry of a queue still waiting for its
// file), with each queue's size; Close marks it clean, and the next Open
// takes each queue's end from it without scanning (consumequeue.Hint),
// other starts scan each queue from its recorded size on. Queues are opened
// and flushed 16 at a time. At Open (PROTOCOL §4.5): the commit log
// recovers; queue entries past its end are cut; the index drops files past
// it; records are re-dispatched from the checkpoint (re-dispatch is
// idempotent); a queue smaller than the checkpoint recorded (deleted or
// damaged files) or no checkpoint at all rebuilds queues and index from the
// whole log; queue counters come from the recovered queues.
//
// The dispatcher's position is the commit log's DeleteFloor: retention,
// even forced by a full disk, never deletes a record before its queue
// entry exists. A dispatcher that fails (a full disk refusing the next
// consume-queue or index file) retries on its own and the store is stalled
// (DispatchState): it logs so with a growing pause, and PutBatch refuses
// messages with ErrDispatchStalled once the stall lasted MaxDispatchStall
// or the dispatcher is MaxDispatchLagBytes behind, until it catches up. Open
// on such a disk opens stalled, with the queue counters read from the log.
// A queue whose records retention deleted before they were dispatched
// resumes at its first record still in the log. A message lost in a
// damaged range recovery skipped (commitlog.Config.SkipCorrupt) keeps, or
// gets, a queue entry inside that range; Get steps over such entries.
//
// PutBatch, Get and the lookups are safe for concurrent use.
package store
