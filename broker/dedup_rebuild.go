package broker

import (
	"context"
	"errors"
	"time"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// rebuildCheckEvery is how many records the rebuild reads between checks
// of its context.
const rebuildCheckEvery = 4096

// openDedup sets up the de-duplication of sends, unless it is off, and
// rebuilds its keys from the records the log stored within the last
// window, so that a restart does not let repeats of earlier sends in.
func (b *Broker) openDedup(ctx context.Context) error {
	if b.cfg.DuplicationWindow <= 0 {
		return nil
	}
	b.dedup = newDedupTable(b.cfg.DuplicationWindow, b.cfg.Now)
	start := time.Now()
	cutoff := b.cfg.Now().Add(-b.cfg.DuplicationWindow).UnixMilli()
	from := b.dedupScanStart(cutoff)
	n, keys, err := b.rebuildDedup(ctx, from, cutoff)
	if err != nil {
		return err
	}
	b.dedup.rebuiltFrom, b.dedup.rebuiltRecords = from, n
	b.log.Info("duplication window rebuilt", "window", b.cfg.DuplicationWindow, "from", from,
		"records", n, "keys", keys, "duration", time.Since(start))
	return nil
}

// dedupScanStart returns the log offset of the first record stored at or
// after cutoff (unix ms), found through the consume queues: the least,
// over every queue, of the offset of its first entry stored at or after
// cutoff (a binary search by store time in each). Store times rise along
// the log, so the records before it are older than the window.
func (b *Broker) dedupScanStart(cutoff int64) int64 {
	cl := b.store.CommitLog()
	from := cl.MaxOffset()
	for _, k := range b.store.Queues() {
		qo, err := b.store.OffsetAtTime(k.Topic, k.QueueID, cutoff)
		if err != nil {
			b.log.Warn("duplication window: cannot search a queue by time; scanning the whole log",
				"queue", k.String(), "err", err)
			return cl.MinOffset()
		}
		if _, next := b.store.QueueOffsets(k.Topic, k.QueueID); qo >= next {
			continue // nothing in the window
		}
		m, err := b.store.MessageByQueueOffset(k.Topic, k.QueueID, qo)
		if err != nil {
			continue // its record is gone: older than the log's start
		}
		from = min(from, m.PhysicalOffset)
	}
	return max(from, cl.MinOffset())
}

// rebuildDedup reads the log from offset from to its end and remembers the
// user sends stored at or after cutoff. It returns how many records it
// read and how many keys it restored. A record it cannot read ends the
// rebuild with a warning (the store recovered the log already, so that
// is not expected); ctx ending fails it.
func (b *Broker) rebuildDedup(ctx context.Context, from, cutoff int64) (n, keys int, err error) {
	cl := b.store.CommitLog()
	end := cl.MaxOffset()
	for off := from; off < end; n++ {
		if n%rebuildCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return n, keys, err
			}
		}
		rec, next, err := cl.ReadRecord(off)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			break
		}
		if err != nil {
			b.log.Warn("duplication window: cannot read the log; keys of later sends are not restored",
				"offset", off, "err", err)
			break
		}
		if b.restoreRecord(rec.B, off, cutoff) {
			keys++
		}
		rec.Release()
		off = next
	}
	return n, keys, nil
}

// restoreRecord remembers the record rec at log offset phys if it is a
// user send stored at or after cutoff: a message of a topic users send to
// (not a group's retry or dead-letter topic), or one parked on its way to
// such a topic (its key then counts in REAL_TOPIC). A delivery of a parked
// message (same key, later) finds its parked record known, so it is not
// taken for a send, unless the parked record is older than the window:
// then the delivery stands for it (the rebuild cannot tell it from a send,
// and a repeat of the key is answered as a duplicate of the delivered
// copy, which the topic does hold).
func (b *Broker) restoreRecord(rec []byte, phys, cutoff int64) bool {
	v, err := message.NewView(rec)
	if err != nil || v.StoreTimestamp() < cutoff {
		return false
	}
	var uniq, idem, realTopic []byte
	for k, val := range v.All() {
		switch string(k) {
		case message.PropUniqKey:
			uniq = val
		case message.PropIdempotencyKey:
			idem = val
		case message.PropRealTopic:
			realTopic = val
		}
	}
	topic := v.Topic()
	if t := string(topic); t == ScheduleTopic || t == TimerTopic {
		topic = realTopic
	}
	key := idem
	if len(key) == 0 {
		key = uniq
	}
	if len(key) == 0 || len(topic) == 0 || IsReservedTopic(string(topic)) || !dedupTopic(string(topic)) {
		return false
	}
	e := dedupEntry{queueID: v.QueueID(), queueOffset: v.QueueOffset(), phys: phys, storeTS: v.StoreTimestamp()}
	return b.dedup.restore(topic, key, e)
}
