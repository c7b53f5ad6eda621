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
// of its queue becomes visible. It also owns the delivery of delayed
// messages (below).
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
// flushes the log and saves the metadata; in between, the delivery loops
// stop and save their progress. A Pull never holds a lock while it waits.
// The delivery loops own their state (Status reads atomics only). The
// mutexes (topic updates, the round-robin table, the long-poll notifier,
// the consumer table, the call gate) are leaves: none is held while another
// is taken, and none while a hook (OnTopicsChanged, OnConsumersChanged)
// runs. The exceptions: the watch table's mutex, taken before the consumer
// table's and the lock table's (opening a watch checks membership, and the
// end of a client's last watch unregisters it and releases its locks in one
// step), and before a watch's reset list; the reset table's (reset.go),
// under which group offsets are committed, taken before the lock table's
// and the metadata's; the lock table's, held while a locked queue's offset
// is committed (lockTable.whileHeld), taken before the metadata's; and the
// group creation mutex, taken before the metadata's.
//
// # Delayed messages
//
// A message sent with DELAY = L (1..len(MessageDelayLevel), larger values
// meaning the last level; 0 or none: not delayed), or with
// TIMER_DELIVER_MS (unix ms) or TIMER_DELAY_SEC (seconds from now) in the
// future, is parked rather than stored in its topic: in ScheduleTopic
// (SCHEDULE_TOPIC_XXXX, queue L-1) or in TimerTopic (rmq_sys_wheel_timer,
// one queue, with the absolute TIMER_DELIVER_MS), with REAL_TOPIC and
// REAL_QID saying where it goes (the queue the broker picked if asked to).
// Send, SendRecords (which decodes its records only when one is delayed)
// and putInternal (the broker's own messages: send-back to retry and
// dead-letter topics) all park. A DELAY above 0 wins over the timer
// properties; a delivery time not in the future is stored at once, without
// them; one beyond TimerMaxDelay is refused. The send's result is the
// parked record's. SendBackBatch parks the retries it sends through the
// delay levels as retry references (delivery/retryrefs.go): one record per
// group and level naming the messages by offset, which the scheduler
// expands into the retries when due. The delivery is package
// broker/delivery's (delivery.go opens it and forwards to it).
//
// The scheduler (delivery/schedule.go: one goroutine for every level)
// reads each level's queue in order from its delivered offset
// (delayOffset.json) and re-publishes each message once its store time
// plus the level's delay has passed by Config.Now, stopping at the first
// that has not. The timer (delivery/timer.go) keeps the pending messages
// of its queue in a min-heap by delivery time, rebuilt at Open by
// scanning the queue from the low-water mark of its progress file
// (config/timerProgress.json, which also lists the delivered offsets
// above that mark). Both check every scheduleTick
// (100 ms, real time) and decide with Config.Now, so a test drives them
// with a fake clock. A delivered message is a new message in REAL_TOPIC /
// REAL_QID with the parked one's body, flag, born time and host,
// reconsume times and properties, less DELAY, REAL_TOPIC, REAL_QID and the
// timer properties.
//
// Delivery is at least once: progress is recorded only once the commit log
// is durable past the re-published messages, and saved afterwards (the
// delay offsets with the metadata, the timer's file within about a second);
// Close flushes and saves both. A crash between a re-publish and the save
// delivers the message again after restart; none is lost. Parked messages
// live in the commit log, so retention (fileReservedTime) deletes those
// parked longer than it keeps segments: they are dropped with a warning.
//
// The parking topics are created at Open, read-only (Pull and TopicStatus
// may inspect them); users cannot send to, create or delete them, and
// Topics leaves them out, so they are not registered with nameservers.
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
//
// ResetOffsetByTime tells the group's watches (GroupWatch.Resets) and the
// hooks of AddOffsetResetHook, and makes the reset hold against members
// that have not heard yet: until the group pulls a queue from its new
// offset, commits of other offsets are ignored, and after resetGrace pulls
// from elsewhere are answered "moved" to it (reset.go).
package broker
