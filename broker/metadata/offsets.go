package metadata

import (
	"maps"
	"slices"
	"strings"
)

// offsetsDoc is consumerOffset.json. OffsetTable's keys are
// "<topic>@<group>"; neither name may contain '@'. ClientOffsetTable holds
// the offsets of broadcast consumption, one set per client, keyed
// "<topic>@<group>@<clientID>": the client id may contain '@' (RocketMQ's
// are ip@pid), so a key is split from the left. It is omitted while empty,
// so the file keeps RocketMQ's shape.
type offsetsDoc struct {
	OffsetTable       map[string]map[int32]int64 `json:"offsetTable"`
	ClientOffsetTable map[string]map[int32]int64 `json:"clientOffsetTable,omitempty"`
}

func offsetKey(group, topic string) string { return topic + "@" + group }

func clientOffsetKey(group, clientID, topic string) string {
	return topic + "@" + group + "@" + clientID
}

// splitClientOffsetKey splits "<topic>@<group>@<clientID>".
func splitClientOffsetKey(key string) (group, clientID, topic string, ok bool) {
	topic, rest, ok1 := strings.Cut(key, "@")
	group, clientID, ok2 := strings.Cut(rest, "@")
	return group, clientID, topic, ok1 && ok2
}

func validateOffsets(d *offsetsDoc) error {
	if d.OffsetTable == nil {
		return invalidf("file: no offsetTable")
	}
	for key, queues := range d.OffsetTable {
		topic, group, ok := strings.Cut(key, "@")
		if !ok {
			return invalidf("offset key %q: want <topic>@<group>", key)
		}
		for qid, off := range queues {
			if err := validOffset(group, topic, qid, off); err != nil {
				return err
			}
		}
	}
	if d.ClientOffsetTable == nil {
		d.ClientOffsetTable = map[string]map[int32]int64{} // a file without broadcast offsets
	}
	for key, queues := range d.ClientOffsetTable {
		group, clientID, topic, ok := splitClientOffsetKey(key)
		if !ok {
			return invalidf("client offset key %q: want <topic>@<group>@<clientID>", key)
		}
		for qid, off := range queues {
			if err := validClientOffset(group, clientID, topic, qid, off); err != nil {
				return err
			}
		}
	}
	return nil
}

func validClientOffset(group, clientID, topic string, queueID int32, offset int64) error {
	if clientID == "" {
		return invalidf("client id of %s@%s: empty", topic, group)
	}
	return validOffset(group, topic, queueID, offset)
}

func validOffset(group, topic string, queueID int32, offset int64) error {
	if err := validName("group", group); err != nil {
		return err
	}
	if err := ValidTopicName(topic); err != nil {
		return err
	}
	if queueID < 0 {
		return invalidf("queue id %d of %s@%s: want >= 0", queueID, topic, group)
	}
	if offset < 0 {
		return invalidf("offset %d of %s@%s queue %d: want >= 0", offset, topic, group, queueID)
	}
	return nil
}

// CommitOffset records group's consume offset in a queue of topic.
func (m *Metadata) CommitOffset(group, topic string, queueID int32, offset int64) error {
	if err := validOffset(group, topic, queueID, offset); err != nil {
		return err
	}
	m.offsets.update(func(d *offsetsDoc) bool {
		return setOffset(d.OffsetTable, offsetKey(group, topic), queueID, offset)
	})
	return nil
}

// CommitClientOffset records the consume offset of one client of group in
// a queue of topic (broadcast consumption).
func (m *Metadata) CommitClientOffset(group, clientID, topic string, queueID int32, offset int64) error {
	if err := validClientOffset(group, clientID, topic, queueID, offset); err != nil {
		return err
	}
	m.offsets.update(func(d *offsetsDoc) bool {
		return setOffset(d.ClientOffsetTable, clientOffsetKey(group, clientID, topic), queueID, offset)
	})
	return nil
}

// setOffset sets table[key][queueID] and reports whether it changed.
func setOffset(table map[string]map[int32]int64, key string, queueID int32, offset int64) bool {
	q := table[key]
	if q == nil {
		q = map[int32]int64{}
		table[key] = q
	}
	if old, ok := q[queueID]; ok && old == offset {
		return false // consumers re-commit unchanged offsets every few seconds
	}
	q[queueID] = offset
	return true
}

// ClientOffset returns the committed offset of one client of group in a
// queue of topic.
func (m *Metadata) ClientOffset(group, clientID, topic string, queueID int32) (off int64, ok bool) {
	m.offsets.read(func(d *offsetsDoc) { off, ok = d.ClientOffsetTable[clientOffsetKey(group, clientID, topic)][queueID] })
	return off, ok
}

// Offset returns group's committed offset in a queue of topic.
func (m *Metadata) Offset(group, topic string, queueID int32) (off int64, ok bool) {
	m.offsets.read(func(d *offsetsDoc) { off, ok = d.OffsetTable[offsetKey(group, topic)][queueID] })
	return off, ok
}

// Offsets returns group's committed offsets in topic by queue id; the map is
// the caller's.
func (m *Metadata) Offsets(group, topic string) map[int32]int64 {
	var out map[int32]int64
	m.offsets.read(func(d *offsetsDoc) { out = maps.Clone(d.OffsetTable[offsetKey(group, topic)]) })
	if out == nil {
		out = map[int32]int64{}
	}
	return out
}

// OffsetKeys returns every (group, topic) with committed offsets, sorted
// by group then topic; group or topic "" lists every one.
func (m *Metadata) OffsetKeys(group, topic string) [][2]string {
	var out [][2]string
	m.offsets.read(func(d *offsetsDoc) {
		for key := range d.OffsetTable {
			t, g, _ := strings.Cut(key, "@")
			if (group == "" || g == group) && (topic == "" || t == topic) {
				out = append(out, [2]string{g, t})
			}
		}
	})
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	return out
}

// ClientOffsets returns the committed offsets of one client of group in
// topic by queue id; the map is the caller's.
func (m *Metadata) ClientOffsets(group, clientID, topic string) map[int32]int64 {
	var out map[int32]int64
	m.offsets.read(func(d *offsetsDoc) { out = maps.Clone(d.ClientOffsetTable[clientOffsetKey(group, clientID, topic)]) })
	if out == nil {
		out = map[int32]int64{}
	}
	return out
}

// DeleteOffsets forgets group's offsets in topic, or in every topic when
// topic is "", and those of the group's clients (broadcast consumption).
func (m *Metadata) DeleteOffsets(group, topic string) {
	m.offsets.update(func(d *offsetsDoc) bool {
		n, nc := len(d.OffsetTable), len(d.ClientOffsetTable)
		if topic != "" {
			delete(d.OffsetTable, offsetKey(group, topic))
		} else {
			maps.DeleteFunc(d.OffsetTable, func(key string, _ map[int32]int64) bool {
				return strings.HasSuffix(key, "@"+group)
			})
		}
		maps.DeleteFunc(d.ClientOffsetTable, func(key string, _ map[int32]int64) bool {
			g, _, t, _ := splitClientOffsetKey(key)
			return g == group && (topic == "" || t == topic)
		})
		return len(d.OffsetTable) != n || len(d.ClientOffsetTable) != nc
	})
}

// delaysDoc is delayOffset.json: delay level (1-based) to the offset in
// that level's queue of SCHEDULE_TOPIC_XXXX delivered so far.
type delaysDoc struct {
	OffsetTable map[int]int64 `json:"offsetTable"`
}

func validateDelays(d *delaysDoc) error {
	if d.OffsetTable == nil {
		return invalidf("file: no offsetTable")
	}
	for level, off := range d.OffsetTable {
		if err := validDelay(level, off); err != nil {
			return err
		}
	}
	return nil
}

func validDelay(level int, offset int64) error {
	if level < 1 {
		return invalidf("delay level %d: want >= 1", level)
	}
	if offset < 0 {
		return invalidf("offset %d of delay level %d: want >= 0", offset, level)
	}
	return nil
}

// DelayOffset returns the delivered offset of a delay level.
func (m *Metadata) DelayOffset(level int) (off int64, ok bool) {
	m.delays.read(func(d *delaysDoc) { off, ok = d.OffsetTable[level] })
	return off, ok
}

// SetDelayOffset records the delivered offset of a delay level (1-based).
func (m *Metadata) SetDelayOffset(level int, offset int64) error {
	if err := validDelay(level, offset); err != nil {
		return err
	}
	m.delays.update(func(d *delaysDoc) bool {
		if old, ok := d.OffsetTable[level]; ok && old == offset {
			return false
		}
		d.OffsetTable[level] = offset
		return true
	})
	return nil
}

// DeleteTopicOffsets forgets every group's offsets in topic, those of
// broadcasting clients too, and returns the groups that had some.
func (m *Metadata) DeleteTopicOffsets(topic string) []string {
	seen := map[string]bool{}
	m.offsets.update(func(d *offsetsDoc) bool {
		maps.DeleteFunc(d.OffsetTable, func(key string, _ map[int32]int64) bool {
			t, g, _ := strings.Cut(key, "@")
			if t == topic {
				seen[g] = true
			}
			return t == topic
		})
		maps.DeleteFunc(d.ClientOffsetTable, func(key string, _ map[int32]int64) bool {
			g, _, t, _ := splitClientOffsetKey(key)
			if t == topic {
				seen[g] = true
			}
			return t == topic
		})
		return len(seen) > 0
	})
	return slices.Sorted(maps.Keys(seen))
}
