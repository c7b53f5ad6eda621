// Package broker is the broker's core, independent of any network protocol:
// topics, sending, pulling with tag filters and long polling, consumer
// offsets (a group's, and each client's for broadcast consumption), consumer
// groups with their live clients, membership watches and queue locks, and
// status. The gRPC
// front end (broker/grpcapi) and the RocketMQ remoting front end call this
// plain Go API; they translate wire requests and map its errors to wire
// codes.
//
// A Broker owns a store.Store (commit log, consume queues, key index and the
// metadata JSON files under storePathRootDir) and wires the store's dispatch
// hook to its long-poll notifier, so a held Pull wakes as soon as a message
// of its queue becomes visible.
//
// # Errors
//
// Every error a caller can see wraps one of the sentinels in errors.go. Bad
// input to Send (the messages) wraps ErrInvalidMessage; bad arguments to the
// other calls (queue ids, offsets, group and client names, filter
// expressions, topic queue counts) wrap ErrInvalidArgument. IsIndeterminate
// tells errors after which the messages may be stored (a flush timeout, a
// context ended while waiting for the flush) from definite ones (nothing was
// stored).
//
// # Concurrency and shutdown
//
// Every method is safe for concurrent use. Close stops accepting calls
// (later ones return ErrShuttingDown), wakes held pulls (they answer with no
// messages), waits for the calls in flight, then closes the store, which
// flushes the log and saves the metadata. A Pull never holds a lock while it
// waits. The mutexes (topic updates, the round-robin table, the long-poll
// notifier, the consumer table, the queue lock table, the call gate) are
// leaves: none is held while another is taken, and none while a hook
// (OnTopicsChanged, OnConsumersChanged) runs. The one exception is the watch
// table's mutex, taken before the consumer table's and the lock table's
// (opening a watch checks membership, and the end of a client's last watch
// unregisters it and releases its locks in one step).
//
// # Consumer groups
//
// Heartbeat registers a client; a change of a group's set of client ids
// (join, UnregisterClient, expiry, the end of a client's last watch) fires
// OnConsumersChanged and wakes the group's watches, which coalesce: a watch
// holds at most one pending change and reads the latest membership, so the
// broker never waits for a slow watcher. Queue locks (LockQueues) last
// QueueLockTTL unless renewed and go with their client. Close closes every
// watch's Changed channel.
package broker
