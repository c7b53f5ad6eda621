package broker

import (
	"context"

	"github.com/gantrymq/gantry/commitlog"
)

// WithAppended returns a context that makes a Send call f once its
// messages hold their place in the log, before it waits for the flush
// (SyncFlush). A caller that keeps several sends in order can then start
// the next one without waiting for the first to be durable.
func WithAppended(ctx context.Context, f func()) context.Context {
	return commitlog.WithAppended(ctx, f)
}

// SyncFlush reports whether a Send answers only once its messages are
// flushed to disk (flushDiskType=SYNC_FLUSH).
func (b *Broker) SyncFlush() bool { return b.cfg.FlushDiskType == commitlog.SyncFlush }
