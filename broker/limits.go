package broker

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gantrymq/gantry/broker/limits"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// Retention, backlog limits and TTL (broker/limits; docs/BROKER.md,
// "Retention, limits and TTL"): the broker opens the service once its
// store is recovered, checks topic attributes and TTL_MS properties where
// they come in, lets the service hide expired, aged and dropped messages
// from every pull and refuse sends to full queues, and closes it before
// the store.

// Topic attribute keys and the TTL_MS property of broker/limits.
const (
	AttrRetentionHours = limits.AttrRetentionHours
	AttrRetentionMs    = limits.AttrRetentionMs
	AttrMaxBacklog     = limits.AttrMaxBacklog
	AttrBacklogPolicy  = limits.AttrBacklogPolicy
	AttrDefaultTTL     = limits.AttrDefaultTTL
	PolicyDropOldest   = limits.PolicyDropOldest
	PolicyRefuse       = limits.PolicyRefuse
	PropTTL            = limits.PropTTL
	// LimitsStateFile is the limits' file in the store's config directory.
	LimitsStateFile = limits.StateFile
)

// ErrBacklogFull: a send was refused because a queue of its topic holds
// queue.max.backlog messages not yet consumed and the topic's
// queue.max.policy is refuse (a *BacklogFullError names the queue and the
// limit). Nothing was stored; it is definite.
var ErrBacklogFull = limits.ErrBacklogFull

// BacklogFullError is the refusal of a send to a full queue.
type BacklogFullError = limits.BacklogFullError

// limitsSweepInterval is how often (real time) the limits' sweep runs:
// pulls decide with Now on their own, the sweep moves queue starts,
// counts what no pull read and saves the state.
const limitsSweepInterval = 5 * time.Second

// openLimits opens the retention, backlog and TTL service once the store
// is recovered and the interrupted deletions are finished.
func (b *Broker) openLimits(sc store.Config) error {
	l, err := limits.Open(limits.Config{
		Log: b.log, Now: b.cfg.Now, FS: storeFS(sc), Dir: filepath.Join(b.cfg.StorePathRootDir, "config"),
		FileReservedTime: b.cfg.FileReservedTime, SweepInterval: limitsSweepInterval,
		Store: b.store, Metadata: b.meta,
	})
	if err != nil {
		return err
	}
	b.limits = l
	b.limitsOpen.Store(true)
	return nil
}

// keepFrom is the store's KeepFrom: the lower of the dead letters' pin and
// the one of topics kept longer than fileReservedTime. Until both are
// loaded it pins the whole log.
func (b *Broker) keepFrom() int64 {
	keep := b.dlqKeepFrom()
	if !b.limitsOpen.Load() {
		return 0
	}
	return min(keep, b.limits.KeepFrom())
}

// refreshLimits makes the limits read the topics' attributes again.
func (b *Broker) refreshLimits() {
	if b.limitsOpen.Load() {
		b.limits.Refresh()
	}
}

// forgetLimits drops a deleted topic's limits state.
func (b *Broker) forgetLimits(topic string) error {
	if !b.limitsOpen.Load() {
		return nil // Open drops the state of topics gone
	}
	return b.limits.Forget(topic)
}

// checkLimitAttrs refuses the attributes of broker/limits' namespaces
// (retention.*, queue.max.*, ttl.*) that it does not accept, naming each.
func checkLimitAttrs(tc metadata.TopicConfig) error {
	if _, err := limits.ParsePolicy(tc.Attributes); err != nil {
		return fmt.Errorf("%w: topic %q: %w", ErrInvalidArgument, tc.TopicName, err)
	}
	return nil
}

// checkTTL checks a TTL_MS property value of a sent message.
func checkTTL(v []byte) error {
	_, err := limits.ParseTTL(v)
	return err
}

// limitsBeforeRead and limitsAfterRead are a pull's read through the
// limits: a full drop-oldest queue drops first, and the expired and aged
// records read are left out. Dead letters are not the limits' (they expire
// by dlqRetentionHours).
func (b *Broker) limitsBeforeRead(topic string, queueID int32) {
	if !isDLQTopic(topic) {
		b.limits.BeforeRead(topic, queueID)
	}
}

func (b *Broker) limitsAfterRead(res *PullResult, topic string, queueID int32) {
	if !isDLQTopic(topic) {
		res.Records = b.limits.AfterRead(topic, queueID, res.Records)
	}
}

// sendAdmission is the room a send to a refusing topic holds in its
// queues: direct[i] says whether message i goes straight to the topic
// (not parked).
type sendAdmission struct {
	adm    *limits.Admission
	direct []bool
}

// admitSend reserves room for a send's n messages in topic's queues when
// they refuse sends once full; queueOf(i) is message i's queue and whether
// it goes straight to the topic. The error is a *BacklogFullError.
func (b *Broker) admitSend(topic string, n int, queueOf func(i int) (int32, bool)) (sendAdmission, error) {
	if !b.limits.Refuses(topic) {
		return sendAdmission{}, nil
	}
	direct := make([]bool, n)
	ids := make([]int32, 0, n)
	for i := range n {
		id, ok := queueOf(i)
		if direct[i] = ok; ok {
			ids = append(ids, id)
		}
	}
	adm, err := b.limits.Admit(topic, ids)
	return sendAdmission{adm: adm, direct: direct}, err
}

// done settles the admission with the send's results.
func (a sendAdmission) done(res []SendResult) {
	if a.adm == nil {
		return
	}
	var stored []limits.Stored
	for i, r := range res {
		if i < len(a.direct) && a.direct[i] && !r.Duplicate {
			stored = append(stored, limits.Stored{QueueID: r.QueueID, QueueOffset: r.QueueOffset})
		}
	}
	a.adm.Done(stored)
}

// messagesQueueOf is admitSend's queueOf for a Send's prepared messages.
func messagesQueueOf(topic string, msgs []*message.Message) func(int) (int32, bool) {
	return func(i int) (int32, bool) { return msgs[i].QueueID, msgs[i].Topic == topic }
}

// TopicLimits are a topic's retention, backlog limit and default TTL (its
// attributes; zero: not set) and its expired and dropped messages.
type TopicLimits struct {
	Retention     time.Duration // 0: fileReservedTime
	MaxBacklog    int64         // per queue; 0: none
	BacklogPolicy string        // PolicyDropOldest or PolicyRefuse; "" without MaxBacklog
	DefaultTTL    time.Duration // 0: none
	// Expired and Dropped are summed over the topic's queues (see
	// QueueStatus).
	Expired, Dropped int64
}

// TopicLimits returns a topic's limits and counts.
func (b *Broker) TopicLimits(topic string) (TopicLimits, error) {
	if !b.calls.enter() {
		return TopicLimits{}, ErrShuttingDown
	}
	defer b.calls.leave()
	tc, err := b.topic(topic)
	if err != nil {
		return TopicLimits{}, err
	}
	p := b.limits.PolicyOf(topic)
	out := TopicLimits{Retention: p.Retention, MaxBacklog: p.MaxBacklog, BacklogPolicy: p.BacklogPolicy(), DefaultTTL: p.DefaultTTL}
	for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
		f := b.limits.Figures(topic, q)
		out.Expired += f.Expired
		out.Dropped += f.Dropped
	}
	return out, nil
}

// TopicLimitCounts are a topic's expired and dropped messages.
type TopicLimitCounts = limits.TopicCounts

// LimitCounts returns, per topic with any, the messages found expired
// (never delivered) and dropped from full drop-oldest queues before every
// group consumed them, since the topic was created (they survive
// restarts); sorted by topic, nil once Close has started. These are the
// counters for /metrics (one series per topic).
func (b *Broker) LimitCounts() []TopicLimitCounts {
	if !b.calls.enter() {
		return nil
	}
	defer b.calls.leave()
	return b.limits.Counts()
}

// queueLimits fills a queue status's backlog and counts.
func (b *Broker) queueLimits(topic string, qs *QueueStatus) {
	f := b.limits.Figures(topic, qs.QueueID)
	qs.Backlog, qs.Expired, qs.Dropped = f.Backlog, f.Expired, f.Dropped
	qs.MinOffset, _ = b.store.QueueOffsets(topic, qs.QueueID) // a drop may have moved it
}
