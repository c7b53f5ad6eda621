package nameserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gantrymq/gantry/internal/tick"
)

// Run drops silent brokers every Config.ScanInterval until ctx ends, then
// returns. It is the registry's only goroutine: the caller starts it once
// and joins it.
func (r *Registry) Run(ctx context.Context) {
	tick.Every(ctx, r.cfg.ScanInterval, func() { r.expire(r.cfg.Now()) })
}

// expire drops every broker not heard from for BrokerExpiry as of now and
// returns how many. It looks under the read lock first, so a scan that
// finds nothing never blocks queries.
func (r *Registry) expire(now time.Time) int {
	silent := func(b *broker) bool { return now.Sub(b.lastUpdate) >= r.cfg.BrokerExpiry }
	r.mu.RLock()
	found := len(r.collect(silent)) > 0
	r.mu.RUnlock()
	if !found {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := r.collect(silent) // again: a broker may have registered meanwhile
	for _, k := range keys {
		b := r.remove(k)
		silence := now.Sub(b.lastUpdate)
		r.logBroker(slog.LevelWarn, fmt.Sprintf("broker expired after %s of silence", silence.Truncate(time.Second)),
			b, k.name, "silence", silence)
	}
	return len(keys)
}
