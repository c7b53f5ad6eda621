package broker

import (
	"context"

	"github.com/gantrymq/gantry/broker/dedup"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// SendResult says where a message of a Send or SendRecords went: its
// store.PutResult, and Duplicate when the message repeated a key stored
// within the duplication window (nothing was stored for it, and the
// result is the original's).
type SendResult = dedup.Result

// openDedup sets up the de-duplication of sends (broker/dedup), unless it
// is off. Nothing is rebuilt: the store's Open has dispatched every record
// of the log, or opened stalled and refuses every send until it has, so
// the index holds every key stored within the window before the broker
// takes a send.
func (b *Broker) openDedup(context.Context) error {
	if b.cfg.DuplicationWindow <= 0 {
		return nil
	}
	cfg := dedup.Config{Window: b.cfg.DuplicationWindow, Now: b.cfg.Now, Store: b.store,
		StoreAddr: b.cfg.StoreAddr(), ParkingTopics: []string{ScheduleTopic, TimerTopic}}
	if err := cfg.Validate(); err != nil {
		return err
	}
	b.dedup = dedup.New(cfg)
	b.log.Info("de-duplication of sends on", "window", b.cfg.DuplicationWindow)
	return nil
}

// dedupTopic reports whether sends to topic are de-duplicated: every topic
// a user may send to but a group's retry and dead-letter topics, which
// consumers write copies of one message to (with its UNIQ_KEY) on purpose.
func dedupTopic(topic string) bool { return !isGroupTopic(topic) }

// messageKey is a message's de-duplication key: its IDEMPOTENCY_KEY, else
// its UNIQ_KEY, else "".
func messageKey(m *message.Message) string { return dedup.MessageKey(m) }

// sendResults converts the results of a send that was not de-duplicated.
func sendResults(res []store.PutResult) []SendResult { return dedup.Results(res) }

// dedupFlight is a send's claim on its keys, as Send and SendRecords pick
// the messages it stores.
type dedupFlight dedup.Flight

func (fl *dedupFlight) storesAll() bool { return (*dedup.Flight)(fl).StoresAll() }

func (fl *dedupFlight) stored(i int) bool { return (*dedup.Flight)(fl).Stored(i) }

// dedupSend runs a user send to topic through the broker's table
// (dedup.Send): keys[i] is message i's key, attempt the send's
// SendRequest.attempt (0: not said), uniqKeyed whether every key is its
// message's UNIQ_KEY; put stores the messages that are not duplicates.
func dedupSend[K dedup.Key](ctx context.Context, b *Broker, topic string, keys []K, attempt uint32, uniqKeyed bool,
	put func(fl *dedupFlight) ([]store.PutResult, error)) ([]SendResult, error) {
	return dedup.Send(ctx, b.dedup, topic, keys, attempt, uniqKeyed, func(fl *dedup.Flight) ([]store.PutResult, error) {
		return put((*dedupFlight)(fl))
	})
}
