package delivery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

// DLQStateFile is the file, in the store's config directory, that keeps
// what the commit log cannot: per group, the dead letters resent (how
// often, when last) and purged, and the queue offset below which every
// dead letter is gone (expired or purged). It is written like the
// metadata files (metadata.Save: atomic, with a .bak of the previous
// version) after every resend and purge and when a sweep moves the
// offset, and read at Open.
//
//	{"groups": {"<group>": {"minOffset": 12, "resends": {"14": {"count": 2, "lastMs": 1700000000000}},
//	                         "purged": [[15, 17]]}}}
const DLQStateFile = "dlqState.json"

// dlqMark is what the broker knows of one dead letter beyond its record.
type dlqMark struct {
	Count  int32 `json:"count"`  // times resent
	LastMs int64 `json:"lastMs"` // last resend, unix ms
}

// dlqGroup is one group's DLQ state.
type dlqGroup struct {
	// MinOffset: every dead letter below it is gone (expired or purged).
	MinOffset int64 `json:"minOffset"`
	// Resends maps a DLQ queue offset to its resends.
	Resends map[int64]dlqMark `json:"resends,omitempty"`
	// Purged holds the purged offsets at or above MinOffset.
	Purged rangeSet `json:"purged,omitempty"`
}

type dlqStateDoc struct {
	Groups map[string]*dlqGroup `json:"groups"`
}

// dlqState is every group's DLQ state and the DLQ counters. Its methods
// are safe for concurrent use; mu is a leaf lock.
type dlqState struct {
	fs   fsx.FS
	path string

	mu     sync.Mutex
	groups map[string]*dlqGroup
	dirty  bool             // changed since the last save
	gen    uint64           // changes so far (Version)
	stored map[string]int64 // dead letters stored since Open, by group
	resent map[string]int64 // resends since Open, by group
	saveMu sync.Mutex       // one save at a time; taken before mu
}

// openDLQState loads the state file (or its backup); a missing file is an
// empty state.
func openDLQState(fs fsx.FS, dir string) (*dlqState, metadata.Source, error) {
	s := &dlqState{fs: fs, path: filepath.Join(dir, DLQStateFile),
		groups: map[string]*dlqGroup{}, stored: map[string]int64{}, resent: map[string]int64{}}
	src, err := metadata.Load(fs, s.path, func(data []byte) error {
		doc, err := decodeDLQState(data)
		if err != nil {
			return err
		}
		s.groups = doc.Groups
		return nil
	})
	if err != nil {
		return nil, src, fmt.Errorf("broker: load %s: %w", s.path, err)
	}
	return s, src, nil
}

// decodeDLQState decodes and checks the state file.
func decodeDLQState(data []byte) (dlqStateDoc, error) {
	var doc dlqStateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, fmt.Errorf("bad JSON: %w", err)
	}
	if doc.Groups == nil {
		doc.Groups = map[string]*dlqGroup{}
	}
	for name, g := range doc.Groups {
		if g == nil || g.MinOffset < 0 || !g.Purged.valid() {
			return doc, fmt.Errorf("group %q: negative offset or unordered purged ranges", name)
		}
		for off, m := range g.Resends {
			if off < 0 || m.Count <= 0 {
				return doc, fmt.Errorf("group %q: resend mark %d: count %d", name, off, m.Count)
			}
		}
	}
	return doc, nil
}

// group returns a group's state, creating it; call with mu held.
func (s *dlqState) group(name string) *dlqGroup {
	g := s.groups[name]
	if g == nil {
		g = &dlqGroup{}
		s.groups[name] = g
	}
	return g
}

// DLQView is a copy of what deciding a dead letter's visibility needs.
type DLQView struct {
	minOffset int64
	purged    rangeSet
}

func (v DLQView) gone(off int64) bool { return off < v.minOffset || v.purged.has(off) }

// view returns a snapshot of group's min offset and purged offsets.
func (s *dlqState) view(group string) DLQView {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[group]
	if g == nil {
		return DLQView{}
	}
	return DLQView{minOffset: g.MinOffset, purged: slices.Clone(g.Purged)}
}

// mark returns an entry's resend mark.
func (s *dlqState) mark(group string, off int64) dlqMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[group]; g != nil {
		return g.Resends[off]
	}
	return dlqMark{}
}

// recordResend records a resend of group's entry at off at nowMs and
// returns the entry's resend count.
func (s *dlqState) recordResend(group string, off, nowMs int64) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.group(group)
	if g.Resends == nil {
		g.Resends = map[int64]dlqMark{}
	}
	m := g.Resends[off]
	m.Count++
	m.LastMs = nowMs
	g.Resends[off] = m
	s.resent[group]++
	s.dirty, s.gen = true, s.gen+1
	return m.Count
}

// purge marks offsets purged and moves the group's min offset past a
// purged prefix; it returns the new min offset.
func (s *dlqState) purge(group string, offs []int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.group(group)
	for _, o := range offs {
		if o >= g.MinOffset {
			g.Purged.add(o, o+1)
		}
	}
	s.dirty, s.gen = true, s.gen+1
	g.advance(g.MinOffset)
	return g.MinOffset
}

// advance moves the group's min offset to at least off, then past purged
// offsets, and forgets the marks below it. It reports whether it moved;
// call with mu held.
func (g *dlqGroup) advance(off int64) bool {
	off = g.Purged.end(max(off, g.MinOffset))
	if off <= g.MinOffset {
		return false
	}
	g.MinOffset = off
	g.Purged.dropBelow(off)
	maps.DeleteFunc(g.Resends, func(o int64, _ dlqMark) bool { return o < off })
	return true
}

// advance moves group's min offset to at least off (past purged offsets
// too) and returns it.
func (s *dlqState) advance(group string, off int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[group] == nil && off <= 0 {
		return 0 // nothing to record
	}
	g := s.group(group)
	if g.advance(off) {
		s.dirty, s.gen = true, s.gen+1
	}
	return g.MinOffset
}

// countStored counts a new dead letter of group.
func (s *dlqState) countStored(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stored[group]++
}

// forget drops group's dead-letter state and counters: its dead-letter
// topic was deleted, and the next one starts at offset 0.
func (s *dlqState) forget(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.groups[group]; ok {
		delete(s.groups, group)
		s.dirty, s.gen = true, s.gen+1
	}
	delete(s.stored, group)
	delete(s.resent, group)
}

// counters returns the dead letters stored and resent since Open, by group.
func (s *dlqState) counters() (stored, resent map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.stored), maps.Clone(s.resent)
}

// save writes the state if it changed since the last save.
func (s *dlqState) save() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	data, err := json.MarshalIndent(dlqStateDoc{Groups: s.groups}, "", "  ")
	s.dirty = false
	s.mu.Unlock()
	if err == nil {
		err = metadata.Save(s.fs, s.path, append(data, '\n'))
	}
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("broker: save %s: %w", s.path, err)
	}
	return nil
}

// version returns the state's change count.
func (s *dlqState) version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// snapshot returns the state as its file holds it, and its version.
func (s *dlqState) snapshot() (uint64, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := json.Marshal(dlqStateDoc{Groups: s.groups})
	return s.gen, data, err
}

// rangeSet is a set of offsets as sorted, disjoint, non-adjacent
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

// end returns o if it is not in the set, else the end of its range.
func (r rangeSet) end(o int64) int64 {
	if i := r.find(o); i < len(r) && r[i][0] <= o {
		return r[i][1]
	}
	return o
}

// count returns how many members lie in [from, to).
func (r rangeSet) count(from, to int64) int64 {
	var n int64
	for _, x := range r[r.find(from):] {
		lo, hi := max(x[0], from), min(x[1], to)
		if lo >= to {
			break
		}
		n += max(hi-lo, 0)
	}
	return n
}

// add adds [from, to), merging touching ranges.
func (r *rangeSet) add(from, to int64) {
	s := *r
	i := sort.Search(len(s), func(i int) bool { return s[i][1] >= from }) // first range touching or after from
	j := i
	for j < len(s) && s[j][0] <= to {
		from, to = min(from, s[j][0]), max(to, s[j][1])
		j++
	}
	*r = slices.Replace(s, i, j, [2]int64{from, to})
}

// dropBelow removes the members below o.
func (r *rangeSet) dropBelow(o int64) {
	s := *r
	i := s.find(o)
	s = s[i:]
	if len(s) > 0 && s[0][0] < o {
		s[0][0] = o
	}
	*r = slices.Clip(s)
	if len(*r) == 0 {
		*r = nil
	}
}
