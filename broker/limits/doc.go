// Package limits is the part of the broker that applies a topic's
// retention, per-queue backlog limit and message time to live
// (docs/BROKER.md, "Retention, limits and TTL"): the topic attributes
// retention.hours / retention.ms, queue.max.backlog with queue.max.policy,
// and ttl.default.ms (attrs.go), and the TTL_MS message property
// (expiry.go). The broker (package broker) opens a Service once its store
// is recovered, consults it on every pull and on sends to refusing
// topics, and closes it before the store.
//
// The commit log is shared by every topic, so none of this deletes data:
// it decides what readers see. Each queue has a start, below which the
// service has hidden its messages (the store's RaiseQueueMin: pulls below
// it are answered "offset too small" with the start as the next offset),
// and a pull drops the expired and aged records it reads (AfterRead). A
// topic kept longer than fileReservedTime pins the commit log from its
// oldest readable message (KeepFrom), as the dead letters do.
//
//   - Retention: messages stored longer ago than the topic's retention are
//     not read; the sweep moves the start past them.
//   - TTL: a message expires TTL_MS (else its topic's ttl.default.ms; a
//     retry's, its original topic's) after it was sent (SentAt). An
//     expired message is never returned by a pull; the sweep moves the
//     start past the expired ones at the front of the queue.
//   - Backlog: a queue's backlog runs from the lowest offset committed in
//     it by the groups with an offset in it (its start when none has one)
//     to its end. A drop-oldest queue over its limit moves its start so
//     that limit remain, when read, swept or shown (Figures); a refusing
//     queue refuses sends that would pass it (Admit), counting the sends
//     admitted and not yet stored.
//
// Counts: an expired message is counted once, when a pull or the sweep
// first finds it expired (the sweep leaves out those every group had
// consumed); a dropped one when a drop hides it before every group
// consumed it. The starts, the counted offsets and the counts are kept in
// StateFile; Open raises each queue's min offset to its start again.
//
// # Goroutines and locks
//
// Start runs the sweep goroutine; Close stops it and saves the state. The
// methods are safe for concurrent use. Lock order: the state's saveMu,
// then the topic table's mu (a leaf, released before the next), then a
// topic's mu, under which the store and the metadata are read (their
// locks are leaves).
package limits
