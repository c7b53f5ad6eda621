package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// groupCall runs a call answering a group at the leader.
func (c *Client) groupCall(ctx context.Context, call func(context.Context, gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error)) (GroupStatus, error) {
	resp, err := invoke(ctx, c, call)
	if err != nil {
		return GroupStatus{}, err
	}
	return GroupFromProto(resp.GetGroup(), time.Now()), nil
}

// RegisterBroker registers a broker of a group: its HA address and,
// optionally, its service (gRPC) address.
func (c *Client) RegisterBroker(ctx context.Context, group string, id int64, haAddr, serviceAddr string) (GroupStatus, error) {
	req := &gantryv1.ControllerRegisterBrokerRequest{Group: group, BrokerId: id, HaAddr: haAddr, ServiceAddr: serviceAddr}
	return c.groupCall(ctx, func(ctx context.Context, s gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error) {
		return s.RegisterBroker(ctx, req)
	})
}

// BrokerReport is what a broker reports in a heartbeat.
type BrokerReport struct {
	Group          string
	BrokerID       int64
	MasterEpoch    int32 // the master epoch it follows or leads
	LogEnd         int64 // its commit log's end
	LastEpoch      int32 // its epoch file's last entry
	LastEpochStart int64
}

// BrokerHeartbeat sends a broker's heartbeat; the answer tells it its
// group's master and in-sync set.
func (c *Client) BrokerHeartbeat(ctx context.Context, hb BrokerReport) (GroupStatus, error) {
	req := &gantryv1.BrokerHeartbeatRequest{Group: hb.Group, BrokerId: hb.BrokerID, MasterEpoch: hb.MasterEpoch,
		LogEndOffset: hb.LogEnd, LastEpoch: hb.LastEpoch, LastEpochStartOffset: hb.LastEpochStart}
	return c.groupCall(ctx, func(ctx context.Context, s gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error) {
		return s.BrokerHeartbeat(ctx, req)
	})
}

// AlterSyncStateSet replaces a group's in-sync set on behalf of its master
// (the epochs are those the master knows). A retry after an answer lost
// on the way fails with ErrStaleEpoch: read the group again.
func (c *Client) AlterSyncStateSet(ctx context.Context, group string, masterID int64, masterEpoch, inSyncEpoch int32, set []int64) (GroupStatus, error) {
	req := &gantryv1.AlterSyncStateSetRequest{Group: group, MasterId: masterID, MasterEpoch: masterEpoch,
		SyncStateSetEpoch: inSyncEpoch, SyncStateSet: set}
	return c.groupCall(ctx, func(ctx context.Context, s gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error) {
		return s.AlterSyncStateSet(ctx, req)
	})
}

// ElectMaster elects a group's master: preferred if non-zero, else the
// controller's choice when the master is dead.
func (c *Client) ElectMaster(ctx context.Context, group string, preferred int64, unclean bool) (GroupStatus, error) {
	req := &gantryv1.ElectMasterRequest{Group: group, PreferredBrokerId: preferred, Unclean: unclean}
	return c.groupCall(ctx, func(ctx context.Context, s gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error) {
		return s.ElectMaster(ctx, req)
	})
}

// GetGroup returns a group's state, read on the leader after every
// command committed before the call.
func (c *Client) GetGroup(ctx context.Context, group string) (GroupStatus, error) {
	req := &gantryv1.GetBrokerGroupRequest{Group: group}
	return c.groupCall(ctx, func(ctx context.Context, s gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error) {
		return s.GetGroup(ctx, req)
	})
}

// GetSyncStateSet is GetGroup under RocketMQ's name.
func (c *Client) GetSyncStateSet(ctx context.Context, group string) (GroupStatus, error) {
	req := &gantryv1.GetBrokerGroupRequest{Group: group}
	return c.groupCall(ctx, func(ctx context.Context, s gantryv1.ControllerClient) (*gantryv1.BrokerGroupResponse, error) {
		return s.GetSyncStateSet(ctx, req)
	})
}

// MemberStatus is one controller member as the client saw it.
type MemberStatus struct {
	ID, RaftAddr, GRPCAddr string
	// What the member said of itself; Err when it did not answer.
	State               string // Leader, Follower, Candidate, Shutdown
	Term                uint64
	LastIndex, Applied  uint64
	LeaderID, LeaderRPC string // the leader it knows of
	Err                 error
}

// maxMembers bounds the controller group a member's answer may describe
// (the client asks each of them).
const maxMembers = 16

// Metadata asks every member (those the answers list, and Addrs) about
// itself, at once, and returns them in the order of the group's
// configuration, and the leader's id ("" when no member says it leads).
func (c *Client) Metadata(ctx context.Context) ([]MemberStatus, string, error) {
	type answer struct {
		resp *gantryv1.GetControllerMetadataResponse
		err  error
	}
	ask := func(addrs []string) map[string]answer {
		out := make(map[string]answer, len(addrs))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range addrs {
			wg.Go(func() {
				var an answer
				if s, err := c.stub(a); err != nil {
					an.err = err
				} else {
					actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
					an.resp, an.err = s.GetControllerMetadata(actx, &gantryv1.GetControllerMetadataRequest{})
					cancel()
				}
				mu.Lock()
				out[a] = an
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
	answers := ask(c.cfg.Addrs)
	// The members as the configuration of any that answered lists them.
	var members []MemberStatus
	for _, a := range c.cfg.Addrs {
		if an := answers[a]; an.err == nil {
			for _, m := range an.resp.GetMembers() {
				members = append(members, MemberStatus{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), GRPCAddr: m.GetGrpcAddr()})
			}
			break
		}
	}
	if len(members) > maxMembers {
		return nil, "", fmt.Errorf("controller: client: a member lists %d members, at most %d", len(members), maxMembers)
	}
	if members == nil {
		var errs []error
		for _, a := range c.cfg.Addrs {
			errs = append(errs, fmt.Errorf("%s: %w", a, answers[a].err))
		}
		return nil, "", fmt.Errorf("controller: client: no controller answered: %w", errors.Join(errs...))
	}
	var missing []string
	for _, m := range members {
		if _, ok := answers[m.GRPCAddr]; !ok && m.GRPCAddr != "" {
			missing = append(missing, m.GRPCAddr)
		}
	}
	for a, an := range ask(missing) {
		answers[a] = an
	}
	leader := ""
	for i := range members {
		m := &members[i]
		an, ok := answers[m.GRPCAddr]
		switch {
		case !ok:
			m.Err = errors.New("no gRPC address configured")
		case an.err != nil:
			m.Err = FromStatus(an.err)
		default:
			r := an.resp
			m.State, m.Term, m.LastIndex, m.Applied = r.GetSelfState(), r.GetTerm(), r.GetLastLogIndex(), r.GetAppliedIndex()
			m.LeaderID, m.LeaderRPC = r.GetLeaderId(), r.GetLeaderGrpcAddr()
			if m.State == "Leader" {
				leader = m.ID
			}
		}
	}
	return members, leader, nil
}
