package remotingapi

import (
	"context"
	"errors"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// ErrClosed is returned by Close after the first call.
var ErrClosed = errors.New("remotingapi: closed")

// errBadHeader marks a request whose ext fields or body do not parse.
var errBadHeader = errors.New("remotingapi: malformed request")

// Code returns the RocketMQ response code for a broker error, chosen for
// what the Go client does with it (rocketmq-client-go's
// internal/remote and producer): a transient
// problem is SERVICE_NOT_AVAILABLE (14), which a producer retries on
// another broker, never SYSTEM_BUSY (2), which it does not retry; bad
// input is MESSAGE_ILLEGAL (13) for messages and INVALID_PARAMETER (29)
// otherwise, neither retried.
func Code(err error) remoting.ResponseCode {
	switch {
	case err == nil:
		return remoting.ResSuccess
	case errors.Is(err, broker.ErrReplicaTimeout):
		// Stored, not known replicated: the Go client reports status
		// SendFlushSlaveTimeout, as for RocketMQ's SYNC_MASTER.
		return remoting.ResFlushSlaveTimeout
	case errors.Is(err, broker.ErrNotEnoughReplicas):
		// RocketMQ 5 answers SYSTEM_ERROR with "in-sync replicas not enough".
		return remoting.ResSystemError
	case errors.Is(err, broker.ErrNotMaster):
		// A producer retries elsewhere; the remark names the slave role.
		return remoting.ResServiceNotAvailable
	case errors.Is(err, broker.ErrSlaveReadDisabled):
		// Java's slave answers pulls with SYSTEM_BUSY when it does not serve reads.
		return remoting.ResSystemBusy
	case errors.Is(err, broker.ErrBacklogFull):
		// Flow control, definite: neither the Go nor the Java producer
		// retries it; the remark names the queue and queue.max.backlog.
		return remoting.ResSystemBusy
	case errors.Is(err, broker.ErrInvalidMessage), errors.Is(err, broker.ErrRecordTooLarge):
		return remoting.ResMessageIllegal
	case errors.Is(err, broker.ErrInvalidTopic), errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, errBadHeader):
		return remoting.ResInvalidParameter
	case errors.Is(err, broker.ErrReservedTopic), errors.Is(err, broker.ErrNoPermission):
		return remoting.ResNoPermission
	case errors.Is(err, broker.ErrTopicNotFound):
		return remoting.ResTopicNotExist
	case errors.Is(err, broker.ErrGroupNotFound):
		return remoting.ResSubscriptionGroupNotExist
	case errors.Is(err, broker.ErrNotRegistered):
		return remoting.ResConsumerNotOnline
	case errors.Is(err, broker.ErrFlushTimeout):
		return remoting.ResFlushDiskTimeout
	case broker.IsUnavailable(err), errors.Is(err, broker.ErrDiskFull),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return remoting.ResServiceNotAvailable
	}
	return remoting.ResSystemError
}

// errorResponse answers req with err's code and message.
func errorResponse(req *remoting.Command, err error) *remoting.Command {
	return remoting.NewResponse(req, Code(err), err.Error())
}
