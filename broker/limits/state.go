package limits

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

// StateFile is the file, in the store's config directory, that keeps what
// the store cannot: per topic and queue, the offset below which this
// package hid the queue's messages (retention, expiry, a dropped backlog),
// the offsets whose expiry was counted, and the expired and dropped
// counts. It is written like the metadata files (metadata.Save: atomic,
// with a .bak of the previous version) by the sweep when it changed and at
// Close, and read at Open, which raises each queue's min offset to its
// start again. The counts and the offsets are saved together, so a start
// after a crash counts again, once, what the lost changes had counted.
//
//	{"topics": {"Orders": {"0": {"start": 120, "counted": [[100, 120], [130, 131]],
//	                             "expired": 21, "dropped": 100}}}}
const StateFile = "limitsState.json"

// maxRanges bounds a queue's counted ranges: past it the two lowest merge,
// and the offsets between them are no longer counted when they expire.
const maxRanges = 256

// queueDoc is one queue's saved state.
type queueDoc struct {
	Start   int64    `json:"start"`
	Counted rangeSet `json:"counted,omitempty"`
	Expired int64    `json:"expired,omitempty"`
	Dropped int64    `json:"dropped,omitempty"`
}

type stateDoc struct {
	Topics map[string]map[string]queueDoc `json:"topics"` // topic -> queue id -> state
}

// decodeState decodes and checks the state file: every number is a
// non-negative queue id, offset or count, and the ranges are ordered.
func decodeState(data []byte) (map[string]map[int32]queueDoc, error) {
	var doc stateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	out := make(map[string]map[int32]queueDoc, len(doc.Topics))
	for topic, queues := range doc.Topics {
		if err := metadata.ValidTopicName(topic); err != nil {
			return nil, err
		}
		qs := make(map[int32]queueDoc, len(queues))
		for id, q := range queues {
			n, err := strconv.ParseInt(id, 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("topic %q: queue id %q: want a whole number", topic, id)
			}
			if q.Start < 0 || q.Expired < 0 || q.Dropped < 0 || !q.Counted.valid() {
				return nil, fmt.Errorf("topic %q queue %s: negative offset or count, or unordered counted ranges", topic, id)
			}
			qs[int32(n)] = q
		}
		out[topic] = qs
	}
	return out, nil
}

// encodeState encodes the state as its file holds it.
func encodeState(topics map[string]map[int32]queueDoc) ([]byte, error) {
	doc := stateDoc{Topics: make(map[string]map[string]queueDoc, len(topics))}
	for topic, queues := range topics {
		qs := make(map[string]queueDoc, len(queues))
		for id, q := range queues {
			qs[strconv.Itoa(int(id))] = q
		}
		doc.Topics[topic] = qs
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	return append(data, '\n'), err
}

// loadState reads the state file (or its backup); a missing file is an
// empty state.
func loadState(fs fsx.FS, path string) (map[string]map[int32]queueDoc, metadata.Source, error) {
	state := map[string]map[int32]queueDoc{}
	src, err := metadata.Load(fs, path, func(data []byte) error {
		s, err := decodeState(data)
		if err == nil {
			state = s
		}
		return err
	})
	if err != nil {
		return nil, src, fmt.Errorf("broker: load %s: %w", path, err)
	}
	return state, src, nil
}

// rangeSet is a set of queue offsets as sorted, disjoint, non-adjacent
// [from, to) ranges.
type rangeSet [][2]int64

func (r rangeSet) valid() bool {
	for i, x := range r {
		if x[0] < 0 || x[0] >= x[1] || (i > 0 && x[0] <= r[i-1][1]) {
			return false
		}
	}
	return true
}

// find returns the index of the first range ending after o.
func (r rangeSet) find(o int64) int {
	return sort.Search(len(r), func(i int) bool { return r[i][1] > o })
}

func (r rangeSet) has(o int64) bool {
	i := r.find(o)
	return i < len(r) && r[i][0] <= o
}

// add adds o, merging touching ranges; past maxRanges ranges the two
// lowest merge.
func (r *rangeSet) add(o int64) {
	s := *r
	i := s.find(o)
	switch {
	case i < len(s) && s[i][0] <= o: // in already
		return
	case i > 0 && s[i-1][1] == o && i < len(s) && s[i][0] == o+1: // joins two
		s[i-1][1] = s[i][1]
		s = append(s[:i], s[i+1:]...)
	case i > 0 && s[i-1][1] == o:
		s[i-1][1] = o + 1
	case i < len(s) && s[i][0] == o+1:
		s[i][0] = o
	default:
		s = append(s, [2]int64{})
		copy(s[i+1:], s[i:])
		s[i] = [2]int64{o, o + 1}
	}
	if len(s) > maxRanges {
		s[1][0] = s[0][0]
		s = s[1:]
	}
	*r = s
}

// dropBelow forgets the members below o.
func (r *rangeSet) dropBelow(o int64) {
	s := *r
	i := s.find(o)
	s = s[i:]
	if len(s) > 0 && s[0][0] < o {
		s[0][0] = o
	}
	*r = s
}
