package grpcapi

import (
	"context"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// HAReporter reads the broker's replication, which broker/server runs
// (docs/REPLICATION.md); HAStatus answers from it.
type HAReporter interface {
	HAReport() HAReport
}

// HAReport is a broker's replication state in plain values.
type HAReport struct {
	// LogEnd is this broker's commit log end.
	LogEnd int64
	// Slaves are a master's slaves; nil on a slave.
	Slaves []HASlave
	// Following says a slave knows its master's HA address; Follower is
	// then its follower's state.
	Following bool
	Follower  HAFollower
}

// HASlave is a slave as its master sees it.
type HASlave struct {
	ID        int64
	Addr      string // its connection's remote address
	Connected bool
	Acked     int64 // the log end it acknowledged last
}

// HAFollower is a slave's follower.
type HAFollower struct {
	MasterAddr    string // the master's HA address
	Connected     bool
	End           int64 // the replica's log end
	MasterEnd     int64 // the master's log end, as last heard
	MetaSnapshots int
	LastErr       error
	Stopped       bool
}

// HAStatus implements the service. Without a reporter (no replication
// wired) it answers the role and log end only.
func (s *Admin) HAStatus(ctx context.Context, _ *gantryv1.HAStatusRequest) (*gantryv1.HAStatusResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_HAStatus_FullMethodName); err != nil {
		return nil, err
	}
	resp := &gantryv1.HAStatusResponse{Role: s.b.Config().BrokerRole.String()}
	if s.ha == nil {
		resp.LogEnd = s.b.Status().MaxLogOffset
		return resp, nil
	}
	r := s.ha.HAReport()
	resp.LogEnd = r.LogEnd
	for _, sl := range r.Slaves {
		resp.Slaves = append(resp.Slaves, &gantryv1.HASlave{BrokerId: sl.ID, Address: sl.Addr, Connected: sl.Connected,
			AckedOffset: sl.Acked, LagBytes: max(0, r.LogEnd-sl.Acked)})
	}
	if r.Following {
		f := r.Follower
		resp.Following, resp.MasterHaAddress, resp.Connected = true, f.MasterAddr, f.Connected
		resp.MasterLogEnd, resp.LagBytes = f.MasterEnd, max(0, f.MasterEnd-f.End)
		resp.MetaSnapshots, resp.Stopped = int64(f.MetaSnapshots), f.Stopped
		if f.LastErr != nil {
			resp.LastError = f.LastErr.Error()
		}
	}
	return resp, nil
}
