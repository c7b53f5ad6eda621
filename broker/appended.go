package broker

import (
	"context"

	"github.com/gantrymq/gantry/commitlog"
)

// WithAppended returns a context that makes a Send call f once its
// messages hold their place in the log, before it waits for the flush
// (SyncFlush) or a SYNC_MASTER's slaves (WaitsAfterAppend). A caller that
// keeps several sends in order can then start the next one without waiting
// for the first to be durable or replicated.
func WithAppended(ctx context.Context, f func()) context.Context {
	return commitlog.WithAppended(ctx, f)
}

// SyncFlush reports whether a Send answers only once its messages are
// flushed to disk (flushDiskType=SYNC_FLUSH).
func (b *Broker) SyncFlush() bool { return b.cfg.FlushDiskType == commitlog.SyncFlush }

// WaitsAfterAppend reports whether a Send waits after its messages hold
// their place in the log: for the flush (SYNC_FLUSH) or for the slaves'
// acks (SYNC_MASTER).
func (b *Broker) WaitsAfterAppend() bool { return b.SyncFlush() || b.slavesNeeded() > 0 }
