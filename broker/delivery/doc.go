// Package delivery is the part of the broker that delivers later or
// elsewhere what a send or a consumer hands it: messages parked with a
// delay level or a delivery time, consumers' send-backs to their group's
// retry and dead-letter topics (parked retries as retry references), and
// the dead-letter queues with their sweep and admin (list, show, export,
// resend, purge, stats). The broker (package broker) opens a Service once
// its store is recovered, forwards its calls to it through its call gate,
// and closes it before the store.
//
// The Service sees the rest of the broker only through the interfaces in
// config.go: Store and CommitLog (implemented by broker/store and
// commitlog), Metadata (broker/metadata), and Topics and Sender, which the
// broker implements for its topics, groups and put path. Its errors wrap
// the sentinels of broker/brokererr, which package broker re-exports.
//
// # Parking and delivery
//
// A message sent with DELAY = L (1..len(DelayLevels), larger meaning the
// last level), or with TIMER_DELIVER_MS / TIMER_DELAY_SEC in the future,
// is parked (Park): stored in ScheduleTopic (queue L-1) or TimerTopic (one
// queue, with the absolute TIMER_DELIVER_MS) with REAL_TOPIC and REAL_QID
// saying where it goes. The scheduler (schedule.go) reads each level's
// queue in order from its delivered offset and re-publishes each message
// once its store time plus the level's delay has passed; the timer
// (timer.go) keeps the pending messages of its queue in a min-heap by
// delivery time. Both check every Config.Tick and decide with Config.Now.
// A send-back's retry through the delay levels is parked as a retry
// reference (retryrefs.go): one record per group and level naming the
// messages by commit-log offset, expanded into the retries when due.
//
// Delivery is at least once: progress is recorded only once the commit log
// is durable past the re-published messages, so a crash may deliver a
// message again, never lose one.
//
// # Files
//
// In the store's config directory (Config.Dir), written atomically with a
// .bak of the previous version (metadata.Save): TimerProgressFile (the
// timer's delivered offsets) and DLQStateFile (per group: resends, purged
// offsets and the offset below which every dead letter is gone). The delay
// levels' delivered offsets are recorded in the broker's metadata
// (delayOffset.json) through Metadata.SetDelayOffset.
//
// # Goroutines and locks
//
// Start runs three goroutines, the scheduler, the timer and the
// dead-letter sweep; Close stops them, waits for them, and then flushes
// the log and saves the progress. The scheduler's and the timer's state
// belong to their goroutines (Pending reads atomics only). The rest is
// safe for concurrent use. Lock order: resendPurgeMu (one resend or purge
// at a time, held across a resend's puts into the broker) before the
// dead-letter state's saveMu, before its mu, a leaf: neither of those two
// is held while the broker's Topics or Sender is called.
package delivery
