package delivery

import (
	"math"
	"slices"
	"strings"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// openDLQ loads the DLQ state and re-applies each group's min offset to
// its queue (the store does not keep it); the store is open.
func (d *Service) openDLQ() error {
	st, src, err := openDLQState(d.cfg.FS, d.cfg.Dir)
	if err != nil {
		return err
	}
	if src == metadata.SourceBackup {
		d.log.Warn("dead-letter state file unusable; loaded its backup", "file", st.path)
		st.dirty = true // rewrite the main file at the next save
	}
	for group, g := range st.groups {
		d.store.RaiseQueueMin(DLQTopic(group), DLQQueue, g.MinOffset)
	}
	d.dlq = st
	return nil
}

// dlqGroups lists the groups that have a dead-letter topic.
func (d *Service) dlqGroups() []string {
	var out []string
	for _, tc := range d.meta.Topics() {
		if IsDLQTopic(tc.TopicName) {
			out = append(out, strings.TrimPrefix(tc.TopicName, DLQTopicPrefix))
		}
	}
	return out
}

// SweepDLQ moves each DLQ queue's min offset past its expired and purged
// prefix, and saves the state if that changed it. The sweep loop runs it
// every SweepInterval.
func (d *Service) SweepDLQ() {
	for _, group := range d.dlqGroups() {
		live := d.dlqLiveFrom(group, d.dlq.view(group))
		minOff := d.dlq.advance(group, live)
		d.store.RaiseQueueMin(DLQTopic(group), DLQQueue, minOff)
	}
	d.saveDLQState()
}

// KeepFrom is the store's KeepFrom: the lowest log offset of a live dead
// letter over every DLQ queue, so that retention keeps them whatever
// fileReservedTime says (0: keep the whole log).
func (d *Service) KeepFrom() int64 {
	keep := int64(math.MaxInt64)
	for _, group := range d.dlqGroups() {
		live := d.dlqLiveFrom(group, d.dlq.view(group))
		gr, err := d.store.Get(DLQTopic(group), DLQQueue, live, 1, 1, nil)
		if err != nil {
			d.log.Warn("cannot read a dead-letter queue; keeping the whole log this pass", "group", group, "err", err)
			return 0
		}
		if len(gr.Records) > 0 {
			keep = min(keep, message.PhysicalOffsetOf(gr.Records[0].B))
		}
		gr.Release()
	}
	return keep
}

// DLQPullFrom returns where a pull of a DLQ queue from offset starts:
// past the swept, purged and expired prefix, and what DropGoneDeadLetters
// needs to filter the records read.
func (d *Service) DLQPullFrom(topic string, offset int64) (int64, DLQView) {
	group := strings.TrimPrefix(topic, DLQTopicPrefix)
	v := d.dlq.view(group)
	return max(offset, d.dlqLiveFrom(group, v)), v
}

// DropGoneDeadLetters releases the records of a DLQ pull that expired or
// were purged and returns the others, in order, in recs' array.
func (d *Service) DropGoneDeadLetters(recs []commitlog.Region, v DLQView) []commitlog.Region {
	cutoff := d.dlqCutoff()
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
func (d *Service) deadLettered(group string) { d.dlq.countStored(group) }

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
// dead-letter topic or a count, sorted by group.
func (d *Service) DLQStats() []DLQGroupStats {
	stored, resent := d.dlq.counters()
	byGroup := map[string]*DLQGroupStats{}
	get := func(g string) *DLQGroupStats {
		if byGroup[g] == nil {
			byGroup[g] = &DLQGroupStats{Group: g}
		}
		return byGroup[g]
	}
	for _, group := range d.dlqGroups() {
		v := d.dlq.view(group)
		live := d.dlqLiveFrom(group, v)
		_, maxOff := d.store.QueueOffsets(DLQTopic(group), DLQQueue)
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

// ForgetDLQ drops group's dead-letter state and counters and saves the
// state: its dead-letter topic was deleted, and the next one starts at
// offset 0.
func (d *Service) ForgetDLQ(group string) error {
	d.dlq.forget(group)
	return d.dlq.save()
}
