package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
)

// System topic names.
const (
	// ScheduleTopic holds messages with a delay level (DELAY) until their
	// delivery time: queue L-1 holds level L.
	ScheduleTopic = store.ScheduleTopic
	// TimerTopic holds messages with a delivery time (TIMER_DELIVER_MS,
	// TIMER_DELAY_SEC) until it comes, in one queue.
	TimerTopic = delivery.TimerTopic
	// AutoCreateTopicTemplate is RocketMQ's TBW102, the topic whose route
	// tells clients a broker auto-creates topics.
	AutoCreateTopicTemplate = "TBW102"
	// SystemTopicPrefix starts the names of RocketMQ's internal topics.
	SystemTopicPrefix = "rmq_sys_"
	// RetryTopicPrefix and DLQTopicPrefix start a group's retry and
	// dead-letter topics, which the broker creates itself.
	RetryTopicPrefix = store.RetryTopicPrefix
	DLQTopicPrefix   = delivery.DLQTopicPrefix
)

// IsReservedTopic reports whether name is a system topic users cannot
// create, delete or send to: TBW102, SCHEDULE_TOPIC_XXXX and every rmq_sys_
// topic (TimerTopic among them).
func IsReservedTopic(name string) bool {
	return strings.HasPrefix(name, SystemTopicPrefix) || name == ScheduleTopic || name == AutoCreateTopicTemplate
}

// RetryTopic returns group's retry topic, %RETRY%<group>.
func RetryTopic(group string) string { return delivery.RetryTopic(group) }

// DLQTopic returns group's dead-letter topic, %DLQ%<group>.
func DLQTopic(group string) string { return delivery.DLQTopic(group) }

// isGroupTopic reports whether name is a group's retry or dead-letter topic.
func isGroupTopic(name string) bool { return delivery.IsGroupTopic(name) }

// CreateOrUpdateTopic creates a topic or replaces its configuration. The
// name must be valid and not reserved; queue counts are 1..1024 and perm
// 0..7 (metadata.PermRead|PermWrite = 6 for a normal topic). Shrinking the
// queue counts keeps the messages of the queues dropped.
func (b *Broker) CreateOrUpdateTopic(tc metadata.TopicConfig) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return err
	}
	if err := checkTopicName(tc.TopicName); err != nil {
		return err
	}
	if IsReservedTopic(tc.TopicName) {
		return fmt.Errorf("%w: %q cannot be created or changed by users", ErrReservedTopic, tc.TopicName)
	}
	if err := checkTopicShape(tc); err != nil {
		return err
	}
	if err := checkLimitAttrs(tc); err != nil { // limits.go
		return err
	}
	b.topicMu.Lock()
	err := b.meta.PutTopic(tc)
	b.topicMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := b.saveTopics(); err != nil {
		return err
	}
	b.log.Info("topic updated", "topic", tc.TopicName, "read", tc.ReadQueueNums, "write", tc.WriteQueueNums, "perm", tc.Perm)
	b.topicsChanged()
	b.syncTopicRoutes()
	return nil
}

// syncTopicRoutesWait bounds how long an administrator's topic change
// waits for the nameservers (one of them down).
const syncTopicRoutesWait = time.Second

// syncTopicRoutes waits for the nameservers to hold an administrator's
// topic change (Config.SyncTopicRoutes), at most syncTopicRoutesWait.
func (b *Broker) syncTopicRoutes() {
	if b.cfg.SyncTopicRoutes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncTopicRoutesWait)
	defer cancel()
	b.cfg.SyncTopicRoutes(ctx)
}

func checkTopicName(name string) error {
	if err := metadata.ValidTopicName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	return nil
}

func checkTopicShape(tc metadata.TopicConfig) error {
	for _, n := range []struct {
		what string
		v    int32
	}{{"readQueueNums", tc.ReadQueueNums}, {"writeQueueNums", tc.WriteQueueNums}} {
		if n.v < 1 || n.v > metadata.MaxQueueNums {
			return fmt.Errorf("%w: %s %d of topic %q: want 1..%d", ErrInvalidArgument, n.what, n.v, tc.TopicName, metadata.MaxQueueNums)
		}
	}
	if tc.Perm < 0 || tc.Perm > metadata.PermRead|metadata.PermWrite|metadata.PermInherit {
		return fmt.Errorf("%w: perm %d of topic %q: want 0..7", ErrInvalidArgument, tc.Perm, tc.TopicName)
	}
	return nil
}

// saveTopics writes the topic table before a change to it is answered or
// used: a topic created in memory only, and its messages with it, would
// be lost by a crash before the periodic save.
func (b *Broker) saveTopics() error {
	if err := b.meta.SaveTopics(); err != nil {
		return fmt.Errorf("broker: save topics: %w", err)
	}
	return nil
}

// Topic returns a topic's configuration.
func (b *Broker) Topic(name string) (metadata.TopicConfig, bool) { return b.meta.Topic(name) }

// Topics returns every topic's configuration, sorted by name, except the
// broker's parking topics (ScheduleTopic, TimerTopic): they are not
// registered with the nameservers nor listed, though Topic, Pull and
// TopicStatus find them (read-only). A slave, whose table is its
// master's (RestoreMeta), reports every topic read-only.
func (b *Broker) Topics() []metadata.TopicConfig {
	tcs := slices.DeleteFunc(b.meta.Topics(), func(tc metadata.TopicConfig) bool { return isParkingTopic(tc.TopicName) })
	if b.cfg.BrokerRole == Slave {
		return readOnly(tcs)
	}
	return tcs
}

// isParkingTopic reports whether name is one of the topics delayed
// messages wait in.
func isParkingTopic(name string) bool { return name == ScheduleTopic || name == TimerTopic }

// topic returns an existing topic, or ErrInvalidTopic or ErrTopicNotFound.
// Its Attributes map is shared (metadata.TopicShared: not copied on every
// pull): read it only.
func (b *Broker) topic(name string) (metadata.TopicConfig, error) {
	if err := checkTopicName(name); err != nil {
		return metadata.TopicConfig{}, err
	}
	tc, ok := b.meta.TopicShared(name)
	if !ok {
		return tc, fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	return tc, nil
}

// ensureTopic returns a topic, creating it with queues read and write
// queues and perm rw if it is missing. Only the broker calls it, for topics
// users may not create themselves (group retry and DLQ topics) and for
// auto-creation; it skips the reserved-name check.
func (b *Broker) ensureTopic(name string, queues int32) (metadata.TopicConfig, error) {
	if err := b.ensureTopics([]metadata.TopicConfig{groupTopic(name, queues)}); err != nil {
		return metadata.TopicConfig{}, err
	}
	tc, ok := b.meta.Topic(name)
	if !ok { // deleted meanwhile
		return tc, fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	return tc, nil
}

// groupTopic is the configuration the broker creates a topic with: queues
// read and write queues, perm rw.
func groupTopic(name string, queues int32) metadata.TopicConfig {
	return metadata.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: metadata.PermRead | metadata.PermWrite}
}

// ensureTopics creates those of tcs that are missing, in one change of the
// topic table, saved once before it returns: a topic created in memory
// only, and its messages with it, would be unreadable after a crash.
func (b *Broker) ensureTopics(tcs []metadata.TopicConfig) error {
	b.topicMu.Lock()
	var missing []metadata.TopicConfig
	for _, tc := range tcs {
		if _, ok := b.meta.TopicShared(tc.TopicName); !ok {
			missing = append(missing, tc)
		}
	}
	err := b.meta.PutTopics(missing)
	b.topicMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		b.log.Info("topic created by the broker", "topic", missing[0].TopicName, "queues", missing[0].ReadQueueNums)
	default:
		b.log.Info("topics created by the broker", "count", len(missing), "first", missing[0].TopicName)
	}
	b.topicsChanged()
	return b.saveTopics()
}

// syncTemplateTopic keeps TBW102 in the topic table exactly while
// autoCreateTopicEnable is on: its route (perm with the inherit bit) tells
// producers, Gantry's and RocketMQ's, that this broker creates a topic on
// its first send.
func (b *Broker) syncTemplateTopic() error {
	_, has := b.meta.Topic(AutoCreateTopicTemplate)
	switch {
	case b.cfg.AutoCreateTopicEnable && !has:
		q := b.cfg.DefaultTopicQueueNums
		return b.meta.PutTopic(metadata.TopicConfig{TopicName: AutoCreateTopicTemplate, ReadQueueNums: q, WriteQueueNums: q,
			Perm: metadata.PermInherit | metadata.PermRead | metadata.PermWrite, TopicFilterType: metadata.FilterSingleTag})
	case !b.cfg.AutoCreateTopicEnable && has:
		b.meta.DeleteTopic(AutoCreateTopicTemplate)
	}
	return nil
}

// ensureParkingTopics puts the parking topics in the topic table, read-only
// (the broker writes them itself): ScheduleTopic with a queue per delay
// level (more if an earlier configuration had more levels: their messages
// still get delivered), TimerTopic with one queue.
func (b *Broker) ensureParkingTopics() error {
	levels := int32(len(b.cfg.MessageDelayLevel))
	if tc, ok := b.meta.Topic(ScheduleTopic); ok {
		levels = max(levels, tc.ReadQueueNums, tc.WriteQueueNums)
	}
	for _, tc := range []metadata.TopicConfig{
		{TopicName: ScheduleTopic, ReadQueueNums: levels, WriteQueueNums: levels, Perm: metadata.PermRead},
		{TopicName: TimerTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: metadata.PermRead},
	} {
		if old, ok := b.meta.Topic(tc.TopicName); ok && old.ReadQueueNums == tc.ReadQueueNums &&
			old.WriteQueueNums == tc.WriteQueueNums && old.Perm == tc.Perm {
			continue
		}
		if err := b.meta.PutTopic(tc); err != nil {
			return fmt.Errorf("broker: create %s: %w", tc.TopicName, err)
		}
	}
	return nil
}

// internalTopic returns the topic putInternal may write a message for:
// any existing topic, reserved or not, except the parking topics; a
// group's retry or dead-letter topic is created on first use (one queue,
// read and write).
func (b *Broker) internalTopic(name string) (metadata.TopicConfig, error) {
	if err := checkTopicName(name); err != nil {
		return metadata.TopicConfig{}, err
	}
	if isParkingTopic(name) {
		return metadata.TopicConfig{}, fmt.Errorf("%w: %q takes no messages but those the broker parks", ErrReservedTopic, name)
	}
	if tc, ok := b.meta.TopicShared(name); ok {
		return tc, nil
	}
	if isGroupTopic(name) {
		return b.ensureTopic(name, 1)
	}
	return metadata.TopicConfig{}, fmt.Errorf("%w: %q", ErrTopicNotFound, name)
}

// autoCreateQueues is how many queues an auto-created topic gets: one for a
// group's retry or DLQ topic, defaultTopicQueueNums otherwise.
func (b *Broker) autoCreateQueues(name string) int32 {
	if isGroupTopic(name) {
		return 1
	}
	return b.cfg.DefaultTopicQueueNums
}

func (b *Broker) topicsChanged() {
	b.refreshLimits()
	b.metaChanged()
	if b.cfg.OnTopicsChanged != nil {
		b.cfg.OnTopicsChanged()
	}
}

// nextQueue picks the next write queue of a topic, round robin.
func (b *Broker) nextQueue(tc metadata.TopicConfig) int32 {
	v, ok := b.rr.Load(tc.TopicName)
	if !ok {
		v, _ = b.rr.LoadOrStore(tc.TopicName, new(atomic.Uint32))
	}
	n := v.(*atomic.Uint32).Add(1) - 1
	return int32(n % uint32(tc.WriteQueueNums))
}
