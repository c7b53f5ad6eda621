package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

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
}

// MetaVersion changes whenever anything MetaSnapshot holds changes.
func (b *Broker) MetaVersion() uint64 {
	v := b.meta.Version()
	if b.deliveryOpen.Load() {
		v += b.delivery.StateVersion()
	}
	return v
}

// MetaSnapshot returns the broker's topics, subscription groups, consumer
// offsets, delay-level progress, dead-letter state and timer progress, and
// the version they hold.
func (b *Broker) MetaSnapshot() (uint64, []byte, error) {
	mv, ms, err := b.meta.Snapshot()
	if err != nil {
		return 0, nil, fmt.Errorf("broker: metadata snapshot: %w", err)
	}
	snap := replicaMeta{Metadata: ms}
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
// service a slave opens when it becomes master; every part is checked
// before anything changes. Routes follow a change of the topics
// (OnTopicsChanged).
func (b *Broker) RestoreMeta(data []byte) error {
	var snap replicaMeta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&snap); err != nil {
		return fmt.Errorf("%w: metadata snapshot: %w", ErrInvalidArgument, err)
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
	return nil
}
