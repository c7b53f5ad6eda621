package broker

import (
	"context"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// messageStore is what the broker uses of its store: the front ends reach
// the store only through the broker's methods (docs/ARCHITECTURE.md).
type messageStore interface {
	// writing
	Encode(msgs []*message.Message) (store.Batch, error)
	PutBatch(ctx context.Context, b store.Batch) ([]store.PutResult, error)
	PutEnd() int64
	Refusal() error

	// reading by queue
	Get(topic string, queueID int32, offset int64, maxMsgs, maxBytes int, filter store.Filter) (store.GetResult, error)
	QueueOffsets(topic string, queueID int32) (minOff, maxOff int64)
	OffsetAtTime(topic string, queueID int32, ts int64) (int64, error)
	MessageByQueueOffset(topic string, queueID int32, offset int64) (*message.Message, error)
	RaiseQueueMin(topic string, queueID int32, off int64) int64
	RecoveredQueueEnd(topic string, queueID int32) int64

	// reading by log offset, key or id
	MessageAt(phys int64) (*message.Message, error)
	BorrowMessageAt(phys int64) (m *message.Message, release func(), err error)
	MessageByOffsetID(id string) (*message.Message, error)
	MessagesByKey(topic, key string, begin, end int64, max int) ([]*message.Message, error)
	FindByKey(topic string, key []byte, begin, end int64, match func(message.View) bool) (store.PutResult, bool, error)
	ResultAt(phys int64) (store.PutResult, error)
	CommitLog() *commitlog.Log

	// dispatch
	DispatchedOffset() int64
	WaitDispatched(ctx context.Context, off int64, d time.Duration) bool
	DispatchState() store.DispatchStatus
	Kick()
	SettledDispatch() int64

	// topic deletion
	BeginDeleteTopic(topic string) error
	DeleteTopic(topic string) error
	EndDeleteTopic(topic string) error
	PendingTopicDeletions() []string
	TopicDeletedAt(topic string, phys int64) bool
	HasTopicData(topic string) bool
	Queues() []store.QueueKey

	Close() error
}

var _ messageStore = (*store.Store)(nil)
