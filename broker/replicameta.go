package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/metadata"
)

// A slave copies its master's metadata through the replication stream
// (docs/REPLICATION.md, "Metadata"): MetaVersion and MetaSnapshot make the
// broker a replication.MetaSource on the master, RestoreMeta takes each
// snapshot on the slave. The commit log carries everything else, and the
// de-duplication window with it: its memory is the key index, which a
// slave builds from the replicated records.

// replicaMeta is a snapshot on the wire: JSON, each part as its file holds
// it.
type replicaMeta struct {
	Metadata metadata.Snapshot       `json:"metadata"`
	Delivery *delivery.StateSnapshot `json:"delivery,omitempty"`
	// Users is the master's ACL file (auth.File) when its authentication
	// is on: a slave with authentication on makes it its own.
	Users json.RawMessage `json:"users,omitempty"`
}

// MetaVersion changes whenever anything MetaSnapshot holds changes.
func (b *Broker) MetaVersion() uint64 {
	v := b.meta.Version()
	if b.deliveryOpen.Load() {
		v += b.delivery.StateVersion()
	}
	if b.users != nil {
		v += b.users.Generation()
	}
	return v
}

// MetaSnapshot returns the broker's topics, subscription groups, consumer
// offsets, delay-level progress, dead-letter state and timer progress,
// its users when authentication is on, and the version they hold.
func (b *Broker) MetaSnapshot() (uint64, []byte, error) {
	var users []byte
	var uv uint64
	if b.users != nil {
		uv = b.users.Generation() // before the users: a change between them is sent again
		u, err := b.users.Bytes()
		if err != nil {
			return 0, nil, fmt.Errorf("broker: metadata snapshot: users: %w", err)
		}
		users = u
	}
	mv, ms, err := b.meta.Snapshot()
	if err != nil {
		return 0, nil, fmt.Errorf("broker: metadata snapshot: %w", err)
	}
	mv += uv
	snap := replicaMeta{Metadata: ms, Users: users}
	if b.deliveryOpen.Load() {
		dv, ds, err := b.delivery.StateSnapshot()
		if err != nil {
			return 0, nil, err
		}
		mv += dv
		snap.Delivery = &ds
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return 0, nil, fmt.Errorf("broker: metadata snapshot: %w", err)
	}
	return mv, data, nil
}

// RestoreMeta replaces the broker's metadata with a master's snapshot and
// writes the master's delivery state as its files, for the delivery
// service a slave opens when it becomes master; with authentication on it
// makes the master's users its own (a broker with authentication off
// ignores them). Every part is checked before anything changes. Routes
// follow a change of the topics (OnTopicsChanged).
func (b *Broker) RestoreMeta(data []byte) error {
	var snap replicaMeta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&snap); err != nil {
		return fmt.Errorf("%w: metadata snapshot: %w", ErrInvalidArgument, err)
	}
	users, err := b.snapshotUsers(snap.Users)
	if err != nil {
		return err
	}
	if snap.Delivery != nil {
		if err := delivery.RestoreStateFiles(storeFS(b.cfg.StoreConfig()), filepath.Join(b.cfg.StorePathRootDir, "config"), *snap.Delivery); err != nil {
			return err
		}
	}
	topics := b.meta.TopicsVersion()
	if err := b.meta.Restore(snap.Metadata); err != nil {
		return fmt.Errorf("broker: restore the master's metadata: %w", err)
	}
	if b.meta.TopicsVersion() != topics {
		b.topicsChanged()
	}
	if users != nil {
		if err := b.users.Replace(users); err != nil {
			return fmt.Errorf("broker: restore the master's users: %w", err)
		}
		b.log.Info("users restored from the master's metadata", "users", b.users.Users().Len())
	}
	return nil
}

// snapshotUsers checks a snapshot's users and returns them if the broker
// is to take them: its authentication is on and they differ from its own
// (a snapshot comes with every change of an offset: the file is written
// only when the users changed).
func (b *Broker) snapshotUsers(data json.RawMessage) ([]byte, error) {
	if len(data) == 0 || b.users == nil {
		return nil, nil
	}
	u, err := auth.ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata snapshot: users: %w", ErrInvalidArgument, err)
	}
	if u.Len() == 0 {
		return nil, fmt.Errorf("%w: metadata snapshot: users: none; a broker with authentication on keeps at least one", ErrInvalidArgument)
	}
	if reflect.DeepEqual(u.File(), b.users.Users().File()) {
		return nil, nil
	}
	return data, nil
}
