package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// Sentinel errors. Match them with errors.Is: the errors the client returns
// wrap them with the operation and the server's address (*StatusError).
var (
	// ErrClosed: the Producer, PullConsumer or Admin was closed.
	ErrClosed = errors.New("client: closed")
	// ErrNotFound: the server does not know what was asked for (a group,
	// a message). ErrTopicNotFound matches it too.
	ErrNotFound = errors.New("client: not found")
	// ErrTopicNotFound: no nameserver has a route for the topic, or the
	// broker does not have the topic. It matches ErrNotFound.
	ErrTopicNotFound = fmt.Errorf("client: topic not found: %w", ErrNotFound)
	// ErrInvalidArgument: the request was refused as invalid (gRPC
	// INVALID_ARGUMENT or OUT_OF_RANGE, or a check done by the client before
	// sending). Nothing was stored; retrying cannot help.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrNoPermission: the topic is not writable or readable, or the client
	// is not allowed (PERMISSION_DENIED, UNAUTHENTICATED). Not retried.
	ErrNoPermission = errors.New("client: no permission")
	// ErrUnavailable: the server could not be reached or is not ready
	// (UNAVAILABLE). When the request was not sent it is retried.
	ErrUnavailable = errors.New("client: unavailable")
	// ErrDiskFull: the broker refuses writes because its disk is full
	// (RESOURCE_EXHAUSTED). Nothing was stored; a Producer retries on
	// another broker, never on the same one.
	ErrDiskFull = errors.New("client: broker disk full")
	// ErrUnimplemented: the server does not implement the call.
	ErrUnimplemented = errors.New("client: not implemented by the server")
	// ErrInternal: any other server error (UNKNOWN, INTERNAL, ABORTED, ...).
	ErrInternal = errors.New("client: server error")
	// ErrNoQueue: the topic's route has no queue to write (or read).
	ErrNoQueue = errors.New("client: no queue")
	// ErrNotMaster: the broker is a slave (FAILED_PRECONDITION "not
	// master"), or became one after a failover. Nothing was stored; the
	// client reads the topic's route again at once, and a Producer retries
	// on the master it names.
	ErrNotMaster = errors.New("client: broker is not the master")
	// ErrAlreadyExists: what a call creates exists already (a user, a
	// user's rule on a resource: ALREADY_EXISTS).
	ErrAlreadyExists = errors.New("client: already exists")
	// ErrBacklogFull: the queue holds its topic's queue.max.backlog
	// messages not yet consumed, and the topic refuses sends when full
	// (queue.max.policy refuse; RESOURCE_EXHAUSTED "queue backlog full").
	// Nothing was stored; not retried: consume the queue or raise the
	// limit (docs/BROKER.md, "Retention, limits and TTL").
	ErrBacklogFull = errors.New("client: queue backlog full")
)

// StatusError is an error answered by a server (or by the gRPC transport on
// the way to it), with the operation and the server's address. It unwraps
// to the sentinel of its code (ErrUnavailable, ErrInvalidArgument, ...), and
// to context.DeadlineExceeded or context.Canceled for those codes;
// status.Code and status.FromError see its gRPC status.
type StatusError struct {
	// Op is the call: "send", "pull", "route", "create topic", ...
	Op string
	// Addr is the gRPC address of the broker or nameserver.
	Addr string
	// Code and Message are the gRPC status.
	Code    codes.Code
	Message string

	kind error
	st   *status.Status
}

// Error returns "client: <op> <addr>: <code>: <message>".
func (e *StatusError) Error() string {
	return fmt.Sprintf("client: %s %s: %s: %s", e.Op, e.Addr, e.Code, e.Message)
}

// Unwrap returns the sentinel of the code, and the context error for
// DEADLINE_EXCEEDED and CANCELED.
func (e *StatusError) Unwrap() []error {
	switch e.Code {
	case codes.DeadlineExceeded:
		return []error{context.DeadlineExceeded}
	case codes.Canceled:
		return []error{context.Canceled}
	}
	return []error{e.kind}
}

// GRPCStatus returns the status the server answered.
func (e *StatusError) GRPCStatus() *status.Status { return e.st }

// IndeterminateError says that a send may or may not have stored its
// messages: the broker said so (a flush or replica timeout), or the
// connection was lost or the deadline passed after the request was written.
// Match it with errors.As; Err is the cause (usually a *StatusError).
//
// To learn what happened, look each of UniqKeys up in Queue.Topic with
// Admin.QueryMessageByUniqKey(ctx, e.Queue.Topic, key): a message found
// was stored (in Queue, unless a retry went elsewhere); one not found was
// not stored yet, and may be sent again. A Producer does not retry an
// indeterminate send unless WithRetryIndeterminate(true); then the
// broker's de-duplication (on by default: duplicationWindow, 5 minutes)
// keeps a retry of a stored send from storing it twice.
type IndeterminateError struct {
	// Broker is the gRPC address of the broker the request went to.
	Broker string
	// Queue is the queue the request went to; Queue.Topic is the topic.
	// It is set by a Producer for every send (zero only for an error made
	// outside a send).
	Queue Queue
	// UniqKeys are the client message ids (UNIQ_KEY, SendResult.UniqKey)
	// of the send's messages, in the order they were given.
	UniqKeys []string
	// Err is the cause.
	Err error
}

// Error says the send may have been stored, why, and how to check.
func (e *IndeterminateError) Error() string {
	if e.Queue.Topic == "" {
		return fmt.Sprintf("client: send to %s is indeterminate (the messages may have been stored): %v", e.Broker, e.Err)
	}
	if len(e.UniqKeys) == 1 {
		return fmt.Sprintf("client: send of message %s to %s (%s) is indeterminate (it may have been stored): %v; "+
			"check with Admin.QueryMessageByUniqKey(ctx, %q, %q)", e.UniqKeys[0], e.Queue, e.Broker, e.Err, e.Queue.Topic, e.UniqKeys[0])
	}
	return fmt.Sprintf("client: send of %d messages to %s (%s) is indeterminate (they may have been stored): %v; "+
		"check each of IndeterminateError.UniqKeys with Admin.QueryMessageByUniqKey(ctx, %q, key)", len(e.UniqKeys), e.Queue, e.Broker, e.Err, e.Queue.Topic)
}

// Unwrap returns the cause.
func (e *IndeterminateError) Unwrap() error { return e.Err }

// indeterminateOf returns err, and if it is an *IndeterminateError, a copy
// naming the queue and the client message ids of the send it ended (the
// error itself may be shared by the sends of one request).
func indeterminateOf(err error, q Queue, uniq []string) error {
	ind, ok := err.(*IndeterminateError)
	if !ok {
		return err
	}
	c := *ind
	c.Queue, c.UniqKeys = q, slices.Clone(uniq)
	return &c
}

// IsRetryable reports whether a send that failed with err may be tried
// again: only definite, transient failures are. That is
// UNAVAILABLE when the request was not sent (the connection was refused,
// the broker was not ready), disk full (on another broker only) and topic
// not found (once, after refreshing the route). Invalid input, missing
// permissions, closed clients, context errors and indeterminate errors are
// not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var ind *IndeterminateError
	if errors.As(err, &ind) || errors.Is(err, ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDiskFull) || errors.Is(err, ErrTopicNotFound) ||
		errors.Is(err, ErrNotMaster)
}

// kindOf maps a gRPC code to the sentinel its StatusError unwraps to.
// notFound is what NOT_FOUND means for the call.
func kindOf(c codes.Code, notFound error) error {
	switch c {
	case codes.NotFound:
		return notFound
	case codes.InvalidArgument, codes.OutOfRange:
		return ErrInvalidArgument
	case codes.PermissionDenied, codes.Unauthenticated:
		return ErrNoPermission
	case codes.Unavailable:
		return ErrUnavailable
	case codes.ResourceExhausted:
		return ErrDiskFull
	case codes.Unimplemented:
		return ErrUnimplemented
	case codes.AlreadyExists:
		return ErrAlreadyExists
	}
	return ErrInternal
}

// newStatusError builds the StatusError of a status.
// A RESOURCE_EXHAUSTED that grpc-go itself raises for a message over its
// size limit is invalid input, not a full disk.
func newStatusError(op, addr string, st *status.Status, notFound error) *StatusError {
	kind := kindOf(st.Code(), notFound)
	switch {
	case st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max"):
		kind = ErrInvalidArgument
	case st.Code() == codes.FailedPrecondition && strings.Contains(st.Message(), "not master"): // docs/REPLICATION.md
		kind = ErrNotMaster
	case st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "queue backlog full"): // docs/BROKER.md
		kind = ErrBacklogFull
	}
	return &StatusError{Op: op, Addr: addr, Code: st.Code(), Message: st.Message(), kind: kind, st: st}
}

// callError converts the error of a call other than a send: a gRPC status
// becomes a *StatusError; nil stays nil. notFound is the sentinel for
// NOT_FOUND (ErrTopicNotFound or ErrNotFound).
func callError(op, addr string, err error, notFound error) error {
	if err == nil {
		return nil
	}
	return newStatusError(op, addr, status.Convert(err), notFound)
}

// streamError converts the error a broker answered on SendStream.
func streamError(addr string, e *gantryv1.Error) error {
	code := codes.Code(e.GetCode())
	if code == codes.OK {
		code = codes.Unknown
	}
	se := newStatusError("send", addr, status.New(code, e.GetMessage()), ErrTopicNotFound)
	if e.GetIndeterminate() {
		return &IndeterminateError{Broker: addr, Err: se}
	}
	return se
}

// unarySendError converts the error of a unary Send. The broker marks every
// send error with an ErrorInfo detail (see errorInfoIndeterminate), which
// decides. Without one the error came from the transport, which does not say
// whether the request was written: a failure to connect ("connection
// error", "Error while dialing") is definite, and any other UNAVAILABLE,
// DEADLINE_EXCEEDED, CANCELED, UNKNOWN, INTERNAL, ABORTED or DATA_LOSS is
// indeterminate.
func unarySendError(addr string, err error) error {
	st := status.Convert(err)
	se := newStatusError("send", addr, st, ErrTopicNotFound)
	if ind, ok := errorInfoIndeterminate(st); ok {
		if ind {
			return &IndeterminateError{Broker: addr, Err: se}
		}
		return se
	}
	switch st.Code() {
	case codes.Unavailable:
		if notConnected(st.Message()) {
			return se
		}
	case codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal, codes.Aborted, codes.DataLoss:
	default:
		return se
	}
	return &IndeterminateError{Broker: addr, Err: se}
}

// notConnected recognises grpc-go's messages for an RPC that failed before
// a connection existed, so before anything was written.
func notConnected(msg string) bool {
	return strings.Contains(msg, "connection error") || strings.Contains(msg, "Error while dialing") ||
		strings.Contains(msg, "connection refused")
}

// errorInfoTypeURL is the type of google.rpc.ErrorInfo in an Any.
const errorInfoTypeURL = "type.googleapis.com/google.rpc.ErrorInfo"

// errorInfoIndeterminate reads the google.rpc.ErrorInfo detail of a status.
// The broker marks an indeterminate error with an ErrorInfo whose reason is
// "INDETERMINATE" or whose metadata has indeterminate=true; any other
// ErrorInfo marks a definite error. ok is false when there is no ErrorInfo.
// The detail is parsed with protowire so the client needs no genproto
// dependency.
func errorInfoIndeterminate(st *status.Status) (indeterminate, ok bool) {
	for _, d := range st.Proto().GetDetails() {
		if d.GetTypeUrl() != errorInfoTypeURL {
			continue
		}
		reason, md := parseErrorInfo(d.GetValue())
		return strings.EqualFold(reason, "INDETERMINATE") || strings.EqualFold(md["indeterminate"], "true"), true
	}
	return false, false
}

// parseErrorInfo decodes ErrorInfo{reason = 1; domain = 2; map<string,
// string> metadata = 3}, skipping what it does not know or cannot parse.
func parseErrorInfo(b []byte) (reason string, md map[string]string) {
	md = map[string]string{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return reason, md
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return reason, md
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return reason, md
		}
		b = b[n:]
		switch num {
		case 1:
			reason = string(v)
		case 3:
			k, val := parseMapEntry(v)
			md[k] = val
		}
	}
	return reason, md
}

// parseMapEntry decodes a map<string, string> entry {key = 1; value = 2}.
func parseMapEntry(b []byte) (key, value string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return key, value
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return key, value
		}
		b = b[n+m:]
		if num == 1 {
			key = string(v)
		} else if num == 2 {
			value = string(v)
		}
	}
	return key, value
}
