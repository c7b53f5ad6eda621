package broker

import (
	"context"
	"fmt"

	"github.com/gantrymq/gantry/broker/dedup"
	"github.com/gantrymq/gantry/broker/store"
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

// storeSend stores a checked batch of a user send to topic and answers
// it: through the de-duplication table when dedupOn (keys[i] is record i's
// key, attempt the send's SendRequest.attempt, uniqKeyed whether every key
// is its record's UNIQ_KEY; see dedup.Send), the duplicates answered with
// the stored results and left out of the batch; else straight.
func storeSend[K dedup.Key](ctx context.Context, b *Broker, topic string, batch store.Batch,
	dedupOn bool, keys []K, attempt uint32, uniqKeyed bool) ([]SendResult, error) {
	if !dedupOn {
		res, err := b.putBatch(ctx, topic, batch)
		return dedup.Results(res), err
	}
	res, err := dedup.Send(ctx, b.dedup, topic, keys, attempt, uniqKeyed, func(fl *dedup.Flight) ([]store.PutResult, error) {
		if !fl.StoresAll() {
			batch = batch.Keep(fl.Stored)
		}
		return b.putBatch(ctx, topic, batch)
	})
	if err == nil {
		err = b.waitDuplicates(ctx, topic, res)
	}
	return res, err
}

// waitDuplicates makes a SYNC_MASTER answer a send whose messages were
// duplicates only once its slaves hold the originals too: the original's
// send may have timed out waiting for them (indeterminate) and this retry
// is the one the producer trusts.
func (b *Broker) waitDuplicates(ctx context.Context, topic string, res []SendResult) error {
	need := b.slavesNeeded()
	if need == 0 {
		return nil
	}
	var last []store.PutResult
	for _, r := range res {
		if r.Duplicate && (len(last) == 0 || r.PhysicalOffset > last[0].PhysicalOffset) {
			last = []store.PutResult{r.PutResult}
		}
	}
	if len(last) == 0 {
		return nil
	}
	r := b.replication()
	if r == nil {
		return fmt.Errorf("broker: send to %q: %w: no replication", topic, ErrReplicaTimeout)
	}
	return b.waitReplicas(ctx, r, topic, last, need)
}
