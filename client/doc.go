// Package client is Gantry's Go client over its gRPC API
// (api/gantry/v1): a Producer, a PushConsumer, a PullConsumer and an
// Admin. It imports only api, message and internal packages
// (internal/archtest checks it).
//
// # Routes and connections
//
// A topic's route (which brokers have its queues) comes from the
// nameservers, tried in turn from the one that last answered (at first a
// random one). Routes are cached per topic: read on first use, refreshed
// every Config.RouteRefresh by a background goroutine, and at once when a
// broker fails or does not know the topic. When no nameserver answers, the
// cached route is kept (with a warning in the log) and the client keeps
// working with the brokers it knows. Each broker and
// nameserver address gets one *grpc.ClientConn, plaintext unless
// Config.TLS (or Config.DialOptions) says otherwise. A connection that breaks is tried
// again 50 ms later, then after twice as long each time up to 1 s (as
// Kafka's clients do; gRPC's own default grows to 2 minutes), so a broker
// back from a restart is used again within a second.
//
// # Errors
//
// Server errors are *StatusError values carrying the operation, the
// server's address and the gRPC status; they match sentinels with errors.Is:
// ErrTopicNotFound (and ErrNotFound), ErrInvalidArgument, ErrNoPermission,
// ErrUnavailable, ErrDiskFull, ErrBacklogFull, ErrNotMaster, ErrUnimplemented, ErrInternal, and
// context.DeadlineExceeded or context.Canceled. A send error is definite
// (nothing was stored) unless it is an *IndeterminateError (match it with
// errors.As): the broker said the messages may have been stored (a flush or
// replica timeout), or the stream broke or the deadline passed after the
// request was written.
//
// # Producer
//
// Send stores one message, SendBatch a batch of one topic in one queue. The queue
// comes from a QueueSelector over the topic's writable queues (each broker
// of the route whose perm includes PermWrite contributes WriteQueueNums
// queues, addressed to its master): by default ByShardingKey, which keeps
// each Message.ShardingKey on one queue (per-key order) and goes
// round-robin without a key; RoundRobin (which refuses a ShardingKey); or
// your own.
//
// Retries: a failed send is tried again, up to WithRetries more times,
// only when that is safe and may help (IsRetryable): UNAVAILABLE before
// the request was sent, disk full (on another broker only) and an unknown
// topic (once, after refreshing the route). Invalid input and missing
// permissions are never retried. Indeterminate errors are not retried
// either unless WithRetryIndeterminate(true); such a retry goes to the same
// queue, and carries the same client message ids (UNIQ_KEY), so that a
// broker de-duplicating sends (its duplicationWindow, 5 minutes by default;
// 0 turns it off) answers it with the stored message's result, marked Duplicate,
// instead of storing the messages twice. Between attempts the producer sleeps an
// exponential backoff with full jitter, never past the context's deadline
// (it gives up with the last error instead), and after a definite failure
// the next attempt avoids, for 30 s, a broker that just failed when the
// topic has queues elsewhere (not for messages with a ShardingKey, whose
// queue must not change).
//
// Results: each message's SendResult says where it was stored, whether the
// broker found it already stored (Duplicate: a retry whose earlier attempt
// had in fact succeeded, or another send with the same IdempotencyKey;
// nothing was stored this time) and how many attempts the send took
// (Attempts, 1 when the first succeeded). Message.IdempotencyKey replaces
// the UNIQ_KEY as the broker's de-duplication key, so that separate sends
// of one business event (say, by two processes) store it once.
//
// Coalescing: each queue has a sender goroutine. A send is written at once
// when nothing is in flight to its queue; sends that arrive while a
// request is in flight wait and then go together in the next request, up
// to WithMaxBatch (256 messages, 1 MiB), and never past MaxSendBytes, the
// most records a broker takes in one send. Each caller gets its own results.
// A coalesced request refused as invalid is split again, so one caller's
// bad message does not fail the others. A waiting message is already
// encoded in its request (SendAsync encodes it there before it returns),
// which gRPC then writes without another copy.
//
// Pipelining: requests go on one SendStream per broker, shared by all the
// queues of that broker, with a request_id matched to each response, so
// many requests are in flight on one stream without waiting for each other.
// A broken stream fails its in-flight requests as indeterminate and is
// opened again for the next request. A broker that does not implement
// SendStream is sent unary Send calls instead (also with WithUnarySend);
// there a transport failure other than failing to connect is indeterminate,
// because a unary call does not say whether its request was written.
//
// SendAsync runs a Send in the background and reports to a callback;
// SendOneway writes a message without waiting for the answer. Sends
// accepted and not completed are bounded (WithMaxBuffered): past the
// bound Send and SendAsync block until there is room. Flush waits for the
// sends accepted before it; Close waits for the accepted sends within its
// ctx (or a 5 s grace when ctx has already ended), fails the rest, then
// stops the goroutines.
//
// # Idempotent consumers
//
// Delivery is at least once: a consumer may see a message again after a
// retry, a rebalance, a dead-letter resend or a producer retry the broker
// did not recognise. Idempotent wraps a MessageHandler so that it handles
// each message at most once among its successful calls, by key: the
// IDEMPOTENCY_KEY property (Message.IdempotencyKey) if set, else the
// UNIQ_KEY, which retries and resends keep (IdempotencyKeyOf;
// WithIdempotencyKeyFunc chooses another). Each call claims its keys in
// an IdempotencyStore for a lease (WithClaimLease), so that two members
// sharing the store never handle a key at once; keys recorded Done are
// skipped as handled; the others go to the handler, and are recorded Done
// once it returns ConsumeSuccess (released otherwise), even if the call's
// context has ended. NewMemoryIdempotencyStore keeps them in memory for a
// TTL, up to a bound (WithMaxKeys, WithMaxBytes; IdempotencyKeyCost per
// key), with no goroutine; a store shared by the members of a group (a
// database table, a cache) implements IdempotencyStore, and
// BatchIdempotencyStore for one round trip per batch.
//
// # PullConsumer
//
// A PullConsumer reads queues the application chooses, from offsets it
// manages: Queues lists the readable queues of a topic, Pull reads from an
// offset (optionally holding the call until a message arrives),
// MarkOffset marks a queue's offset as handled and Commit commits the
// marks (one request per broker; also every 5 s by itself and at Close),
// CommitOffset commits (or resets) one offset at once, CommittedOffset
// reads it, SeekByTime and QueueOffsets find offsets. Pulled records are
// decoded with package message into MessageExt values, which view the
// pull's response: Detach copies one out of it.
//
// # PushConsumer
//
// A PushConsumer hands the messages of its subscriptions (topic plus tag
// expression, filtered on the broker) to a MessageHandler. Its members
// share a group's queues:
//
//   - Membership: each member heartbeats to every broker of its topics and
//     keeps a WatchGroup stream open to each; a broker reports every join
//     and leave on those streams, and drops a member at once when its
//     streams end (a shutdown, or a killed process whose connection
//     closed). Members rebalance on each report, and every 20 s as a
//     safety net, from the membership the streams reported (asking a
//     broker only while its stream is not open). Heartbeats, every 30 s,
//     keep the member alive. A member its broker does not list (the
//     broker restarted moments ago and has not had the member's heartbeat
//     yet) keeps its queues and heartbeats at once instead of letting
//     them all go.
//   - Allocation: AllocateAveragely (default) or AllocateAveragelyByCircle,
//     from the sorted client ids and queues, so every member computes the
//     same split. In broadcasting every member takes every queue.
//   - Queue locks: in clustering a member locks a queue on its broker
//     before consuming it, renews the lock every 20 s, and after a
//     rebalance releases it only once the queue's batches in flight are
//     done and its offset committed; the next owner takes the queue when
//     the lock is free (it retries every 200 ms), and the member that let
//     it go takes it back only after that commit. A queue never has two
//     live consumers.
//   - Delivery: one long-polling pull loop per queue into a process queue
//     with flow control (WithFetchThreshold, WithMaxSpan: pulling pauses, a
//     pull never asks for more than the limit leaves); concurrent handling
//     on a pool of WithConsumeConcurrency goroutines, or with WithOrdered
//     one goroutine per queue in offset order. A failed pull is logged at
//     Warn and tried again after a backoff (100 ms doubling up to 3 s);
//     PullErrors and Stats count the failures, so a consumer that cannot
//     fetch shows it.
//   - Offsets: the lowest offset not yet handled (never past a message in
//     flight), committed every 5 s, when a queue is released and at
//     Shutdown; broadcast members commit offsets of their own, kept on the
//     broker under their ClientID (give a stable Config.ClientID to resume
//     after a restart).
//   - Retries: in clustering, ConsumeRetryLater (or a panic, or a call past
//     the consume timeout) sends each message back to the broker, which
//     delivers it again through the group's retry topic %RETRY%<group>
//     (every member subscribes to it; handlers see the original topic)
//     after the retry ladder's delay (10 s, 30 s, 1 m ... 2 h), and after
//     16 failures moves it to %DLQ%<group>; ConsumeDeadLetter does that at
//     once. Ordered consumers retry in place after WithSuspendTime, so
//     nothing later in the queue overtakes. Broadcast members (and any
//     member whose broker cannot take a message back) redeliver locally
//     after WithRetryDelay.
//   - Settlement of one message: the handler's result settles its batch,
//     but a message of it on which the handler called RetryAfter(d) goes
//     back alone at the smallest delay level of at least d, and one on
//     which it called DeadLetter(reason) goes to %DLQ%<group> at once; the
//     result then applies to the other messages only.
//
// Shutdown stops fetching, waits for the handlers in flight until its
// context ends (a context already ended at the call gets
// WithShutdownTimeout, 15 s, so that `defer c.Shutdown(ctx)` with a signal
// context still drains), commits, unlocks and leaves the group with
// timeouts of its own, and stops every goroutine; before Start it releases
// what NewPushConsumer made.
//
// # Admin
//
// An Admin creates and deletes topics and groups on every broker of the
// cluster (or the brokers given), reads routes, cluster info, topic and
// broker status and consumer progress, resets offsets by time, queries
// messages by offset message id or by key, and manages the users and
// rules of brokers with authentication on (CreateUser ... ListACL).
//
// # Hooks
//
// Config.Hooks observe sends, deliveries and connections (SendHook,
// SendDoneHook, ConsumeHook, ConsumeDoneHook, ConnStateHook): enough for
// tracing and metrics, which the contrib/otel module (package otelgantry)
// provides for OpenTelemetry. Without hooks they cost nothing.
//
// # Options
//
// Each option is documented once, in its own doc comment with its
// default: Config's fields, and the With functions returning a
// ProducerOption, PushConsumerOption or PullConsumerOption. A zero value
// or no option means the default.
//
// # Concurrency
//
// Producer, PushConsumer, PullConsumer and Admin are safe for concurrent
// use. Every goroutine (route refresher, queue senders, stream receivers,
// asynchronous sends, pull loops, workers) belongs to its client and is
// stopped by Close (Shutdown for the PushConsumer).
// Lock order in the Producer: Producer.mu before a queue sender's mu; a
// stream's mutexes are taken alone.
//
// # Examples
//
// The package's runnable examples (ExampleProducer, ExamplePushConsumer,
// ExamplePullConsumer, ExampleAdmin, ExampleIdempotent, ExampleHook) start
// an embedded cluster (package embedded) and use it as an application
// would; docs/CLIENT.md walks through the API.
package client
