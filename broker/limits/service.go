package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/tick"
)

// Store is what the service reads and changes of the message store.
// *store.Store implements it.
type Store interface {
	Get(topic string, queueID int32, offset int64, maxMsgs, maxBytes int, filter store.Filter) (store.GetResult, error)
	QueueOffsets(topic string, queueID int32) (minOff, maxOff int64)
	// RaiseQueueMin hides a queue's entries below off (not persisted).
	RaiseQueueMin(topic string, queueID int32, off int64) int64
}

// Metadata is what the service reads of the broker's metadata: the topics'
// attributes and the groups' committed offsets. *metadata.Metadata
// implements it.
type Metadata interface {
	Topics() []metadata.TopicConfig
	OffsetKeys(group, topic string) [][2]string
	Offsets(group, topic string) map[int32]int64
	// Version changes whenever a table (offsets among them) changes.
	Version() uint64
}

// Config is what a Service needs.
type Config struct {
	Log *slog.Logger
	// Now decides what has expired or aged out.
	Now func() time.Time
	// FS and Dir hold StateFile: Dir is the store's config directory.
	FS  fsx.FS
	Dir string
	// FileReservedTime is how long the commit log keeps its segments: a
	// topic retention above it pins the log (KeepFrom).
	FileReservedTime time.Duration
	// SweepInterval is how often (real time) the sweep runs.
	SweepInterval time.Duration

	Store    Store
	Metadata Metadata
}

// Validate reports what is missing or wrong in c.
func (c Config) Validate() error {
	switch {
	case c.Log == nil || c.Now == nil || c.FS == nil || c.Dir == "":
		return errors.New("limits: config needs Log, Now, FS and Dir")
	case c.Store == nil || c.Metadata == nil:
		return errors.New("limits: config needs Store and Metadata")
	case c.SweepInterval <= 0:
		return fmt.Errorf("limits: sweep interval %s: want > 0", c.SweepInterval)
	}
	return nil
}

// Service applies the topics' retention, backlog limits and TTLs (see the
// package doc). Its methods are safe for concurrent use.
type Service struct {
	cfg  Config
	log  *slog.Logger
	path string

	policies atomic.Pointer[policyTable] // rebuilt by Refresh

	mu     sync.Mutex // guards topics and warned; taken before no other lock
	topics map[string]*topicState
	warned map[string]bool // bad attributes already logged: "topic\x00error"

	dirty  atomic.Bool // state changed since the last save
	saveMu sync.Mutex  // one save at a time; taken before a topicState's mu

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// policyTable is every topic with a policy.
type policyTable struct {
	byTopic map[string]topicPolicy
	// anyTTL: some topic has a default TTL, which its retries (in the
	// groups' retry topics) keep.
	anyTTL bool
}

// topicPolicy is a topic's policy and its queue count.
type topicPolicy struct {
	Policy
	queues int32
}

// topicState is what the service keeps of one topic's queues.
type topicState struct {
	mu        sync.Mutex // guards queues' non-atomic fields and floors
	queues    map[int32]*queueState
	floors    map[int32]int64 // lowest committed offset per queue over the groups; nil: not read yet
	floorsVer uint64          // Metadata.Version when floors was read
}

// queueState is one queue's state.
type queueState struct {
	start            atomic.Int64 // offsets below are hidden (written under mu)
	expired, dropped atomic.Int64
	counted          rangeSet // offsets whose expiry was counted, at or above start
	inflight         int64    // messages admitted and not yet settled (refuse policy)
	stamped          int64    // past the last offset an admitted send stored
}

// Open loads the state file, raises each queue's min offset to its saved
// start and reads the topics' policies. The store is open; Start starts
// the sweep.
func Open(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Log, path: filepath.Join(cfg.Dir, StateFile),
		topics: map[string]*topicState{}, warned: map[string]bool{}}
	saved, src, err := loadState(cfg.FS, s.path)
	if err != nil {
		return nil, err
	}
	if src == metadata.SourceBackup {
		s.log.Warn("limits state file unusable; loaded its backup", "file", s.path)
		s.dirty.Store(true)
	}
	exists := map[string]bool{}
	for _, tc := range cfg.Metadata.Topics() {
		exists[tc.TopicName] = true
	}
	for topic, queues := range saved {
		if !exists[topic] { // deleted while the state was not saved
			s.dirty.Store(true)
			continue
		}
		ts := s.topic(topic)
		for id, d := range queues {
			q := ts.queue(id)
			q.start.Store(d.Start)
			q.counted = d.Counted
			q.expired.Store(d.Expired)
			q.dropped.Store(d.Dropped)
			cfg.Store.RaiseQueueMin(topic, id, d.Start)
		}
	}
	s.Refresh()
	return s, nil
}

// Start starts the sweep, every SweepInterval until Close.
func (s *Service) Start() {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Go(func() { tick.Every(ctx, s.cfg.SweepInterval, s.Sweep) })
}

// Close stops the sweep and saves the state.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		s.wg.Wait()
		s.closeErr = s.save()
	})
	return s.closeErr
}

// Refresh reads the topics' policies again: call it after any change of
// the topic table. A stored attribute this package refuses (a topic file
// edited by hand) is logged once and ignored.
func (s *Service) Refresh() {
	pt := &policyTable{byTopic: map[string]topicPolicy{}}
	for _, tc := range s.cfg.Metadata.Topics() {
		p, err := ParsePolicy(tc.Attributes)
		if err != nil {
			s.warnOnce(tc.TopicName, err)
		}
		if p.IsZero() {
			continue
		}
		pt.byTopic[tc.TopicName] = topicPolicy{Policy: p, queues: max(tc.ReadQueueNums, tc.WriteQueueNums)}
		pt.anyTTL = pt.anyTTL || p.DefaultTTL > 0
	}
	s.policies.Store(pt)
}

func (s *Service) warnOnce(topic string, err error) {
	key := topic + "\x00" + err.Error()
	s.mu.Lock()
	seen := s.warned[key]
	s.warned[key] = true
	s.mu.Unlock()
	if !seen {
		s.log.Warn("topic attributes refused; ignoring them", "topic", topic, "err", err)
	}
}

// PolicyOf returns topic's policy (zero when it has none).
func (s *Service) PolicyOf(topic string) Policy { return s.policy(topic).Policy }

func (s *Service) policy(topic string) topicPolicy {
	if pt := s.policies.Load(); pt != nil {
		return pt.byTopic[topic]
	}
	return topicPolicy{}
}

// topic returns topic's state, creating it.
func (s *Service) topic(name string) *topicState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.topics[name]
	if ts == nil {
		ts = &topicState{queues: map[int32]*queueState{}}
		s.topics[name] = ts
	}
	return ts
}

// queue returns a queue's state, creating it; call with ts.mu held (or
// before the service is shared).
func (ts *topicState) queue(id int32) *queueState {
	q := ts.queues[id]
	if q == nil {
		q = &queueState{}
		ts.queues[id] = q
	}
	return q
}

// Forget drops a deleted topic's state and saves the state file: a topic
// created again with the name starts with none.
func (s *Service) Forget(topic string) error {
	s.mu.Lock()
	_, had := s.topics[topic]
	delete(s.topics, topic)
	s.mu.Unlock()
	if !had {
		return nil
	}
	s.dirty.Store(true)
	return s.save()
}

// raise hides a queue's offsets below start; ts.mu is held.
func (s *Service) raise(topic string, id int32, q *queueState, start int64) {
	if start <= q.start.Load() {
		return
	}
	q.start.Store(start)
	q.counted.dropBelow(start)
	s.cfg.Store.RaiseQueueMin(topic, id, start)
	s.dirty.Store(true)
}

// save writes the state file if the state changed since the last save.
func (s *Service) save() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if !s.dirty.Swap(false) {
		return nil
	}
	s.mu.Lock()
	topics := maps.Clone(s.topics)
	s.mu.Unlock()
	doc := map[string]map[int32]queueDoc{}
	for name, ts := range topics {
		ts.mu.Lock()
		for id, q := range ts.queues {
			d := queueDoc{Start: q.start.Load(), Counted: slices.Clone(q.counted), Expired: q.expired.Load(), Dropped: q.dropped.Load()}
			if d.Start == 0 && len(d.Counted) == 0 && d.Expired == 0 && d.Dropped == 0 {
				continue
			}
			if doc[name] == nil {
				doc[name] = map[int32]queueDoc{}
			}
			doc[name][id] = d
		}
		ts.mu.Unlock()
	}
	data, err := encodeState(doc)
	if err == nil {
		err = metadata.Save(s.cfg.FS, s.path, data)
	}
	if err != nil {
		s.dirty.Store(true)
		return fmt.Errorf("broker: save %s: %w", s.path, err)
	}
	return nil
}

// TopicCounts are a topic's expired and dropped messages, summed over its
// queues, since the topic was created (they survive restarts).
type TopicCounts struct {
	Topic            string
	Expired, Dropped int64
}

// Counts returns the counts of every topic with any, sorted by topic.
func (s *Service) Counts() []TopicCounts {
	s.mu.Lock()
	topics := maps.Clone(s.topics)
	s.mu.Unlock()
	var out []TopicCounts
	for name, ts := range topics {
		c := TopicCounts{Topic: name}
		ts.mu.Lock()
		for _, q := range ts.queues {
			c.Expired += q.expired.Load()
			c.Dropped += q.dropped.Load()
		}
		ts.mu.Unlock()
		if c.Expired > 0 || c.Dropped > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b TopicCounts) int { return cmp.Compare(a.Topic, b.Topic) })
	return out
}

// QueueFigures are one queue's backlog and counts.
type QueueFigures struct {
	// Backlog is the queue's messages not yet consumed by every group with
	// an offset in it (all its readable messages when none has one).
	Backlog int64
	// Expired and Dropped count the queue's messages found expired, and
	// dropped from a full queue before every group consumed them.
	Expired, Dropped int64
}

// Figures returns a queue's backlog and counts, a full queue's oldest
// messages dropped first under drop-oldest.
func (s *Service) Figures(topic string, id int32) QueueFigures {
	tp := s.policy(topic)
	ts := s.topic(topic)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if tp.MaxBacklog > 0 && !tp.Refuse {
		s.dropOldest(ts, topic, id, tp.MaxBacklog)
	}
	q := ts.queue(id)
	return QueueFigures{Backlog: s.backlog(ts, topic, id, true), Expired: q.expired.Load(), Dropped: q.dropped.Load()}
}
