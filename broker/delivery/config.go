package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// Store is what delivery reads and changes of the message store: the
// parking and dead-letter queues, the messages sent back, and the
// re-publishing of due messages. *store.Store implements it.
type Store interface {
	Get(topic string, queueID int32, offset int64, maxMsgs, maxBytes int, filter store.Filter) (store.GetResult, error)
	QueueOffsets(topic string, queueID int32) (minOff, maxOff int64)
	// RecoveredQueueEnd is where a queue ends in the log when the store
	// opened with records not dispatched yet.
	RecoveredQueueEnd(topic string, queueID int32) int64
	MessageAt(phys int64) (*message.Message, error)
	// BorrowMessageAt is MessageAt with a body pointing into the log until
	// release is called.
	BorrowMessageAt(phys int64) (m *message.Message, release func(), err error)
	// TopicDeletedAt reports whether topic was deleted after the record at
	// phys was stored.
	TopicDeletedAt(topic string, phys int64) bool
	// RaiseQueueMin moves a queue's min offset up to off.
	RaiseQueueMin(topic string, queueID int32, off int64) int64
	// Encode encodes messages of any topics into one batch of records;
	// PutBatch stores a batch as one unit.
	Encode(msgs []*message.Message) (store.Batch, error)
	PutBatch(ctx context.Context, b store.Batch) ([]store.PutResult, error)
}

// CommitLog is the store's commit log as delivery uses it: progress is
// recorded only once the log is durable past the re-published messages,
// and a retry reference is read where its message is. *commitlog.Log
// implements it.
type CommitLog interface {
	MaxOffset() int64
	FlushedOffset() int64
	Flush() error
	ReadRecord(off int64) (rec commitlog.Region, next int64, err error)
}

// Metadata is what delivery reads of the broker's metadata, and the
// delay levels' delivered offsets it records. *metadata.Metadata
// implements it.
type Metadata interface {
	Topic(name string) (metadata.TopicConfig, bool)
	Topics() []metadata.TopicConfig
	Group(name string) (metadata.SubscriptionGroup, bool)
	DelayOffset(level int) (int64, bool)
	SetDelayOffset(level int, offset int64) error
}

// Topics is what delivery needs of the broker's topics and groups. Errors
// wrap the sentinels of broker/brokererr.
type Topics interface {
	// InternalTopic returns the topic the broker may store its own
	// message for: any existing topic but the parking ones; a group's
	// retry or dead-letter topic is created when missing.
	InternalTopic(name string) (metadata.TopicConfig, error)
	// EnsureGroupTopic returns a group's retry or dead-letter topic,
	// created (one queue) when missing.
	EnsureGroupTopic(name string) (metadata.TopicConfig, error)
	// NextQueue picks the next write queue of a topic, round robin.
	NextQueue(tc metadata.TopicConfig) int32
	// EnsureGroup returns a consumer group, created if auto-creation
	// allows.
	EnsureGroup(name string) (metadata.SubscriptionGroup, error)
	// CheckGroupName checks a consumer group's name.
	CheckGroupName(name string) error
}

// Sender stores the messages delivery makes, through the broker's checks
// and counters.
type Sender interface {
	// PutInternal stores messages the broker generates (send-backs,
	// resent dead letters) as one unit, checked as a send is and parked
	// when delayed; queue id -1 asks the broker to pick. When owned, the
	// messages are the callee's to change.
	PutInternal(ctx context.Context, owned bool, msgs []*message.Message) ([]store.PutResult, error)
	// Put stores prepared messages (retry references) as they are.
	Put(ctx context.Context, topic string, msgs []*message.Message) ([]store.PutResult, error)
}

// Config is what a Service needs.
type Config struct {
	Log *slog.Logger
	// Now decides when parked messages are due and dead letters expire.
	Now func() time.Time
	// FS and Dir hold the progress files (TimerProgressFile, DLQStateFile):
	// Dir is the store's config directory.
	FS  fsx.FS
	Dir string
	// DelayLevels are the delays of levels 1..n (messageDelayLevel).
	DelayLevels []time.Duration
	// TimerMaxDelay bounds a delivery time ahead of now.
	TimerMaxDelay time.Duration
	// FileReservedTime is how long the log keeps a segment: a retry is a
	// reference only while its message stays younger than half of it.
	FileReservedTime time.Duration
	// DLQRetention is how long a dead letter stays listed.
	DLQRetention time.Duration
	// Tick is how often (real time) the scheduler and the timer look for
	// due messages; SweepInterval how often expired and purged dead
	// letters are swept.
	Tick, SweepInterval time.Duration
	// StoreAddr is the broker's store address, in offset message ids.
	StoreAddr netip.AddrPort

	Store     Store
	CommitLog CommitLog
	Metadata  Metadata
	Topics    Topics
	Sender    Sender
}

// Validate reports what is missing or wrong in c.
func (c Config) Validate() error {
	switch {
	case c.Log == nil || c.Now == nil || c.FS == nil:
		return errors.New("delivery: config needs Log, Now and FS")
	case c.Store == nil || c.CommitLog == nil || c.Metadata == nil || c.Topics == nil || c.Sender == nil:
		return errors.New("delivery: config needs Store, CommitLog, Metadata, Topics and Sender")
	case len(c.DelayLevels) == 0:
		return errors.New("delivery: no delay levels")
	case c.Tick <= 0 || c.SweepInterval <= 0:
		return fmt.Errorf("delivery: tick %s, sweep interval %s: want > 0", c.Tick, c.SweepInterval)
	}
	return nil
}

// The store, its commit log and the metadata serve delivery as they are.
var (
	_ Store     = (*store.Store)(nil)
	_ CommitLog = (*commitlog.Log)(nil)
	_ Metadata  = (*metadata.Metadata)(nil)
)
