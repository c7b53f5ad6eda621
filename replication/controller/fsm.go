package controller

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// Limits every member checks the same way, so a command is refused (or
// applied) identically on all of them. See docs/REPLICATION.md, "Controller".
const (
	MaxGroups          = 4096     // broker groups the controller keeps
	MaxReplicas        = 16       // replicas in one group
	MaxNameLen         = 255      // bytes of a group name
	MaxAddrLen         = 255      // bytes of a replica's address
	maxCommandSize     = 64 << 10 // an encoded command, checked before decoding
	snapshotVersion    = 1
	commandVersion     = 1
	commandHeaderBytes = 2 // [version u8][kind u8]
)

// maxSnapshotSize bounds a snapshot, checked while reading it (a variable
// so a test can lower it).
var maxSnapshotSize = 64 << 20

// Errors of the state machine. Every refusal wraps one of them with the
// group, the replica and the values that made it fail.
var (
	ErrBadCommand         = errors.New("controller: malformed command")
	ErrUnsupportedVersion = errors.New("controller: unsupported command version")
	ErrUnknownGroup       = errors.New("controller: unknown broker group")
	ErrUnknownReplica     = errors.New("controller: unknown replica")
	ErrReplicaDead        = errors.New("controller: replica is dead")
	ErrNotMaster          = errors.New("controller: not the group's master")
	ErrStaleEpoch         = errors.New("controller: stale epoch")
	ErrNotInSync          = errors.New("controller: replica not in the in-sync set")
	ErrNoCandidate        = errors.New("controller: no replica can be elected")
	ErrLimit              = errors.New("controller: limit exceeded")
	ErrBadSnapshot        = errors.New("controller: malformed snapshot")
)

// Replica is one broker of a group as the controller knows it.
type Replica struct {
	ID   int64  `json:"id"`   // > 0, unique within the group
	Addr string `json:"addr"` // where the broker serves its replication port
	// ServiceAddr is where the broker serves clients (its gRPC address);
	// "" when it registered none.
	ServiceAddr string `json:"service_addr,omitempty"`
	Alive       bool   `json:"alive"`
}

// GroupState is one broker group: its replicas, its master and the in-sync
// set, each with its epoch. Values returned by the controller are copies.
type GroupState struct {
	Name        string    `json:"name"`
	Replicas    []Replica `json:"replicas"`     // sorted by ID
	MasterID    int64     `json:"master_id"`    // 0: no master
	MasterEpoch int32     `json:"master_epoch"` // bumped by every election; 0: never had a master
	InSync      []int64   `json:"in_sync"`      // sorted replica ids caught up with the master
	InSyncEpoch int32     `json:"in_sync_epoch"`
}

// Replica returns the replica with the id, if registered.
func (g GroupState) Replica(id int64) (Replica, bool) {
	i, ok := slices.BinarySearchFunc(g.Replicas, id, func(r Replica, id int64) int { return cmp.Compare(r.ID, id) })
	if !ok {
		return Replica{}, false
	}
	return g.Replicas[i], true
}

// MasterAddr is the master's address, or "" with no master.
func (g GroupState) MasterAddr() string {
	if r, ok := g.Replica(g.MasterID); ok && g.MasterID != 0 {
		return r.Addr
	}
	return ""
}

func (g GroupState) clone() GroupState {
	g.Replicas = slices.Clone(g.Replicas)
	g.InSync = slices.Clone(g.InSync)
	return g
}

func (g *GroupState) replicaIndex(id int64) (int, bool) {
	return slices.BinarySearchFunc(g.Replicas, id, func(r Replica, id int64) int { return cmp.Compare(r.ID, id) })
}

// Commands. Each is encoded as [version u8][kind u8][JSON body] in the raft
// log; a member refuses a version it does not know (upgrade every member
// before a leader writes a newer one).

// RegisterReplica adds a replica to a group (creating the group), or updates
// its addresses; either way the replica is alive afterwards.
type RegisterReplica struct {
	Group       string `json:"group"`
	ID          int64  `json:"id"`
	Addr        string `json:"addr"`                   // replication (HA) address
	ServiceAddr string `json:"service_addr,omitempty"` // client-facing address; optional
}

// AlterInSync replaces the in-sync set. Only the current master may send
// it, naming the epochs it knows; the in-sync epoch is bumped.
type AlterInSync struct {
	Group       string  `json:"group"`
	MasterID    int64   `json:"master_id"`
	MasterEpoch int32   `json:"master_epoch"`
	InSyncEpoch int32   `json:"in_sync_epoch"`
	InSync      []int64 `json:"in_sync"`
}

// ElectMaster elects a master: Candidate if non-zero, else the alive
// in-sync replica with the lowest id. With a live master and no candidate it
// changes nothing. Unclean lets a replica outside the in-sync set win (data
// the old master acknowledged may be lost).
type ElectMaster struct {
	Group     string `json:"group"`
	Candidate int64  `json:"candidate,omitempty"`
	Unclean   bool   `json:"unclean,omitempty"`
}

// ReplicaDead marks a replica dead; a dead master leaves the group without
// a master (the in-sync set is kept so an election can pick from it).
type ReplicaDead struct {
	Group string `json:"group"`
	ID    int64  `json:"id"`
}

type commandKind uint8

const (
	kindRegister commandKind = 1 + iota
	kindAlterInSync
	kindElect
	kindDead
)

// encodeCommand encodes one of the command types for the raft log.
func encodeCommand(cmd any) ([]byte, error) {
	var kind commandKind
	switch cmd.(type) {
	case RegisterReplica:
		kind = kindRegister
	case AlterInSync:
		kind = kindAlterInSync
	case ElectMaster:
		kind = kindElect
	case ReplicaDead:
		kind = kindDead
	default:
		return nil, fmt.Errorf("%w: type %T", ErrBadCommand, cmd)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if len(body)+commandHeaderBytes > maxCommandSize {
		return nil, fmt.Errorf("%w: command of %d bytes exceeds %d", ErrLimit, len(body)+commandHeaderBytes, maxCommandSize)
	}
	return append([]byte{commandVersion, byte(kind)}, body...), nil
}

func decodeCommand(b []byte) (any, error) {
	if len(b) > maxCommandSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrBadCommand, len(b), maxCommandSize)
	}
	if len(b) < commandHeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrBadCommand, len(b), commandHeaderBytes)
	}
	if b[0] != commandVersion {
		return nil, fmt.Errorf("%w: %d (this member knows %d)", ErrUnsupportedVersion, b[0], commandVersion)
	}
	body := b[commandHeaderBytes:]
	var (
		cmd any
		err error
	)
	switch commandKind(b[1]) {
	case kindRegister:
		var c RegisterReplica
		err = json.Unmarshal(body, &c)
		cmd = c
	case kindAlterInSync:
		var c AlterInSync
		err = json.Unmarshal(body, &c)
		cmd = c
	case kindElect:
		var c ElectMaster
		err = json.Unmarshal(body, &c)
		cmd = c
	case kindDead:
		var c ReplicaDead
		err = json.Unmarshal(body, &c)
		cmd = c
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrBadCommand, b[1])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: kind %d: %v", ErrBadCommand, b[1], err)
	}
	return cmd, nil
}

// FSM is the controller's replicated state machine: the broker groups. It
// is a raft.FSM; Apply returns a GroupState (the group after the command)
// or an error wrapping one of the Err values above. Reads may run
// concurrently with Apply.
type FSM struct {
	mu     sync.RWMutex
	groups map[string]*GroupState
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an empty state machine.
func NewFSM() *FSM { return &FSM{groups: make(map[string]*GroupState)} }

// Group returns a copy of the group's state.
func (f *FSM) Group(name string) (GroupState, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := f.groups[name]
	if !ok {
		return GroupState{}, false
	}
	return g.clone(), true
}

// Groups returns copies of all groups, sorted by name.
func (f *FSM) Groups() []GroupState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]GroupState, 0, len(f.groups))
	for _, g := range f.groups {
		out = append(out, g.clone())
	}
	slices.SortFunc(out, func(a, b GroupState) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := decodeCommand(l.Data)
	if err != nil {
		return err
	}
	return f.apply(cmd)
}

// apply runs one decoded command; it returns a GroupState or an error.
func (f *FSM) apply(cmd any) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var (
		g   *GroupState
		err error
	)
	switch c := cmd.(type) {
	case RegisterReplica:
		g, err = f.register(c)
	case AlterInSync:
		g, err = f.alterInSync(c)
	case ElectMaster:
		g, err = f.elect(c)
	case ReplicaDead:
		g, err = f.dead(c)
	default:
		err = fmt.Errorf("%w: type %T", ErrBadCommand, cmd)
	}
	if err != nil {
		return err
	}
	return g.clone()
}

func (f *FSM) group(name string) (*GroupState, error) {
	g, ok := f.groups[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, name)
	}
	return g, nil
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: group name of %d bytes, want 1..%d", ErrBadCommand, len(name), MaxNameLen)
	}
	return nil
}

func (f *FSM) register(c RegisterReplica) (*GroupState, error) {
	if err := checkName(c.Group); err != nil {
		return nil, err
	}
	if c.ID <= 0 {
		return nil, fmt.Errorf("%w: group %q: replica id %d, want > 0", ErrBadCommand, c.Group, c.ID)
	}
	if c.Addr == "" || len(c.Addr) > MaxAddrLen {
		return nil, fmt.Errorf("%w: group %q replica %d: address of %d bytes, want 1..%d", ErrBadCommand, c.Group, c.ID, len(c.Addr), MaxAddrLen)
	}
	if len(c.ServiceAddr) > MaxAddrLen {
		return nil, fmt.Errorf("%w: group %q replica %d: service address of %d bytes, at most %d", ErrBadCommand, c.Group, c.ID, len(c.ServiceAddr), MaxAddrLen)
	}
	g, ok := f.groups[c.Group]
	if !ok {
		if len(f.groups) >= MaxGroups {
			return nil, fmt.Errorf("%w: %d groups, cannot add %q", ErrLimit, MaxGroups, c.Group)
		}
		g = &GroupState{Name: c.Group}
		f.groups[c.Group] = g
	}
	i, found := g.replicaIndex(c.ID)
	if found {
		g.Replicas[i].Addr, g.Replicas[i].ServiceAddr, g.Replicas[i].Alive = c.Addr, c.ServiceAddr, true
		return g, nil
	}
	if len(g.Replicas) >= MaxReplicas {
		return nil, fmt.Errorf("%w: group %q has %d replicas, cannot add %d", ErrLimit, c.Group, MaxReplicas, c.ID)
	}
	g.Replicas = slices.Insert(g.Replicas, i, Replica{ID: c.ID, Addr: c.Addr, ServiceAddr: c.ServiceAddr, Alive: true})
	return g, nil
}

func (f *FSM) alterInSync(c AlterInSync) (*GroupState, error) {
	g, err := f.group(c.Group)
	if err != nil {
		return nil, err
	}
	if g.MasterID == 0 || c.MasterID != g.MasterID {
		return nil, fmt.Errorf("%w: group %q: replica %d asked, master is %d", ErrNotMaster, c.Group, c.MasterID, g.MasterID)
	}
	if c.MasterEpoch != g.MasterEpoch || c.InSyncEpoch != g.InSyncEpoch {
		return nil, fmt.Errorf("%w: group %q: request has master epoch %d, in-sync epoch %d; current are %d, %d",
			ErrStaleEpoch, c.Group, c.MasterEpoch, c.InSyncEpoch, g.MasterEpoch, g.InSyncEpoch)
	}
	if len(c.InSync) > MaxReplicas {
		return nil, fmt.Errorf("%w: group %q: in-sync set of %d, at most %d", ErrLimit, c.Group, len(c.InSync), MaxReplicas)
	}
	set := slices.Clone(c.InSync)
	slices.Sort(set)
	if len(slices.Compact(slices.Clone(set))) != len(set) {
		return nil, fmt.Errorf("%w: group %q: in-sync set %v repeats a replica", ErrBadCommand, c.Group, c.InSync)
	}
	if !slices.Contains(set, g.MasterID) {
		return nil, fmt.Errorf("%w: group %q: in-sync set %v must contain the master %d", ErrBadCommand, c.Group, c.InSync, g.MasterID)
	}
	for _, id := range set {
		r, ok := g.Replica(id)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: group %q: replica %d in the in-sync set", ErrUnknownReplica, c.Group, id)
		case !r.Alive:
			return nil, fmt.Errorf("%w: group %q: replica %d cannot join the in-sync set", ErrReplicaDead, c.Group, id)
		}
	}
	g.InSync = set
	g.InSyncEpoch++
	return g, nil
}

func (f *FSM) elect(c ElectMaster) (*GroupState, error) {
	g, err := f.group(c.Group)
	if err != nil {
		return nil, err
	}
	master, masterAlive := g.Replica(g.MasterID)
	masterAlive = masterAlive && master.Alive && g.MasterID != 0
	// A group that never had a master holds no acknowledged data: any alive
	// replica may start it.
	fresh := g.MasterEpoch == 0
	var winner int64
	if c.Candidate != 0 {
		r, ok := g.Replica(c.Candidate)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: group %q: candidate %d", ErrUnknownReplica, c.Group, c.Candidate)
		case !r.Alive:
			return nil, fmt.Errorf("%w: group %q: candidate %d cannot be elected", ErrReplicaDead, c.Group, c.Candidate)
		case c.Candidate == g.MasterID:
			return g, nil // already the master
		case !fresh && !c.Unclean && !slices.Contains(g.InSync, c.Candidate):
			return nil, fmt.Errorf("%w: group %q: candidate %d, in-sync set %v (an unclean election may pick it)",
				ErrNotInSync, c.Group, c.Candidate, g.InSync)
		}
		winner = c.Candidate
	} else {
		if masterAlive {
			return g, nil
		}
		winner = lowestAlive(g, func(id int64) bool { return fresh || slices.Contains(g.InSync, id) })
		if winner == 0 && c.Unclean {
			winner = lowestAlive(g, func(int64) bool { return true })
		}
		if winner == 0 {
			return nil, fmt.Errorf("%w: group %q: no alive replica in the in-sync set %v (unclean: %t)",
				ErrNoCandidate, c.Group, g.InSync, c.Unclean)
		}
	}
	g.MasterID = winner
	g.MasterEpoch++
	g.InSync = []int64{winner}
	g.InSyncEpoch++
	return g, nil
}

func lowestAlive(g *GroupState, eligible func(int64) bool) int64 {
	for _, r := range g.Replicas { // sorted by id
		if r.Alive && eligible(r.ID) {
			return r.ID
		}
	}
	return 0
}

func (f *FSM) dead(c ReplicaDead) (*GroupState, error) {
	g, err := f.group(c.Group)
	if err != nil {
		return nil, err
	}
	i, ok := g.replicaIndex(c.ID)
	if !ok {
		return nil, fmt.Errorf("%w: group %q: replica %d", ErrUnknownReplica, c.Group, c.ID)
	}
	g.Replicas[i].Alive = false
	if g.MasterID == c.ID {
		g.MasterID = 0
	}
	return g, nil
}

// snapshotFile is the encoded state.
type snapshotFile struct {
	Version int          `json:"version"`
	Groups  []GroupState `json:"groups"`
}

// Snapshot implements raft.FSM. It copies the state now (raft runs Persist
// on another goroutine while Apply goes on).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	b, err := json.Marshal(snapshotFile{Version: snapshotVersion, Groups: f.Groups()})
	if err != nil {
		return nil, fmt.Errorf("controller: encode snapshot: %w", err)
	}
	return fsmSnapshot(b), nil
}

// Restore implements raft.FSM: it replaces the state with the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(maxSnapshotSize)+1))
	if err != nil {
		return fmt.Errorf("controller: read snapshot: %w", err)
	}
	groups, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.groups = groups
	f.mu.Unlock()
	return nil
}

func decodeSnapshot(b []byte) (map[string]*GroupState, error) {
	if len(b) > maxSnapshotSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBadSnapshot, maxSnapshotSize)
	}
	var s snapshotFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d (this member knows %d)", ErrBadSnapshot, s.Version, snapshotVersion)
	}
	if len(s.Groups) > MaxGroups {
		return nil, fmt.Errorf("%w: %d groups, at most %d", ErrBadSnapshot, len(s.Groups), MaxGroups)
	}
	groups := make(map[string]*GroupState, len(s.Groups))
	for i := range s.Groups {
		g := s.Groups[i]
		if err := checkName(g.Name); err != nil {
			return nil, fmt.Errorf("%w: group %d: %v", ErrBadSnapshot, i, err)
		}
		if _, dup := groups[g.Name]; dup {
			return nil, fmt.Errorf("%w: group %q twice", ErrBadSnapshot, g.Name)
		}
		if len(g.Replicas) > MaxReplicas || len(g.InSync) > MaxReplicas {
			return nil, fmt.Errorf("%w: group %q: %d replicas, %d in sync, at most %d", ErrBadSnapshot, g.Name, len(g.Replicas), len(g.InSync), MaxReplicas)
		}
		if !slices.IsSortedFunc(g.Replicas, func(a, b Replica) int { return cmp.Compare(a.ID, b.ID) }) || !slices.IsSorted(g.InSync) {
			return nil, fmt.Errorf("%w: group %q: replicas or in-sync set not sorted", ErrBadSnapshot, g.Name)
		}
		groups[g.Name] = &g
	}
	return groups, nil
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: write snapshot: %w", err)
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}
