package broker

import (
	"context"
	"io"
	"path/filepath"
	"slices"

	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// Delivery (broker/delivery): retry topics, send-back, parked messages
// and their delivery, dead-letter queues. The broker opens and closes the
// delivery service and passes its calls through the call gate; the types
// are delivery's, named here as the front ends know them.

type (
	SendBackRequest  = delivery.SendBackRequest
	SendBackResult   = delivery.SendBackResult
	DLQFilter        = delivery.DLQFilter
	DLQEntry         = delivery.DLQEntry
	DLQEvent         = delivery.DLQEvent
	DLQMessage       = delivery.DLQMessage
	DLQListRequest   = delivery.DLQListRequest
	DLQPage          = delivery.DLQPage
	DLQRef           = delivery.DLQRef
	DLQExportRecord  = delivery.DLQExportRecord
	DLQSelect        = delivery.DLQSelect
	DLQResendRequest = delivery.DLQResendRequest
	DLQResent        = delivery.DLQResent
	DLQResendFailure = delivery.DLQResendFailure
	DLQResendResult  = delivery.DLQResendResult
	DLQGroupStats    = delivery.DLQGroupStats
)

// ErrDeadLetterNotFound: no live dead letter (stored, not expired, not
// purged) has the offset or id asked for.
var ErrDeadLetterNotFound = delivery.ErrDeadLetterNotFound

const (
	DefaultDLQListLimit = delivery.DefaultDLQListLimit // DLQListRequest.Limit 0
	MaxDLQListLimit     = delivery.MaxDLQListLimit     // larger limits are lowered to it
	// DLQStateFile and TimerProgressFile are delivery's files in the
	// store's config directory.
	DLQStateFile      = delivery.DLQStateFile
	TimerProgressFile = delivery.TimerProgressFile
)

// openDelivery creates the template and parking topics and opens the
// delivery of parked messages and the dead-letter state (its loops start
// with the broker's), once the store is recovered.
func (b *Broker) openDelivery(sc store.Config) error {
	if err := b.syncTemplateTopic(); err != nil {
		return err
	}
	if err := b.ensureParkingTopics(); err != nil {
		return err
	}
	longest := max(b.cfg.TimerMaxDelay, slices.Max(b.cfg.MessageDelayLevel))
	if b.cfg.FileReservedTime < longest {
		b.log.Warn("messages may wait longer than the log keeps them: parked messages older than fileReservedTime can be deleted before their delivery",
			"fileReservedTime", b.cfg.FileReservedTime, "longestDelay", longest)
	}
	d, err := delivery.Open(delivery.Config{
		Log: b.log, Now: b.cfg.Now, FS: storeFS(sc), Dir: filepath.Join(b.cfg.StorePathRootDir, "config"),
		DelayLevels: b.cfg.MessageDelayLevel, TimerMaxDelay: b.cfg.TimerMaxDelay,
		FileReservedTime: b.cfg.FileReservedTime, DLQRetention: b.cfg.DLQRetention,
		Tick: b.cfg.scheduleTick, SweepInterval: b.cfg.dlqSweepInterval, StoreAddr: b.cfg.StoreAddr(),
		Store: deliveryStore{b.store, b}, CommitLog: b.store.CommitLog(), Metadata: b.meta, Topics: deliveryHost{b}, Sender: deliveryHost{b},
	})
	if err != nil {
		return err
	}
	b.delivery = d
	b.deliveryOpen.Store(true)
	return nil
}

// dlqKeepFrom is the store's KeepFrom: the lowest log offset of a live
// dead letter. Until the broker has loaded its DLQ state it pins the
// whole log.
func (b *Broker) dlqKeepFrom() int64 {
	if !b.deliveryOpen.Load() {
		return 0
	}
	return b.delivery.KeepFrom()
}

// deliveryHost is the broker as broker/delivery sees it: its topics and
// groups (delivery.Topics) and its put path (delivery.Sender).
type deliveryHost struct{ b *Broker }

// deliveryStore is the store as delivery sees it: its re-publications of
// parked messages take the broker's put path (putBatch), so that a
// SYNC_MASTER waits for its slaves for them too and a slave stores none.
type deliveryStore struct {
	messageStore
	b *Broker
}

func (s deliveryStore) PutBatch(ctx context.Context, batch store.Batch) ([]store.PutResult, error) {
	return s.b.putBatch(ctx, batch.Topic, batch)
}

func (h deliveryHost) InternalTopic(name string) (metadata.TopicConfig, error) {
	return h.b.internalTopic(name)
}

func (h deliveryHost) EnsureGroupTopic(name string) (metadata.TopicConfig, error) {
	return h.b.ensureTopic(name, 1)
}

func (h deliveryHost) NextQueue(tc metadata.TopicConfig) int32 { return h.b.nextQueue(tc) }

func (h deliveryHost) EnsureGroup(name string) (metadata.SubscriptionGroup, error) {
	return h.b.ensureGroup(name)
}

func (h deliveryHost) CheckGroupName(name string) error { return checkGroupName(name) }

func (h deliveryHost) PutInternal(ctx context.Context, owned bool, msgs []*message.Message) ([]store.PutResult, error) {
	return h.b.putInternalMode(ctx, msgs, owned)
}

func (h deliveryHost) Put(ctx context.Context, topic string, msgs []*message.Message) ([]store.PutResult, error) {
	return h.b.put(ctx, topic, msgs)
}

// The pull of a dead-letter queue skips the dead letters expired or
// purged (pull.go).

const dlqQueue = delivery.DLQQueue

type dlqView = delivery.DLQView

func isDLQTopic(name string) bool { return delivery.IsDLQTopic(name) }

func (b *Broker) dlqPullFrom(topic string, offset int64) (int64, dlqView) {
	return b.delivery.DLQPullFrom(topic, offset)
}

func (b *Broker) dropGoneDeadLetters(recs []commitlog.Region, v dlqView) []commitlog.Region {
	return b.delivery.DropGoneDeadLetters(recs, v)
}

// SendBack re-publishes a message a consumer of req.Group failed to
// handle: to the group's retry topic %RETRY%<group> after the retry
// ladder's delay (level 3 + the times it was consumed before: 10 s, 30 s,
// 1 m ... 2 h), with its reconsume times plus one, or, once it has been
// retried MaxReconsumeTimes times (or DelayLevel < 0), to the group's
// dead-letter topic %DLQ%<group> (1 queue). Both keep the body, the keys,
// the tags, the properties and the UNIQ_KEY (the client's message id), and
// record the topic the message was first sent to (RETRY_TOPIC, and
// DLQ_ORIGIN_TOPIC on a dead letter) and its first id (ORIGIN_MESSAGE_ID,
// DLQ_ORIGIN_MESSAGE_ID). A dead letter also keeps the reason and is
// stamped with the time it was dead-lettered (its store timestamp).
func (b *Broker) SendBack(ctx context.Context, req SendBackRequest) (SendBackResult, error) {
	res, errs := b.SendBackBatch(ctx, []SendBackRequest{req})
	return res[0], errs[0]
}

// SendBackBatch is SendBack of several messages: each request gets its
// result and its error (nil when it was taken). The retries through the
// delay levels are parked as references (broker/delivery/retryrefs.go),
// one record per group and level; the other messages are copied, in one
// append.
func (b *Broker) SendBackBatch(ctx context.Context, reqs []SendBackRequest) ([]SendBackResult, []error) {
	if !b.calls.enter() {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = ErrShuttingDown
		}
		return make([]SendBackResult, len(reqs)), errs
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
		return make([]SendBackResult, len(reqs)), errs
	}
	return b.delivery.SendBackBatch(ctx, reqs)
}

// SendRetry stores a message a consumer of group sends to the group's retry
// topic itself, as RocketMQ clients do when CONSUMER_SEND_MSG_BACK fails:
// m is for %RETRY%<group> and carries its reconsume times (the failures so
// far, this one included) and the retry's DELAY level. While
// m.ReconsumeTimes is at most maxReconsumeTimes (<= 0: the group's
// retryMaxTimes, 16 by default) m is stored in the retry topic, parked
// until its DELAY is due; beyond it, m is dead-lettered as SendBack
// dead-letters a message: to %DLQ%<group>, at once, recording its
// RETRY_TOPIC and ORIGIN_MESSAGE_ID as DLQ_ORIGIN_TOPIC and
// DLQ_ORIGIN_MESSAGE_ID. The result's Put says where it went.
//
// The group must exist or be auto-created (else ErrGroupNotFound); the
// retry topic is created when missing whatever autoCreateTopicEnable says,
// and retries are never de-duplicated. m is checked as Send checks a
// message (ErrInvalidMessage, also for a topic other than the group's
// retry topic) and is not modified.
func (b *Broker) SendRetry(ctx context.Context, group string, m *message.Message, maxReconsumeTimes int32) (SendBackResult, error) {
	if !b.calls.enter() {
		return SendBackResult{}, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return SendBackResult{}, err
	}
	return b.delivery.SendRetry(ctx, group, m, maxReconsumeTimes)
}

// ListDLQ returns a page of the live dead letters of req.Group (stored,
// not expired, not purged) that match the filter.
//
// Errors: ErrShuttingDown; ErrInvalidArgument (bad group name, negative
// cursor or limit, Begin after End); ErrGroupNotFound (neither the group
// nor its dead-letter topic exists).
func (b *Broker) ListDLQ(ctx context.Context, req DLQListRequest) (DLQPage, error) {
	if !b.calls.enter() {
		return DLQPage{}, ErrShuttingDown
	}
	defer b.calls.leave()
	return b.delivery.ListDLQ(ctx, req)
}

// ShowDLQ returns one live dead letter with its body, properties and
// history. By id, it is the newest dead letter with that id.
//
// Errors: as ListDLQ's, and ErrDeadLetterNotFound.
func (b *Broker) ShowDLQ(ctx context.Context, ref DLQRef) (DLQMessage, error) {
	if !b.calls.enter() {
		return DLQMessage{}, ErrShuttingDown
	}
	defer b.calls.leave()
	return b.delivery.ShowDLQ(ctx, ref)
}

// ExportDLQ writes the live dead letters of f.Group matching f to w as
// JSON lines (DLQExportRecord), in queue order, and returns how many it
// wrote. Errors: as ListDLQ's, and w's.
func (b *Broker) ExportDLQ(ctx context.Context, f DLQFilter, w io.Writer) (int, error) {
	if !b.calls.enter() {
		return 0, ErrShuttingDown
	}
	defer b.calls.leave()
	return b.delivery.ExportDLQ(ctx, f, w)
}

// ResendDLQ re-publishes the live dead letters req selects, oldest first,
// as new messages: same body, flag, born time and host, keys, tags, user
// properties and UNIQ_KEY, reconsume times 0, none of the retry and
// dead-letter properties but DLQ_RESENDS (the message's resends in all),
// to their original topic or, with ToRetry, to %RETRY%<group> (keeping
// RETRY_TOPIC and ORIGIN_MESSAGE_ID, so the group's consumers see the
// original topic). Each entry's resend count and time are recorded and
// saved. Dead letters stored after the call started are left alone.
//
// A dead letter whose topic no longer exists (or that the topic refuses)
// is reported in Failed and the others go on; other errors (shutting
// down, disk full) stop the call, which returns what it resent so far.
// Resends of one broker run one at a time.
//
// Errors: as ListDLQ's, ErrInvalidArgument for a selection that names
// nothing, and the store's.
func (b *Broker) ResendDLQ(ctx context.Context, req DLQResendRequest) (DLQResendResult, error) {
	if !b.calls.enter() {
		return DLQResendResult{}, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return DLQResendResult{}, err
	}
	return b.delivery.ResendDLQ(ctx, req)
}

// PurgeDLQ hides the live dead letters sel selects for good: they are
// never listed, pulled or resent again (their records stay in the log
// until retention deletes them). A purged prefix of the queue also moves
// its min offset. It returns how many it purged. Errors: as ResendDLQ's.
func (b *Broker) PurgeDLQ(ctx context.Context, sel DLQSelect) (int, error) {
	if !b.calls.enter() {
		return 0, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return 0, err
	}
	return b.delivery.PurgeDLQ(ctx, sel)
}

// DLQStats returns the dead-letter counts of every group with a
// dead-letter topic or a count, sorted by group; nil once Close has
// started.
func (b *Broker) DLQStats() []DLQGroupStats {
	if !b.calls.enter() {
		return nil
	}
	defer b.calls.leave()
	return b.delivery.DLQStats()
}
