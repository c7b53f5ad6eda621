package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gantrymq/gantry/internal/failpoint"
	"github.com/gantrymq/gantry/internal/fsx"
)

// Deleted topics (docs/BROKER.md, "Life cycle of topics and groups").
// Deleting a topic removes its consume queues and their files and resets
// its queue counters, so that a topic created again with the name starts
// empty at offset 0. Its records stay in the commit log until retention
// deletes them; a tombstone (the topic and the log offset every record of
// it lies below at the deletion) keeps recovery, re-dispatch, queue
// repairs and key lookups from bringing them back. Tombstones are kept in
// Root/deletedTopics.json, written before any file is deleted, and
// forgotten once retention has passed them.
//
// A deletion is pending from BeginDeleteTopic to EndDeleteTopic: the
// store's part (DeleteTopic) and the caller's (the broker's topic config
// and offsets) may be unfinished. Open finishes the store's part of a
// pending deletion (its queue files go, the log's end at Open becomes its
// offset) and PendingTopicDeletions tells the caller which to finish.
const deletedTopicsFile = "deletedTopics.json"

// tombstone is one deleted topic.
type tombstone struct {
	// Before: every record of the topic below this log offset is deleted.
	Before int64 `json:"before"`
	// Pending: the deletion has begun and not ended (EndDeleteTopic).
	Pending bool `json:"pending,omitempty"`
}

type deletedTopicsDoc struct {
	Topics map[string]tombstone `json:"topics"`
}

// deletedTopics is the store's tombstones. The dispatcher reads before
// without a lock; changes take mu and replace the map.
type deletedTopics struct {
	mu     sync.Mutex // one change at a time; held while the file is written
	doc    map[string]tombstone
	before atomic.Pointer[map[string]int64] // topic -> Before, for readers
}

// deleteStep, when set (tests), runs at each durable step of a deletion;
// an error stops the deletion there, as a crash would.
var deleteStep func(step string) error

// step marks a durable step of a deletion: tests and failpoint builds
// stop or kill the process there.
func step(name string) error {
	if failpoint.Enabled {
		if err := failpoint.Inject("store/delete-topic-" + name); err != nil {
			return err
		}
	}
	if deleteStep != nil {
		return deleteStep(name)
	}
	return nil
}

func (s *Store) deletedTopicsPath() string { return filepath.Join(s.cfg.Root, deletedTopicsFile) }

// isDeleted reports whether the record at phys, of topic, belongs to a
// deleted incarnation of the topic. The dispatcher calls it for every
// record: without tombstones it is one atomic load, and the topic's bytes
// are not copied.
func (s *Store) isDeleted(topic []byte, phys int64) bool {
	m := s.deleted.before.Load()
	if m == nil || len(*m) == 0 {
		return false
	}
	return phys < (*m)[string(topic)]
}

// TopicDeletedAt reports whether the record at log offset phys of topic
// was stored before the topic was deleted: the broker drops such a
// parked message instead of delivering it into a topic of the same name
// created since.
func (s *Store) TopicDeletedAt(topic string, phys int64) bool {
	m := s.deleted.before.Load()
	return m != nil && phys < (*m)[topic]
}

// saveDeletedLocked writes the tombstones and publishes them to readers.
// d.mu is held.
func (s *Store) saveDeletedLocked(doc map[string]tombstone) error {
	b, err := json.MarshalIndent(deletedTopicsDoc{Topics: doc}, "", "  ")
	if err != nil {
		return err
	}
	if err := fsx.WriteFileAtomic(s.cfg.FS, s.deletedTopicsPath(), append(b, '\n')); err != nil {
		return fmt.Errorf("store: save %s: %w", s.deletedTopicsPath(), err)
	}
	s.publishDeletedLocked(doc)
	return nil
}

func (s *Store) publishDeletedLocked(doc map[string]tombstone) {
	s.deleted.doc = doc
	before := make(map[string]int64, len(doc))
	for t, ts := range doc {
		before[t] = ts.Before
	}
	s.deleted.before.Store(&before)
}

// openDeleted loads the tombstones and finishes the store's part of every
// pending deletion: its consume-queue files go, its queues leave the
// dispatch checkpoint, and its offset becomes the log's end (records
// stored until the crash were of the deleted topic). Open calls it once
// the commit log is recovered, before the queues are opened.
func (s *Store) openDeleted() error {
	s.deleted.mu.Lock()
	defer s.deleted.mu.Unlock()
	doc := map[string]tombstone{}
	b, err := fsx.ReadFile(s.cfg.FS, s.deletedTopicsPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("store: read %s: %w", s.deletedTopicsPath(), err)
	default:
		var d deletedTopicsDoc
		if err := json.Unmarshal(b, &d); err != nil {
			// Written atomically: a bad file was damaged after the fact.
			// Without it deleted messages could come back: refuse to start.
			return fmt.Errorf("store: %s is damaged (%w); it lists deleted topics whose messages must not be served again: "+
				"repair it or, to serve them again, remove it", s.deletedTopicsPath(), err)
		}
		for t, ts := range d.Topics {
			if ts.Before < 0 || t == "" {
				return fmt.Errorf("store: %s: bad entry %q %+v", s.deletedTopicsPath(), t, ts)
			}
			doc[t] = ts
		}
	}
	changed := false
	end := s.cl.MaxOffset()
	for _, t := range slices.Sorted(maps.Keys(doc)) {
		ts := doc[t]
		if !ts.Pending {
			continue
		}
		if ts.Before < end {
			ts.Before, changed = end, true
			doc[t] = ts
		}
		if err := removeTree(s.cfg.FS, s.topicDir(t)); err != nil {
			return err
		}
		if err := s.dropFromCheckpoint(t); err != nil {
			return err
		}
		s.log.Warn("finishing a topic deletion interrupted by a stop", "topic", t, "before", ts.Before)
	}
	if changed {
		return s.saveDeletedLocked(doc)
	}
	s.publishDeletedLocked(doc)
	return nil
}

// dropFromCheckpoint removes topic's queues from the dispatch checkpoint:
// recovery would otherwise take their missing files for damage and
// rebuild every queue from the log.
func (s *Store) dropFromCheckpoint(topic string) error {
	cp, ok := s.readCheckpoint()
	if !ok {
		return nil
	}
	n := len(cp.Queues)
	maps.DeleteFunc(cp.Queues, func(name string, _ int64) bool {
		i := strings.LastIndexByte(name, '/')
		return i >= 0 && name[:i] == topic
	})
	if len(cp.Queues) == n {
		return nil
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return fsx.WriteFileAtomic(s.cfg.FS, s.checkpointPath(), b)
}

func (s *Store) topicDir(topic string) string {
	return filepath.Join(s.cfg.Root, "consumequeue", topic)
}

// BeginDeleteTopic records, durably, that topic's deletion has begun:
// from here on a crash makes the next Open finish the store's part of it,
// and PendingTopicDeletions name it until EndDeleteTopic.
func (s *Store) BeginDeleteTopic(topic string) error {
	if topic == "" || strings.ContainsAny(topic, `/\`) || topic == "." || topic == ".." {
		return fmt.Errorf("store: delete topic %q: not a topic name", topic)
	}
	s.deleted.mu.Lock()
	defer s.deleted.mu.Unlock()
	doc := maps.Clone(s.deleted.doc)
	if doc == nil {
		doc = map[string]tombstone{}
	}
	ts := doc[topic]
	ts.Pending = true
	ts.Before = max(ts.Before, s.cl.MaxOffset())
	doc[topic] = ts
	return s.saveDeletedLocked(doc)
}

// DeleteTopic deletes topic's messages as far as readers can tell: every
// record of it stored so far leaves its consume queues and key lookups
// and is never dispatched again; its queues are closed and their files
// deleted; its queue counters restart at 0. It is idempotent. Call it
// between BeginDeleteTopic and EndDeleteTopic, after the caller has
// stopped accepting messages for the topic (a message stored meanwhile
// lands in the topic's next incarnation).
func (s *Store) DeleteTopic(topic string) error {
	s.dispatchMu.Lock() // no queue of topic is created or appended to meanwhile
	defer s.dispatchMu.Unlock()
	s.deleted.mu.Lock()
	defer s.deleted.mu.Unlock()
	ts, ok := s.deleted.doc[topic]
	if !ok || !ts.Pending {
		return fmt.Errorf("store: delete topic %q: not begun (BeginDeleteTopic)", topic)
	}
	s.cl.Fence(func(end int64) {
		ts.Before = max(ts.Before, end)
		for k := range s.next {
			if k.Topic == topic {
				delete(s.next, k)
			}
		}
	})
	doc := maps.Clone(s.deleted.doc)
	doc[topic] = ts
	if err := s.saveDeletedLocked(doc); err != nil {
		return err
	}
	if err := step("fenced"); err != nil {
		return err
	}
	s.qmu.Lock()
	var gone []*cqueue
	for k, q := range s.queues {
		if k.Topic == topic {
			gone = append(gone, q)
			delete(s.queues, k)
		}
	}
	delete(s.dcache, topic)
	s.qmu.Unlock()
	var errs []error
	for _, q := range gone {
		errs = append(errs, q.Close()) // a Get holding it answers ErrClosed and looks again
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("closing a deleted topic's consume queues", "topic", topic, "err", err)
	}
	if err := removeTree(s.cfg.FS, s.topicDir(topic)); err != nil {
		return err
	}
	if err := step("files-removed"); err != nil {
		return err
	}
	// The next start must not take the queues' missing files for damage.
	if err := s.checkpoint(false); err != nil {
		if err := s.dropFromCheckpoint(topic); err != nil {
			return fmt.Errorf("store: delete topic %q: dispatch checkpoint: %w", topic, err)
		}
	}
	s.log.Info("topic's consume queues deleted", "topic", topic, "queues", len(gone), "before", ts.Before)
	return nil
}

// EndDeleteTopic records that topic's deletion is complete: the caller's
// part is done and durable. The tombstone stays until retention passes it.
func (s *Store) EndDeleteTopic(topic string) error {
	s.deleted.mu.Lock()
	defer s.deleted.mu.Unlock()
	ts, ok := s.deleted.doc[topic]
	if !ok || !ts.Pending {
		return nil
	}
	doc := maps.Clone(s.deleted.doc)
	ts.Pending = false
	doc[topic] = ts
	return s.saveDeletedLocked(doc)
}

// PendingTopicDeletions lists, sorted, the topics whose deletion began and
// did not end: the caller finishes its part and calls EndDeleteTopic.
func (s *Store) PendingTopicDeletions() []string {
	s.deleted.mu.Lock()
	defer s.deleted.mu.Unlock()
	var out []string
	for t, ts := range s.deleted.doc {
		if ts.Pending {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// DeletedTopics returns the tombstones: each deleted topic and the log
// offset its deleted records lie below, until retention passes it.
func (s *Store) DeletedTopics() map[string]int64 {
	m := s.deleted.before.Load()
	if m == nil {
		return map[string]int64{}
	}
	return maps.Clone(*m)
}

// HasTopicData reports whether the store holds a consume queue of topic,
// open or only on disk.
func (s *Store) HasTopicData(topic string) bool {
	s.qmu.RLock()
	for k := range s.queues {
		if k.Topic == topic {
			s.qmu.RUnlock()
			return true
		}
	}
	s.qmu.RUnlock()
	_, err := s.cfg.FS.Stat(s.topicDir(topic))
	return err == nil
}

// forgetDeleted drops the tombstones retention has passed: the log holds
// no record below them any more. The flush loop calls it.
func (s *Store) forgetDeleted() {
	m := s.deleted.before.Load()
	if m == nil || len(*m) == 0 {
		return
	}
	logMin := s.cl.MinOffset()
	s.deleted.mu.Lock()
	defer s.deleted.mu.Unlock()
	doc := maps.Clone(s.deleted.doc)
	maps.DeleteFunc(doc, func(_ string, ts tombstone) bool { return !ts.Pending && ts.Before <= logMin })
	if len(doc) == len(s.deleted.doc) {
		return
	}
	if err := s.saveDeletedLocked(doc); err != nil {
		s.log.Warn("forgetting deleted topics retention has passed failed; will retry", "err", err)
	}
}
