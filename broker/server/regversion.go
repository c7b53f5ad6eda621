package server

import (
	"sync"

	"github.com/gantrymq/gantry/broker"
)

// regVersion keeps the data version a broker registers its topics with
// moving forward. A slave's topics take its master's version each time it
// restores the master's metadata (broker.RestoreMeta), which may be older
// than the version it registered before; the nameservers would then keep
// its older topics as the newer registration's ("stale registration").
type regVersion struct {
	mu         sync.Mutex
	seen, sent broker.DataVersion // the broker's version last seen, and what was registered for it
}

// next returns the version to register the topics of version v with: v,
// unless v is older than the last one registered; then the last one with
// its counter raised. An unchanged v gets the same answer again.
func (r *regVersion) next(v broker.DataVersion) broker.DataVersion {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v == r.seen {
		return r.sent
	}
	r.seen = v
	if v.Timestamp < r.sent.Timestamp || v.Timestamp == r.sent.Timestamp && v.Counter < r.sent.Counter {
		r.sent.Counter++
	} else {
		r.sent = v
	}
	return r.sent
}
