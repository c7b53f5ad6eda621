package controller

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// ErrorDomain is the domain of the ErrorInfo detail of the service's
// errors; its reason names the error (see reasons).
const ErrorDomain = "gantrymq.io"

// ReasonNotLeader is the ErrorInfo reason of a call that reached a member
// other than the leader; metadata "leader_id" and "leader_addr" (the
// leader's gRPC address) name the leader, empty while none is known.
const ReasonNotLeader = "NOT_LEADER"

// reasons maps the controller's errors to a gRPC code and the ErrorInfo
// reason that carries them over the wire, in the order they are matched.
var reasons = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrNotLeader, codes.Unavailable, ReasonNotLeader},
	{ErrClosed, codes.Unavailable, "CLOSED"},
	{ErrInvalidRequest, codes.InvalidArgument, "INVALID_REQUEST"},
	{ErrBadCommand, codes.InvalidArgument, "BAD_COMMAND"},
	{ErrUnsupportedVersion, codes.FailedPrecondition, "UNSUPPORTED_VERSION"},
	{ErrUnknownGroup, codes.NotFound, "UNKNOWN_GROUP"},
	{ErrUnknownReplica, codes.NotFound, "UNKNOWN_REPLICA"},
	{ErrReplicaDead, codes.FailedPrecondition, "REPLICA_DEAD"},
	{ErrNotMaster, codes.FailedPrecondition, "NOT_MASTER"},
	{ErrStaleEpoch, codes.FailedPrecondition, "STALE_EPOCH"},
	{ErrNotInSync, codes.FailedPrecondition, "NOT_IN_SYNC"},
	{ErrNoCandidate, codes.FailedPrecondition, "NO_CANDIDATE"},
	{ErrLimit, codes.ResourceExhausted, "LIMIT"},
}

// status turns an error of the controller into a gRPC status error with
// an ErrorInfo naming it.
func (s *Service) status(err error) error {
	code, reason := codes.Internal, "INTERNAL"
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code, reason = status.FromContextError(err).Code(), "OUTCOME_UNKNOWN"
	default:
		for _, r := range reasons {
			if errors.Is(err, r.err) {
				code, reason = r.code, r.reason
				break
			}
		}
	}
	info := &errdetails.ErrorInfo{Domain: ErrorDomain, Reason: reason}
	if nl := (*NotLeaderError)(nil); errors.As(err, &nl) {
		info.Metadata = map[string]string{
			"leader_id":        nl.LeaderID,
			"leader_addr":      s.grpcAddrOf(nl.LeaderID),
			"may_have_applied": strconv.FormatBool(nl.MayHaveApplied),
		}
		// The message names the gRPC address, which the client dials, not raft's.
		err = &NotLeaderError{LeaderID: nl.LeaderID, LeaderAddr: info.Metadata["leader_addr"], MayHaveApplied: nl.MayHaveApplied}
	}
	st := status.New(code, err.Error())
	if d, derr := st.WithDetails(info); derr == nil {
		st = d
	}
	return st.Err()
}

// RemoteError is a controller error received over gRPC: errors.Is matches
// the controller's Err value its reason names, and status.FromError reads
// its gRPC status.
type RemoteError struct {
	st  *status.Status
	err error // the Err value, nil when the reason is unknown
}

func (e *RemoteError) Error() string              { return e.st.Message() }
func (e *RemoteError) Unwrap() error              { return e.err }
func (e *RemoteError) GRPCStatus() *status.Status { return e.st }

// FromStatus turns an error of a Controller call back into the
// controller's: a *NotLeaderError (LeaderAddr the leader's gRPC address)
// for NOT_LEADER, a *RemoteError matching the Err value its ErrorInfo
// names, or err itself (a transport failure, a context's end).
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok && i.Domain == ErrorDomain {
			info = i
		}
	}
	if info == nil {
		return err
	}
	if info.Reason == ReasonNotLeader {
		return &NotLeaderError{LeaderID: info.Metadata["leader_id"], LeaderAddr: info.Metadata["leader_addr"],
			MayHaveApplied: info.Metadata["may_have_applied"] == "true"}
	}
	for _, r := range reasons {
		if r.reason == info.Reason {
			return &RemoteError{st: st, err: r.err}
		}
	}
	return &RemoteError{st: st}
}

// GroupStatus is a group's state as the leader answers it: the replicated
// state and the heartbeats the leader holds (by broker id).
type GroupStatus struct {
	GroupState
	Heartbeats map[int64]Heartbeat
}

// GroupFromProto reads a group of a Controller answer; a heartbeat's At is
// now less its age.
func GroupFromProto(p *gantryv1.BrokerGroup, now time.Time) GroupStatus {
	g := GroupStatus{
		GroupState: GroupState{
			Name: p.GetGroup(), MasterID: p.GetMasterId(), MasterEpoch: p.GetMasterEpoch(),
			InSync: p.GetSyncStateSet(), InSyncEpoch: p.GetSyncStateSetEpoch(),
		},
		Heartbeats: make(map[int64]Heartbeat),
	}
	for _, r := range p.GetReplicas() {
		g.Replicas = append(g.Replicas, Replica{ID: r.GetBrokerId(), Addr: r.GetHaAddr(), ServiceAddr: r.GetServiceAddr(), Alive: r.GetAlive()})
		if r.GetHasHeartbeat() {
			g.Heartbeats[r.GetBrokerId()] = Heartbeat{
				At:          now.Add(-time.Duration(r.GetHeartbeatAgeMs()) * time.Millisecond),
				MasterEpoch: r.GetMasterEpoch(), LogEnd: r.GetLogEndOffset(),
				LastEpoch: r.GetLastEpoch(), LastEpochStart: r.GetLastEpochStartOffset(),
			}
		}
	}
	return g
}
