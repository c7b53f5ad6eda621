package broker

import (
	"math"
	"slices"
	"strings"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// openDLQ loads the DLQ state and re-applies each group's min offset to
// its queue (the store does not keep it); the store is open.
func (b *Broker) openDLQ(fs fsx.FS) error {
	st, src, err := openDLQState(fs, b.cfg.StorePathRootDir)
	if err != nil {
		return err
	}
	if src == metadata.SourceBackup {
		b.log.Warn("dead-letter state file unusable; loaded its backup", "file", st.path)
		st.dirty = true // rewrite the main file at the next save
	}
	for group, g := range st.groups {
		b.store.RaiseQueueMin(DLQTopic(group), dlqQueue, g.MinOffset)
	}
	b.dlq = st
	b.dlqReady.Store(true)
	return nil
}

// isDLQTopic reports whether name is a group's dead-letter topic.
func isDLQTopic(name string) bool { return strings.HasPrefix(name, DLQTopicPrefix) }

// dlqGroups lists the groups that have a dead-letter topic.
func (b *Broker) dlqGroups() []string {
	var out []string
	for _, tc := range b.meta.Topics() {
		if isDLQTopic(tc.TopicName) {
			out = append(out, strings.TrimPrefix(tc.TopicName, DLQTopicPrefix))
		}
	}
	return out
}

// sweepDLQ moves each DLQ queue's min offset past its expired and purged
// prefix, and saves the state if that changed it. The sweep loop runs it
// every dlqSweepInterval.
func (b *Broker) sweepDLQ() {
	for _, group := range b.dlqGroups() {
		live := b.dlqLiveFrom(group, b.dlq.view(group))
		minOff := b.dlq.advance(group, live)
		b.store.RaiseQueueMin(DLQTopic(group), dlqQueue, minOff)
	}
	b.saveDLQState()
}

// dlqKeepFrom is the store's KeepFrom: the lowest log offset of a live
// dead letter over every DLQ queue, so that retention keeps them
// whatever fileReservedTime says. Until the broker has loaded its DLQ
// state it pins the whole log.
func (b *Broker) dlqKeepFrom() int64 {
	if !b.dlqReady.Load() {
		return 0
	}
	keep := int64(math.MaxInt64)
	for _, group := range b.dlqGroups() {
		live := b.dlqLiveFrom(group, b.dlq.view(group))
		gr, err := b.store.Get(DLQTopic(group), dlqQueue, live, 1, 1, nil)
		if err != nil {
			b.log.Warn("cannot read a dead-letter queue; keeping the whole log this pass", "group", group, "err", err)
			return 0
		}
		if len(gr.Records) > 0 {
			keep = min(keep, message.PhysicalOffsetOf(gr.Records[0].B))
		}
		gr.Release()
	}
	return keep
}

// dlqPullFrom returns where a pull of a DLQ queue from offset starts:
// past the swept, purged and expired prefix.
func (b *Broker) dlqPullFrom(topic string, offset int64) (int64, dlqView) {
	group := strings.TrimPrefix(topic, DLQTopicPrefix)
	v := b.dlq.view(group)
	return max(offset, b.dlqLiveFrom(group, v)), v
}

// dropGoneDeadLetters releases the records of a DLQ pull that expired or
// were purged and returns the others, in order, in recs' array.
func (b *Broker) dropGoneDeadLetters(recs []commitlog.Region, v dlqView) []commitlog.Region {
	cutoff := b.dlqCutoff()
	kept := recs[:0]
	for _, r := range recs {
		if message.StoreTimestampOf(r.B) <= cutoff || v.gone(message.QueueOffsetOf(r.B)) {
			r.Release()
		} else {
			kept = append(kept, r)
		}
	}
	clear(recs[len(kept):])
	return kept
}

// deadLettered counts a dead letter SendBack stored for group.
func (b *Broker) deadLettered(group string) { b.dlq.countStored(group) }

// DLQGroupStats are a group's dead-letter counts.
type DLQGroupStats struct {
	Group string
	// Stored and Resent count the dead letters stored and resent since the
	// broker opened.
	Stored, Resent int64
	// Held counts the live dead letters (stored, not expired, not purged).
	Held int64
}

// DLQStats returns the dead-letter counts of every group with a
// dead-letter topic or a count, sorted by group; nil once Close has
// started.
func (b *Broker) DLQStats() []DLQGroupStats {
	if !b.calls.enter() {
		return nil
	}
	defer b.calls.leave()
	stored, resent := b.dlq.counters()
	byGroup := map[string]*DLQGroupStats{}
	get := func(g string) *DLQGroupStats {
		if byGroup[g] == nil {
			byGroup[g] = &DLQGroupStats{Group: g}
		}
		return byGroup[g]
	}
	for _, group := range b.dlqGroups() {
		v := b.dlq.view(group)
		live := b.dlqLiveFrom(group, v)
		_, maxOff := b.store.QueueOffsets(DLQTopic(group), dlqQueue)
		get(group).Held = max(maxOff-live-v.purged.count(live, maxOff), 0)
	}
	for g, n := range stored {
		get(g).Stored = n
	}
	for g, n := range resent {
		get(g).Resent = n
	}
	out := make([]DLQGroupStats, 0, len(byGroup))
	for _, s := range byGroup {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b DLQGroupStats) int { return strings.Compare(a.Group, b.Group) })
	return out
}
