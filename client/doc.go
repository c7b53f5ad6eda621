// Package client is Gantry's Go client over its gRPC API
// (api/gantry/v1): a Producer, a PullConsumer and an Admin. It imports
// only api, message and internal packages (STYLE.md §1).
//
// # Routes and connections
//
// A topic's route (which brokers have its queues) comes from the
// nameservers, tried in turn from the one that last answered (at first a
// random one). Routes are cached per topic: read on first use, refreshed
// every Config.RouteRefresh by a background goroutine, and at once when a
// broker fails or does not know the topic. When no nameserver answers, the
// cached route is kept (with a warning in the log) and the client keeps
// working with the brokers it knows (DESIGN.md §5). Each broker and
// nameserver address gets one *grpc.ClientConn, plaintext unless
// Config.DialOptions says otherwise.
//
// # Errors
//
// Server errors are *StatusError values carrying the operation, the
// server's address and the gRPC status; they match sentinels with errors.Is:
// ErrTopicNotFound (and ErrNotFound), ErrInvalidArgument, ErrNoPermission,
// ErrUnavailable, ErrDiskFull, ErrUnimplemented, ErrInternal, and
// context.DeadlineExceeded or context.Canceled. A send error is definite
// (nothing was stored) unless it is an *IndeterminateError (match it with
// errors.As): the broker said the messages may have been stored (a flush or
// replica timeout), or the stream broke or the deadline passed after the
// request was written (DESIGN.md §8).
//
// # Producer
//
// Send stores one message or a batch of one topic in one queue. The queue
// comes from a QueueSelector over the topic's writable queues (each broker
// of the route whose perm includes PermWrite contributes WriteQueueNums
// queues, addressed to its master): RoundRobin by default, ByShardingKey
// for per-key order, or your own.
//
// Retries: a failed send is tried again, up to WithRetries more times,
// only when that is safe and may help (IsRetryable): UNAVAILABLE before
// the request was sent, disk full (on another broker only) and an unknown
// topic (once, after refreshing the route). Invalid input and missing
// permissions are never retried. Indeterminate errors are not retried
// either unless WithRetryIndeterminate(true): the broker does not
// deduplicate yet, so such a retry could store the messages twice. Between
// attempts the producer sleeps an exponential backoff with full jitter,
// never past the context's deadline (it gives up with the last error
// instead), and the next attempt avoids, for 30 s, a broker that just
// failed when the topic has queues elsewhere (not for messages with a
// ShardingKey, whose queue must not change).
//
// Coalescing: each queue has a sender goroutine. A send is written at once
// when nothing is in flight to its queue; sends that arrive while a
// request is in flight wait and then go together in the next request, up
// to WithMaxBatch (256 messages, 1 MiB). Each caller gets its own results.
// A coalesced request refused as invalid is split again, so one caller's
// bad message does not fail the others.
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
// SendOneway writes a message without waiting for the answer. Close waits
// for asynchronous and queued sends, then stops the goroutines.
//
// # PullConsumer
//
// A PullConsumer reads queues the application chooses, from offsets it
// manages: Queues lists the readable queues of a topic, Pull reads from an
// offset (optionally holding the call until a message arrives),
// CommitOffset and CommittedOffset store and read the group's offsets,
// SeekByTime and QueueOffsets find offsets. Pulled records are decoded
// with package message into MessageExt values.
//
// # Admin
//
// An Admin creates and deletes topics and groups on every broker of the
// cluster (or the brokers given), reads routes, cluster info, topic and
// broker status and consumer progress, resets offsets by time and queries
// messages by offset message id or by key.
//
// # Options
//
// Config, shared by all three (zero means default):
//
//   - NameServers: nameserver gRPC addresses; default ["127.0.0.1:9877"].
//   - DialOptions: added to every connection; default plaintext.
//   - RouteRefresh: route refresh period; default 30 s.
//   - Logger: *slog.Logger; default discard.
//   - ClientID: default hostname@pid@random.
//
// Producer options (NewProducer):
//
//   - WithProducerGroup(g): producer group of the requests; default "".
//   - WithQueueSelector(s): default a RoundRobin.
//   - WithRetries(n): extra attempts after retryable errors; default 2.
//   - WithBackoff(base, max): full-jitter exponential backoff; default 50 ms, 1 s.
//   - WithRandom(f): the jitter's random source; default math/rand/v2.
//   - WithRetryIndeterminate(b): retry indeterminate errors; default false.
//   - WithSendTimeout(d): bound of each attempt; default 3 s.
//   - WithMaxBatch(msgs, bytes): coalescing limits; default 256, 1 MiB.
//   - WithUnarySend(): unary Send instead of SendStream.
//
// PullConsumer options (NewPullConsumer):
//
//   - WithPullMaxBytes(n): bytes per Pull; default the broker's limit.
//   - WithHoldMargin(d): a held Pull's deadline is hold + d; default 5 s.
//
// # Concurrency
//
// Producer, PullConsumer and Admin are safe for concurrent use. Every
// goroutine (route refresher, queue senders, stream receivers,
// asynchronous sends) belongs to its client and is stopped by Close.
// Lock order in the Producer: Producer.mu before a queue sender's mu; a
// stream's mutexes are taken alone.
//
// # Example
//
//	ctx := context.Background()
//	cfg := client.Config{NameServers: []string{"127.0.0.1:9877"}}
//
//	p, err := client.NewProducer(ctx, cfg)
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	res, err := p.Send(ctx, &client.Message{Topic: "orders", Body: []byte("hello"), Tags: "new", Keys: []string{"order-1"}})
//	if err != nil {
//		var ind *client.IndeterminateError
//		if errors.As(err, &ind) {
//			// may have been stored: check before sending again
//		}
//		return err
//	}
//	log.Printf("stored as %s in queue %d at %d", res[0].MsgID, res[0].QueueID, res[0].QueueOffset)
//
//	c, err := client.NewPullConsumer(ctx, cfg, "billing")
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	queues, err := c.Queues(ctx, "orders")
//	if err != nil {
//		return err
//	}
//	q := queues[0]
//	off, found, err := c.CommittedOffset(ctx, q)
//	if err != nil {
//		return err
//	}
//	if !found {
//		off, _, err = c.QueueOffsets(ctx, q) // from the start
//	}
//	r, err := c.Pull(ctx, q, off, 32, "new", 10*time.Second)
//	if err != nil {
//		return err
//	}
//	for _, m := range r.Messages {
//		log.Printf("%s %s %q", m.MsgID(), m.Tags, m.Body)
//	}
//	return c.CommitOffset(ctx, q, r.NextOffset)
package client
