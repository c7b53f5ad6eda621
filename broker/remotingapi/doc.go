// Package remotingapi is the broker's RocketMQ remoting front end: the
// requests the official RocketMQ clients send to a broker (the
// request codes of Java's RequestCode), answered by calls on a broker.Broker, so that an unmodified Apache
// RocketMQ Go client produces to and consumes from Gantry. Serve the
// Handler New returns with a remoting.Server on the broker's listenPort
// (10911); broker/server does.
//
// # Requests
//
// Producing: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and
// SEND_BATCH_MESSAGE (320), answered with the offset message id, queue,
// queue offset and UNIQ_KEY (transactionId); a client's own retry send to
// %RETRY%<group> goes through broker.SendRetry (dead-lettered past its
// maxReconsumeTimes). Consuming: PULL_MESSAGE (11) with long polling,
// HEART_BEAT (34), GET_CONSUMER_LIST_BY_GROUP (38), UNREGISTER_CLIENT (35),
// QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
// SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET
// (31), CONSUMER_SEND_MSG_BACK (36), LOCK_BATCH_MQ (41) and
// UNLOCK_BATCH_MQ (42). Queries: QUERY_MESSAGE (12) and
// VIEW_MESSAGE_BY_ID (33). Administration, as the official Go client's
// admin package and mqadmin send it (docs/BROKER.md lists what each does):
// UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
// GET_ALL_TOPIC_CONFIG (21), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
// DELETE_SUBSCRIPTIONGROUP (207), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
// GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
// GET_CONSUMER_CONNECTION_LIST (203), GET_BROKER_RUNTIME_INFO (28) and
// INVOKE_BROKER_TO_RESET_OFFSET (222); their queue tables are written as
// fastjson writes a Map keyed by MessageQueue (offsetTableBody).
// UPDATE_BROKER_CONFIG (25) is refused naming it: the configuration is
// broker.conf's. Every other code, END_TRANSACTION among them (Gantry has
// no transactions), is answered REQUEST_CODE_NOT_SUPPORTED; a request
// never closes its connection. The broker's rules apply as they do to the
// gRPC front end; Code maps its errors to response codes, in one place.
//
// # Consumers and connections
//
// The RocketMQ Go client never unregisters: it closes its connections. A
// consumer is therefore tied to the connection of its last heartbeat: when
// that connection closes, the consumer is unregistered from its group.
// Whenever a group's membership changes (a client joins, leaves or
// expires), every connection with a consumer of the group gets
// NOTIFY_CONSUMER_IDS_CHANGED (40), oneway, from a goroutine the Handler
// owns, so its clients rebalance at once.
//
// The subscriptions of the last heartbeat of a group filter its pulls that
// carry none (the Go push consumer's); a SQL92 subscription is refused at
// pull time, as by a Java broker without property filtering.
//
// # Goroutines and locks
//
// Handlers run in the remoting connections' goroutines; the Handler starts
// one goroutine of its own (the notifier), which Close stops and joins. Its
// mutexes (the client table's, the subscription cache's, the notifier's)
// are leaves; the heartbeat mutex is taken before the client table's, and
// none is held while sending to a connection.
package remotingapi
