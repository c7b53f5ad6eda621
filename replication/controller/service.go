package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth/grpcauth"
	periodic "github.com/gantrymq/gantry/internal/tick"
	"github.com/gantrymq/gantry/internal/tlsx"
)

// MaxRequestBytes is the largest request the service reads (gRPC refuses a
// larger one from its length prefix, unread); the largest legitimate one,
// an in-sync set of MaxReplicas ids with a group name, is far smaller.
const MaxRequestBytes = 64 << 10

// ErrInvalidRequest is wrapped by the service's refusal of a request that
// breaks the API's rules (a missing or oversized field).
var ErrInvalidRequest = errors.New("controller: invalid request")

// Service serves the Controller gRPC API (api/gantry/v1/controller.proto)
// on one member. On the leader it also keeps the brokers' liveness:
// heartbeats in memory, a broker silent for BrokerTimeout marked dead, and
// a group without a live master given one by election
// (docs/REPLICATION.md, "Controller service").
type Service struct {
	gantryv1.UnimplementedControllerServer

	c    *Controller
	cfg  Config
	log  *slog.Logger
	gs   *grpc.Server
	live liveness
	// refuser answers plaintext gRPC clients with RequireTLS; nil without.
	refuser *grpc.Server

	stop  context.CancelFunc
	wg    sync.WaitGroup
	once  sync.Once
	scans atomic.Uint64 // scans completed, for tests
	// stuck holds the groups the scan found without a master to elect,
	// so it warns once per group; the scan goroutine's own.
	stuck map[string]bool
}

// NewService makes the service of member c and starts its liveness scan.
// c's Config must name the gRPC addresses (GRPCAddr, each peer's).
// Serve it with Serve; Close stops it (not c, which the caller closes after).
// opts are added after a receive limit of MaxRequestBytes and, with
// c's Config.Guard, the calls' authentication.
func NewService(c *Controller, opts ...grpc.ServerOption) (*Service, error) {
	if c.cfg.GRPCAddr == "" {
		return nil, errors.New("controller: service: Config.GRPCAddr is empty")
	}
	opts = append(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRequestBytes)}, grpcauth.ServerOptions(c.cfg.Guard, methodClass)...), opts...)
	if c.cfg.TLS != nil { // the listeners terminate TLS: the credentials only tell which connections had it
		opts = append([]grpc.ServerOption{grpc.Creds(tlsx.TerminatedCredentials())}, opts...)
	}
	s := &Service{c: c, cfg: c.cfg, log: c.cfg.Logger.With("component", "controller-service"), gs: grpc.NewServer(opts...),
		stuck: make(map[string]bool)}
	if c.cfg.RequireTLS {
		s.refuser = newTLSRefuser()
	}
	gantryv1.RegisterControllerServer(s.gs, s)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Go(func() { periodic.Every(ctx, s.cfg.ScanInterval, func() { s.scan(ctx) }) })
	return s, nil
}

// Serve answers on lis until Close, then returns nil. With Config.TLS it
// serves TLS too (tls.go).
func (s *Service) Serve(lis net.Listener) error {
	if s.cfg.TLS != nil {
		return s.serveTLS(lis)
	}
	if err := s.gs.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("controller: serve: %w", err)
	}
	return nil
}

// Close stops the scan and the gRPC server: calls in progress finish
// until ctx ends, then are cut. Safe to call twice.
func (s *Service) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.stop()
		s.wg.Wait()
		done := make(chan struct{})
		go func() { s.gs.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.gs.Stop()
			<-done
		}
		if s.refuser != nil {
			s.refuser.Stop()
		}
	})
	return nil
}

// now is the service's clock.
func (s *Service) now() time.Time { return s.cfg.Now() }

// RegisterBroker implements the Controller service.
func (s *Service) RegisterBroker(ctx context.Context, req *gantryv1.ControllerRegisterBrokerRequest) (*gantryv1.BrokerGroupResponse, error) {
	if err := errors.Join(checkGroupName(req.GetGroup()), checkBrokerID(req.GetBrokerId()),
		checkAddr("ha_addr", req.GetHaAddr(), true), checkAddr("service_addr", req.GetServiceAddr(), false)); err != nil {
		return nil, s.status(err)
	}
	g, err := s.c.Register(ctx, RegisterReplica{Group: req.Group, ID: req.BrokerId, Addr: req.HaAddr, ServiceAddr: req.ServiceAddr})
	if err != nil {
		return nil, s.status(err)
	}
	if term, ok := s.c.leaderTerm(); ok {
		s.live.touch(term, replicaKey{req.Group, req.BrokerId}, s.now(), nil)
	}
	return s.answer(g), nil
}

// BrokerHeartbeat implements the Controller service. A heartbeat of a
// broker marked dead revives it (a RegisterReplica of its addresses).
func (s *Service) BrokerHeartbeat(ctx context.Context, req *gantryv1.BrokerHeartbeatRequest) (*gantryv1.BrokerGroupResponse, error) {
	err := errors.Join(checkGroupName(req.GetGroup()), checkBrokerID(req.GetBrokerId()))
	if req.GetMasterEpoch() < 0 || req.GetLastEpoch() < 0 || req.GetLogEndOffset() < 0 || req.GetLastEpochStartOffset() < 0 {
		err = errors.Join(err, fmt.Errorf("%w: negative epoch or offset (master epoch %d, log end %d, last epoch %d at %d)", ErrInvalidRequest,
			req.GetMasterEpoch(), req.GetLogEndOffset(), req.GetLastEpoch(), req.GetLastEpochStartOffset()))
	}
	if err != nil {
		return nil, s.status(err)
	}
	term, ok := s.c.leaderTerm()
	if !ok {
		return nil, s.status(s.c.notLeader(false))
	}
	g, ok := s.c.Group(req.Group)
	if !ok {
		return nil, s.status(fmt.Errorf("%w: %q (register the broker first)", ErrUnknownGroup, req.Group))
	}
	r, ok := g.Replica(req.BrokerId)
	if !ok {
		return nil, s.status(fmt.Errorf("%w: group %q: replica %d (register it first)", ErrUnknownReplica, req.Group, req.BrokerId))
	}
	s.live.touch(term, replicaKey{req.Group, req.BrokerId}, s.now(), &Heartbeat{
		MasterEpoch: req.MasterEpoch, LogEnd: req.LogEndOffset, LastEpoch: req.LastEpoch, LastEpochStart: req.LastEpochStartOffset,
	})
	if !r.Alive {
		s.log.Info("a broker marked dead heartbeats again: alive", "group", req.Group, "broker", req.BrokerId)
		if g, err = s.c.Register(ctx, RegisterReplica{Group: req.Group, ID: r.ID, Addr: r.Addr, ServiceAddr: r.ServiceAddr}); err != nil {
			return nil, s.status(err)
		}
	}
	return s.answer(g), nil
}

// AlterSyncStateSet implements the Controller service.
func (s *Service) AlterSyncStateSet(ctx context.Context, req *gantryv1.AlterSyncStateSetRequest) (*gantryv1.BrokerGroupResponse, error) {
	err := errors.Join(checkGroupName(req.GetGroup()), checkBrokerID(req.GetMasterId()))
	if n := len(req.GetSyncStateSet()); n == 0 || n > MaxReplicas {
		err = errors.Join(err, fmt.Errorf("%w: sync_state_set of %d ids, want 1..%d", ErrInvalidRequest, n, MaxReplicas))
	}
	if err != nil {
		return nil, s.status(err)
	}
	g, err := s.c.AlterInSync(ctx, AlterInSync{Group: req.Group, MasterID: req.MasterId, MasterEpoch: req.MasterEpoch,
		InSyncEpoch: req.SyncStateSetEpoch, InSync: req.SyncStateSet})
	if err != nil {
		return nil, s.status(err)
	}
	return s.answer(g), nil
}

// ElectMaster implements the Controller service: the preferred broker, or
// the election policy's choice (pickMaster) when the master is dead.
func (s *Service) ElectMaster(ctx context.Context, req *gantryv1.ElectMasterRequest) (*gantryv1.BrokerGroupResponse, error) {
	err := checkGroupName(req.GetGroup())
	if req.GetPreferredBrokerId() < 0 {
		err = errors.Join(err, fmt.Errorf("%w: preferred_broker_id %d, want ≥ 0", ErrInvalidRequest, req.PreferredBrokerId))
	}
	if err != nil {
		return nil, s.status(err)
	}
	cmd := ElectMaster{Group: req.Group, Candidate: req.PreferredBrokerId, Unclean: req.Unclean}
	if cmd.Candidate == 0 {
		if _, ok := s.c.leaderTerm(); !ok {
			return nil, s.status(s.c.notLeader(false))
		}
		if g, ok := s.c.Group(req.Group); ok && !masterAlive(g) {
			cmd.Candidate, _ = pickMaster(g, s.live.group(g.Name, replicaIDs(g)), req.Unclean)
		}
	}
	g, err := s.c.ElectMaster(ctx, cmd)
	if err != nil {
		return nil, s.status(err)
	}
	if cmd.Candidate != 0 {
		s.log.Info("master elected on request", "group", g.Name, "master", g.MasterID, "epoch", g.MasterEpoch, "unclean", req.Unclean)
	}
	return s.answer(g), nil
}

// GetSyncStateSet implements the Controller service.
func (s *Service) GetSyncStateSet(ctx context.Context, req *gantryv1.GetBrokerGroupRequest) (*gantryv1.BrokerGroupResponse, error) {
	return s.getGroup(ctx, req)
}

// GetGroup implements the Controller service.
func (s *Service) GetGroup(ctx context.Context, req *gantryv1.GetBrokerGroupRequest) (*gantryv1.BrokerGroupResponse, error) {
	return s.getGroup(ctx, req)
}

func (s *Service) getGroup(ctx context.Context, req *gantryv1.GetBrokerGroupRequest) (*gantryv1.BrokerGroupResponse, error) {
	if err := checkGroupName(req.GetGroup()); err != nil {
		return nil, s.status(err)
	}
	g, ok, err := s.c.LeaderGroup(ctx, req.Group)
	if err != nil {
		return nil, s.status(err)
	}
	if !ok {
		return nil, s.status(fmt.Errorf("%w: %q", ErrUnknownGroup, req.Group))
	}
	return s.answer(g), nil
}

// GetControllerMetadata implements the Controller service; any member
// answers, for itself.
func (s *Service) GetControllerMetadata(context.Context, *gantryv1.GetControllerMetadataRequest) (*gantryv1.GetControllerMetadataResponse, error) {
	resp := &gantryv1.GetControllerMetadataResponse{
		SelfId:       s.cfg.ID,
		SelfState:    s.c.raft.State().String(),
		Term:         s.c.raft.CurrentTerm(),
		LastLogIndex: s.c.raft.LastIndex(),
		AppliedIndex: s.c.raft.AppliedIndex(),
	}
	for _, p := range s.cfg.Peers {
		resp.Members = append(resp.Members, &gantryv1.ControllerMember{Id: p.ID, RaftAddr: p.Addr, GrpcAddr: p.GRPCAddr})
	}
	resp.LeaderId, _ = s.c.Leader()
	resp.LeaderGrpcAddr = s.grpcAddrOf(resp.LeaderId)
	return resp, nil
}

// grpcAddrOf is a member's configured gRPC address ("" if unknown).
func (s *Service) grpcAddrOf(id string) string {
	for _, p := range s.cfg.Peers {
		if p.ID == id && id != "" {
			return p.GRPCAddr
		}
	}
	return ""
}

// answer is the response carrying g, with the brokers' heartbeats this
// member holds as the leader.
func (s *Service) answer(g GroupState) *gantryv1.BrokerGroupResponse {
	return &gantryv1.BrokerGroupResponse{Group: groupToProto(g, s.live.group(g.Name, replicaIDs(g)), s.now())}
}

// scan is one pass of the leader's liveness check: brokers silent for
// BrokerTimeout are marked dead, and a group without a live master gets
// one by election.
func (s *Service) scan(ctx context.Context) {
	defer s.scans.Add(1)
	term, leading := s.c.leaderTerm()
	now := s.now()
	if s.live.sync(term, leading, now) && leading {
		s.log.Info("leading: every broker has a full timeout to heartbeat", "term", term, "timeout", s.cfg.BrokerTimeout)
	}
	if !leading {
		return
	}
	for _, g := range s.c.Groups() {
		for _, r := range g.Replicas {
			if !r.Alive || now.Sub(s.live.lastHeard(replicaKey{g.Name, r.ID})) <= s.cfg.BrokerTimeout {
				continue
			}
			s.log.Warn("broker silent: marked dead", "group", g.Name, "broker", r.ID, "master", r.ID == g.MasterID, "timeout", s.cfg.BrokerTimeout)
			ng, err := s.c.ReplicaDead(ctx, ReplicaDead{Group: g.Name, ID: r.ID})
			if err != nil {
				s.log.Warn("mark broker dead", "group", g.Name, "broker", r.ID, "err", err)
				return
			}
			g = ng
		}
		if masterAlive(g) {
			continue
		}
		id, outside := pickMaster(g, s.live.group(g.Name, replicaIDs(g)), s.cfg.UncleanElection)
		if id == 0 {
			if !s.stuck[g.Name] && len(g.Replicas) > 0 {
				s.stuck[g.Name] = true
				s.log.Warn("group without a master: no alive broker may be elected", "group", g.Name,
					"in_sync", g.InSync, "unclean_election", s.cfg.UncleanElection)
			}
			continue
		}
		delete(s.stuck, g.Name)
		ng, err := s.c.ElectMaster(ctx, ElectMaster{Group: g.Name, Candidate: id, Unclean: outside})
		if err != nil {
			s.log.Warn("elect master", "group", g.Name, "candidate", id, "err", err)
			continue
		}
		s.log.Info("master elected", "group", g.Name, "master", ng.MasterID, "epoch", ng.MasterEpoch, "unclean", outside)
	}
}

func masterAlive(g GroupState) bool {
	r, ok := g.Replica(g.MasterID)
	return ok && g.MasterID != 0 && r.Alive
}

func replicaIDs(g GroupState) []int64 {
	ids := make([]int64, len(g.Replicas))
	for i, r := range g.Replicas {
		ids[i] = r.ID
	}
	return ids
}

func checkGroupName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: group name of %d bytes, want 1..%d", ErrInvalidRequest, len(name), MaxNameLen)
	}
	return nil
}

func checkBrokerID(id int64) error {
	if id <= 0 {
		return fmt.Errorf("%w: broker id %d, want > 0", ErrInvalidRequest, id)
	}
	return nil
}

func checkAddr(field, addr string, required bool) error {
	if (required && addr == "") || len(addr) > MaxAddrLen {
		return fmt.Errorf("%w: %s of %d bytes, want %d..%d", ErrInvalidRequest, field, len(addr), map[bool]int{true: 1}[required], MaxAddrLen)
	}
	return nil
}

func groupToProto(g GroupState, beats map[int64]Heartbeat, now time.Time) *gantryv1.BrokerGroup {
	out := &gantryv1.BrokerGroup{
		Group: g.Name, MasterId: g.MasterID, MasterEpoch: g.MasterEpoch,
		SyncStateSet: g.InSync, SyncStateSetEpoch: g.InSyncEpoch,
	}
	for _, r := range g.Replicas {
		pr := &gantryv1.BrokerReplica{BrokerId: r.ID, HaAddr: r.Addr, ServiceAddr: r.ServiceAddr, Alive: r.Alive}
		if hb, ok := beats[r.ID]; ok {
			pr.HasHeartbeat, pr.HeartbeatAgeMs = true, max(now.Sub(hb.At), 0).Milliseconds()
			pr.MasterEpoch, pr.LogEndOffset, pr.LastEpoch, pr.LastEpochStartOffset = hb.MasterEpoch, hb.LogEnd, hb.LastEpoch, hb.LastEpochStart
		}
		if r.ID == g.MasterID {
			out.MasterHaAddr, out.MasterServiceAddr = r.Addr, r.ServiceAddr
		}
		out.Replicas = append(out.Replicas, pr)
	}
	return out
}
