package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/memlimit"
)

// Roles (docs/REPLICATION.md, "Running a master and slaves"): a master
// takes writes and, as a SYNC_MASTER, acknowledges a send only once
// inSyncReplicas hold it; a slave's log is a copy of its master's, which
// broker/server keeps up to date (replication.Slave), so the slave refuses
// every write of its own.

// Replication is what a master needs of its log shipping (broker/server
// adapts a replication.Master to it).
type Replication interface {
	// InSync returns how many slaves are connected and have acknowledged
	// the log at least up to end minus haMaxGapNotInSync.
	InSync(end int64) int
	// WaitAcked returns once n slaves have acknowledged the log up to off,
	// or with ctx's error.
	WaitAcked(ctx context.Context, off int64, n int) error
	// Notify wakes the streams to the slaves after the log grew.
	Notify()
	// NotifyMeta has the streams send the metadata at once: a topic or a
	// group changed.
	NotifyMeta()
}

// replicationState is a broker's part in replication, set by its owner
// after Open.
type replicationState struct {
	rep    atomic.Pointer[replicationBox]
	master atomic.Pointer[string] // a slave's master's address, for NotMasterError
	// behind is how far behind the log's end a read makes a master with
	// slaveReadEnable suggest a slave (SuggestSlave); 0: never.
	behind int64
}

type replicationBox struct{ r Replication }

// SetReplication gives a master its slaves' log shipping: a SYNC_MASTER
// refuses sends (ErrNotEnoughReplicas) until it is set, unless
// inSyncReplicas is 1. nil removes it.
func (b *Broker) SetReplication(r Replication) {
	if r == nil {
		b.repl.rep.Store(nil)
		return
	}
	b.repl.rep.Store(&replicationBox{r})
}

// SetMasterAddr records the address of a slave's master, named in its
// refusals of writes.
func (b *Broker) SetMasterAddr(addr string) { b.repl.master.Store(&addr) }

// IsSlave reports whether the broker is a SLAVE.
func (b *Broker) IsSlave() bool { return b.cfg.BrokerRole == Slave }

func (b *Broker) replication() Replication {
	if box := b.repl.rep.Load(); box != nil {
		return box.r
	}
	return nil
}

// notifyCommit is the store's OnCommit: the log grew.
func (b *Broker) notifyCommit(int64) {
	if r := b.replication(); r != nil {
		r.Notify()
	}
}

// ConfirmMoved wakes the dispatcher: Config.DispatchLimit's value grew.
func (b *Broker) ConfirmMoved() { b.store.Kick() }

// SettledDispatch returns the dispatch position once a dispatch under way
// has finished (store.Store.SettledDispatch).
func (b *Broker) SettledDispatch() int64 { return b.store.SettledDispatch() }

// metaChanged sends a topic or group change to the slaves at once, not
// within the metadata interval: a slave promoted right after it still
// serves the topic.
func (b *Broker) metaChanged() {
	if r := b.replication(); r != nil {
		r.NotifyMeta()
	}
}

// writable refuses a write on a slave, or on a master whose lease
// expired, with a *NotMasterError.
func (b *Broker) writable() error {
	if b.cfg.BrokerRole != Slave {
		if b.leased() {
			return nil
		}
		return &NotMasterError{Broker: b.cfg.BrokerName, ID: b.cfg.BrokerID, NoLease: true}
	}
	e := &NotMasterError{Broker: b.cfg.BrokerName, ID: b.cfg.BrokerID}
	if p := b.repl.master.Load(); p != nil {
		e.Master = *p
	}
	return e
}

// leased reports whether a master may acknowledge writes: it has no
// lease to keep (not in controller mode), or its lease holds.
func (b *Broker) leased() bool { return b.cfg.Lease == nil || b.cfg.Lease.Valid(b.cfg.Now()) }

// SuggestSlave reports whether a consumer that reads the record at log
// offset phys should pull from a slave (RocketMQ's suggestWhichBrokerId):
// the broker is a master with slaveReadEnable and its log's end lies more
// than accessMessageInMemoryMaxRatio of the machine's memory ahead.
func (b *Broker) SuggestSlave(phys int64) bool {
	return b.repl.behind > 0 && b.cfg.BrokerRole != Slave && b.cfg.SlaveReadEnable &&
		b.store.CommitLog().MaxOffset()-phys > b.repl.behind
}

// slaveReadBehind is SuggestSlave's distance: the ratio of the machine's
// memory, 0 when it is unknown.
func slaveReadBehind(cfg Config) int64 {
	mem, _, err := memlimit.Machine(os.DirFS("/"))
	if err != nil {
		return 0
	}
	return mem / 100 * int64(cfg.AccessMessageInMemoryMaxRatio)
}

// readable refuses a pull on a slave without slaveReadEnable.
func (b *Broker) readable() error {
	if b.cfg.BrokerRole != Slave || b.cfg.SlaveReadEnable {
		return nil
	}
	msg := fmt.Sprintf("broker %s id %d is a SLAVE", b.cfg.BrokerName, b.cfg.BrokerID)
	if p := b.repl.master.Load(); p != nil && *p != "" {
		msg += "; the master is at " + *p
	}
	return fmt.Errorf("%w: not master: %s", ErrSlaveReadDisabled, msg)
}

// slavesNeeded is how many slaves must hold a send before its ack.
func (b *Broker) slavesNeeded() int {
	if b.cfg.BrokerRole != SyncMaster {
		return 0
	}
	return b.cfg.InSyncReplicas - 1
}

// checkInSync refuses a SYNC_MASTER's append, before it is made, when
// fewer than need slaves are in sync.
func (b *Broker) checkInSync(need int) (Replication, error) {
	r := b.replication()
	have := 0
	if r != nil {
		have = r.InSync(b.store.CommitLog().MaxOffset())
	}
	if have < need {
		return nil, fmt.Errorf("%w: %d slaves in sync, %d needed (inSyncReplicas %d; a slave is in sync when connected and within haMaxGapNotInSync %d bytes)",
			ErrNotEnoughReplicas, have, need, b.cfg.InSyncReplicas, b.cfg.HAMaxGapNotInSync)
	}
	return r, nil
}

// waitReplicas waits, at most slaveTimeout, for need slaves to hold the
// records of res (one batch: the last ends it).
func (b *Broker) waitReplicas(ctx context.Context, r Replication, topic string, res []store.PutResult, need int) error {
	end, err := b.recordEnd(res[len(res)-1].PhysicalOffset)
	if err != nil {
		return fmt.Errorf("broker: send to %q: %w: %w", topic, ErrReplicaTimeout, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.SlaveTimeout)
	defer cancel()
	if err := r.WaitAcked(ctx, end, need); err != nil {
		return fmt.Errorf("broker: send to %q: %w (slaveTimeout %s): %w", topic, ErrReplicaTimeout, b.cfg.SlaveTimeout, err)
	}
	return nil
}

// recordEnd returns the log offset after the record at phys.
func (b *Broker) recordEnd(phys int64) (int64, error) {
	r, err := b.store.CommitLog().Read(phys, 4)
	if err != nil {
		return 0, err
	}
	defer r.Release()
	return phys + int64(binary.BigEndian.Uint32(r.B)), nil
}

// readOnly makes every topic of tcs, a slave's topic table, read-only:
// what a slave registers with the nameservers, whose routes use it only
// while the group has no master.
func readOnly(tcs []metadata.TopicConfig) []metadata.TopicConfig {
	for i := range tcs {
		tcs[i].Perm &^= metadata.PermWrite
	}
	return tcs
}

// ReplicaLog returns the broker's commit log for its log shipping: a
// master's replication.Master reads it, a slave's replication.Slave is
// the only writer of it.
func (b *Broker) ReplicaLog() *commitlog.Log { return b.store.CommitLog() }

// TruncateLog cuts the commit log of the (closed) broker of cfg at offset,
// recorded with reason in storePathRootDir/truncations.log: a rejoining
// replica drops what it holds past the history it shares with the master
// (docs/REPLICATION.md, "Rejoining a master").
func TruncateLog(ctx context.Context, cfg Config, offset int64, reason string) (commitlog.TruncateReport, error) {
	return store.TruncateLog(ctx, cfg.StoreConfig(), offset, reason)
}

// ResetLog empties the commit log of the (closed) broker of cfg into one
// that starts at offset, recorded with reason in
// storePathRootDir/truncations.log: a replica whose log ends below its
// master's first offset copies the master's from there (docs/REPLICATION.md,
// "Resync from the master's first segment").
func ResetLog(ctx context.Context, cfg Config, offset int64, reason string) (commitlog.TruncateReport, error) {
	return store.ResetLog(ctx, cfg.StoreConfig(), offset, reason)
}
