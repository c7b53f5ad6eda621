package broker

import (
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
)

// Sentinel errors (defined in broker/brokererr, which the broker's parts
// share). Match them with errors.Is; the broker's errors wrap them with
// the details (the field, the value, the limit).
var (
	// ErrInvalidConfig: a broker.conf line or a Config field is wrong.
	ErrInvalidConfig = brokererr.ErrInvalidConfig
	// ErrInvalidTopic: a topic name breaks ^[a-zA-Z0-9_%-]{1,127}$.
	ErrInvalidTopic = brokererr.ErrInvalidTopic
	// ErrReservedTopic: the topic is a system topic users cannot create,
	// delete or send to (rmq_sys_*, SCHEDULE_TOPIC_XXXX, TBW102).
	ErrReservedTopic = brokererr.ErrReservedTopic
	// ErrTopicNotFound: the topic does not exist (and was not auto-created).
	ErrTopicNotFound = brokererr.ErrTopicNotFound
	// ErrNoPermission: the topic's perm forbids the operation (or its group
	// has consumption disabled).
	ErrNoPermission = brokererr.ErrNoPermission
	// ErrInvalidMessage: a message of a Send is unacceptable (empty or
	// oversized body, oversized properties, wrong topic, queue id out of
	// range). Nothing of that Send was stored.
	ErrInvalidMessage = brokererr.ErrInvalidMessage
	// ErrInvalidArgument: an argument other than a message is unacceptable
	// (a pull's queue id or offset, a group or client name, a filter
	// expression, a topic's queue counts).
	ErrInvalidArgument = brokererr.ErrInvalidArgument
	// ErrGroupNotFound: the consumer group does not exist, and either
	// autoCreateSubscriptionGroup is off or the call never creates one
	// (ResetOffsetByTime).
	ErrGroupNotFound = brokererr.ErrGroupNotFound
	// ErrTooManyGroups: a heartbeat lists more consumer groups than
	// maxGroupsPerHeartbeat, or an unknown group would be created past
	// maxConsumerGroups.
	ErrTooManyGroups = brokererr.ErrTooManyGroups
	// ErrNotRegistered: the consumer client is not a live member of the
	// group (WatchGroup needs a Heartbeat first).
	ErrNotRegistered = brokererr.ErrNotRegistered
	// ErrQueueLocked: the queue's lock is held by another client than the
	// one committing its offset (CommitHeldOffset).
	ErrQueueLocked = brokererr.ErrQueueLocked
	// ErrShuttingDown: the broker is closing or closed.
	ErrShuttingDown = brokererr.ErrShuttingDown
	// ErrIndeterminate: the messages were written to the log but the call
	// failed afterwards (flush timeout, context ended while waiting for the
	// flush): they may be stored and delivered. Retry only with dedup.
	ErrIndeterminate = brokererr.ErrIndeterminate
	// ErrNotMaster: the broker is a slave (brokerRole SLAVE) and refuses
	// every write: sends, send-backs, topic and group changes, offset
	// commits. The error is a *NotMasterError naming the master's address
	// when the broker knows it. Nothing was stored.
	ErrNotMaster = brokererr.ErrNotMaster
	// ErrNotEnoughReplicas: a SYNC_MASTER has fewer in-sync slaves than
	// inSyncReplicas-1 (connected, within haMaxGapNotInSync of its log
	// end). Nothing was stored.
	ErrNotEnoughReplicas = brokererr.ErrNotEnoughReplicas
	// ErrReplicaTimeout: a SYNC_MASTER stored the messages but not enough
	// slaves acknowledged them within slaveTimeout: they may be kept or
	// lost by a failover (IsIndeterminate).
	ErrReplicaTimeout = brokererr.ErrReplicaTimeout
	// ErrSlaveReadDisabled: a pull on a slave whose slaveReadEnable is off.
	ErrSlaveReadDisabled = brokererr.ErrSlaveReadDisabled
	// ErrMessageNotFound: no stored message answers a lookup by log offset
	// (AppendRecordAt), by offset message id or by queue offset.
	ErrMessageNotFound = errors.New("broker: message not found")
)

// The storage errors a call passes on from the store. They are the commit
// log's own values, so errors.Is matches them in whatever wraps them; the
// front ends name them here and never import the storage packages.
var (
	// ErrRecordTooLarge: a message (or batch) larger than a commit-log
	// segment can hold. Nothing was stored.
	ErrRecordTooLarge = commitlog.ErrRecordTooLarge
	// ErrDiskFull: the commit log's disk is full. Nothing was stored.
	ErrDiskFull = commitlog.ErrDiskFull
	// ErrFlushTimeout: the messages were written but not flushed in time
	// (SYNC_FLUSH): they may be stored (IsIndeterminate).
	ErrFlushTimeout = commitlog.ErrFlushTimeout
)

// IsUnavailable reports whether err says the broker cannot store or serve
// now, nothing stored, worth a retry after a back-off: it is closing
// (ErrShuttingDown), its log is closed or failed to flush, or its
// dispatcher is stalled (a full disk refusing a consume-queue or index
// file).
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrShuttingDown) || errors.Is(err, commitlog.ErrClosed) ||
		errors.Is(err, commitlog.ErrFlushFailed) || errors.Is(err, store.ErrDispatchStalled)
}

// IsIndeterminate reports whether err leaves the outcome of a Send unknown:
// the messages may be stored (commitlog.ErrFlushTimeout, or any error Send
// wrapped with ErrIndeterminate). It is false for nil and for definite
// errors, after which nothing was stored: invalid input, no permission, disk
// full, topic missing, shutting down.
func IsIndeterminate(err error) bool {
	return errors.Is(err, ErrIndeterminate) || errors.Is(err, commitlog.ErrFlushTimeout) || errors.Is(err, ErrReplicaTimeout)
}

// NotMasterError is a slave's refusal of a write. It unwraps to
// ErrNotMaster.
type NotMasterError struct {
	Broker string // the broker name (its master/slave group)
	ID     int64  // the slave's brokerId
	Master string // the master's address, "" when unknown
	// NoLease: the broker is a master whose lease from the controller
	// expired (it cannot reach the controller, or another broker is
	// being elected).
	NoLease bool
}

func (e *NotMasterError) Error() string {
	if e.NoLease {
		return fmt.Sprintf("broker: not master: broker %s id %d has no master lease from the controller (it cannot reach it, "+
			"or another broker is being elected) and takes no writes", e.Broker, e.ID)
	}
	s := fmt.Sprintf("broker: not master: broker %s id %d is a SLAVE and takes no writes", e.Broker, e.ID)
	if e.Master != "" {
		s += "; the master is at " + e.Master
	}
	return s
}

// Unwrap returns ErrNotMaster.
func (e *NotMasterError) Unwrap() error { return ErrNotMaster }
