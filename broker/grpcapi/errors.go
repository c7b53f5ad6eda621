package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/broker"
)

// ErrorDomain and the reasons are the ErrorInfo detail every error of this
// API carries: whether the request may have taken effect.
const (
	ErrorDomain         = "gantrymq.io"
	ReasonDefinite      = "DEFINITE"      // nothing was stored
	ReasonIndeterminate = "INDETERMINATE" // the messages may be stored
)

// Code returns the gRPC code for a broker error.
func Code(err error) codes.Code {
	switch {
	case errors.Is(err, broker.ErrInvalidTopic), errors.Is(err, broker.ErrInvalidMessage),
		errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrRecordTooLarge):
		return codes.InvalidArgument
	case errors.Is(err, broker.ErrReservedTopic), errors.Is(err, broker.ErrNoPermission):
		return codes.PermissionDenied
	case errors.Is(err, broker.ErrTopicNotFound), errors.Is(err, broker.ErrGroupNotFound), errors.Is(err, broker.ErrDeadLetterNotFound),
		errors.Is(err, broker.ErrMessageNotFound):
		return codes.NotFound
	case errors.Is(err, broker.ErrNotRegistered), errors.Is(err, broker.ErrQueueLocked),
		errors.Is(err, broker.ErrNotMaster), errors.Is(err, broker.ErrSlaveReadDisabled): // "not master": go to the master
		return codes.FailedPrecondition
	case errors.Is(err, broker.ErrNotEnoughReplicas): // nothing stored; retry after a back-off
		return codes.Unavailable
	case broker.IsUnavailable(err): // nothing stored; retry after a back-off
		return codes.Unavailable
	case errors.Is(err, broker.ErrDiskFull), errors.Is(err, broker.ErrTooManyGroups),
		errors.Is(err, broker.ErrBacklogFull): // the message says "queue backlog full" (client.ErrBacklogFull)
		return codes.ResourceExhausted
	case broker.IsIndeterminate(err), errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}

// toStatus turns a broker error into a gRPC status error with an ErrorInfo
// saying whether it is indeterminate.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return err // already a status
	}
	reason := ReasonDefinite
	if broker.IsIndeterminate(err) {
		reason = ReasonIndeterminate
	}
	st := status.New(Code(err), err.Error())
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); derr == nil {
		st = withInfo
	}
	return st.Err()
}
