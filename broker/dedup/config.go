package dedup

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// Store is what the table needs of the message store: its key index, the
// record at a physical offset, and how far its dispatcher has indexed.
// *store.Store implements it.
type Store interface {
	// FindByKey returns the oldest record of topic with key stored in
	// [begin, end) (unix ms) for which match holds.
	FindByKey(topic string, key []byte, begin, end int64, match func(message.View) bool) (store.PutResult, bool, error)
	// ResultAt returns the result of the record at physical offset phys.
	ResultAt(phys int64) (store.PutResult, error)
	// DispatchedOffset is the dispatch position: the records below it are
	// indexed.
	DispatchedOffset() int64
	// Refusal is the store's refusal of writes while its dispatcher is
	// stalled, nil when it takes them.
	Refusal() error
}

// Config is what a Table needs.
type Config struct {
	// Window is how long a key is remembered: a send of it within Window
	// of the original is a duplicate.
	Window time.Duration
	// Now is the clock the window is measured on.
	Now   func() time.Time
	Store Store
	// StoreAddr is the broker's store address, for the offset message id
	// of a duplicate whose record the log no longer has.
	StoreAddr netip.AddrPort
	// ParkingTopics hold delayed messages on their way to the topic their
	// REAL_TOPIC names: a record parked there counts as a send to it.
	ParkingTopics []string
}

// Validate reports what is missing or wrong in c.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("dedup: window %s: want > 0", c.Window)
	case c.Now == nil:
		return errors.New("dedup: no clock (Now)")
	case c.Store == nil:
		return errors.New("dedup: no store")
	}
	return nil
}

var _ Store = (*store.Store)(nil)
