package broker

import (
	"fmt"
	"maps"
	"strings"
)

// The life cycle of topics and groups (docs/BROKER.md, "Life cycle of
// topics and groups"): a deleted topic goes with its queues, files and
// every group's offsets, so that a topic created again with the name
// starts empty at offset 0; a group deleted with cleanOffset goes with its
// offsets and its retry and dead-letter topics. The store's tombstone
// (store.BeginDeleteTopic) makes a deletion durable before anything is
// removed, and Open finishes one a crash interrupted.

// DeleteTopic deletes a topic: its configuration, its consume queues and
// their files, its queue counters (the name starts again at offset 0),
// every group's committed offsets in it (live or not, broadcasting clients
// too), and the pending resets, queue locks and held pulls of it. Its
// records stay in the commit log until retention deletes them, but no
// pull, lookup or restart serves them again. A group's retry or
// dead-letter topic may be deleted too (its dead-letter state goes with
// it). A topic the broker knows neither by its configuration nor by
// queues or offsets is ErrTopicNotFound; deleting one half deleted (its
// configuration gone, its queues left by a crash or an older version)
// finishes the deletion.
func (b *Broker) DeleteTopic(name string) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return err
	}
	if err := checkTopicName(name); err != nil {
		return err
	}
	if IsReservedTopic(name) {
		return fmt.Errorf("%w: %q cannot be deleted by users", ErrReservedTopic, name)
	}
	b.deleteMu.Lock()
	defer b.deleteMu.Unlock()
	if !b.topicKnown(name) {
		return fmt.Errorf("%w: %q", ErrTopicNotFound, name)
	}
	if err := b.deleteTopic(name); err != nil {
		return err
	}
	b.topicsChanged()
	b.syncTopicRoutes()
	return nil
}

// topicKnown reports whether the broker holds anything of a topic: its
// configuration, a consume queue or a group's offsets.
func (b *Broker) topicKnown(name string) bool {
	if _, ok := b.meta.TopicShared(name); ok {
		return true
	}
	return b.store.HasTopicData(name) || len(b.meta.OffsetKeys("", name)) > 0
}

// deleteTopic runs a deletion's steps in the order that lets Open finish
// any of them: the tombstone first, then the configuration (no more sends),
// the store's queues, the broker's state, the saved metadata, and the end
// of the tombstone's pending state. b.deleteMu is held.
func (b *Broker) deleteTopic(name string) error {
	if err := b.store.BeginDeleteTopic(name); err != nil {
		return fmt.Errorf("broker: delete topic %q: %w", name, err)
	}
	b.topicMu.Lock()
	b.meta.DeleteTopic(name)
	b.topicMu.Unlock()
	b.rr.Delete(name)
	if err := b.store.DeleteTopic(name); err != nil {
		return fmt.Errorf("broker: delete topic %q: %w", name, err)
	}
	groups := b.meta.DeleteTopicOffsets(name)
	b.resets.forgetTopic(name)
	b.locks.forgetTopic(name)
	b.polls.wakeTopic(name)
	if group, ok := strings.CutPrefix(name, DLQTopicPrefix); ok && b.delivery != nil {
		if err := b.delivery.ForgetDLQ(group); err != nil {
			return fmt.Errorf("broker: delete topic %q: dead-letter state: %w", name, err)
		}
	}
	if err := b.forgetLimits(name); err != nil {
		return fmt.Errorf("broker: delete topic %q: limits state: %w", name, err)
	}
	if err := b.meta.Save(); err != nil {
		return fmt.Errorf("broker: delete topic %q: save metadata: %w", name, err)
	}
	// Commits checked before the configuration went may have landed since.
	if again := b.meta.DeleteTopicOffsets(name); len(again) > 0 {
		if err := b.meta.Save(); err != nil {
			return fmt.Errorf("broker: delete topic %q: save metadata: %w", name, err)
		}
	}
	if err := b.store.EndDeleteTopic(name); err != nil {
		return fmt.Errorf("broker: delete topic %q: %w", name, err)
	}
	b.log.Info("topic deleted", "topic", name, "groupsWithOffsets", len(groups))
	return nil
}

// PendingTopicDeletions returns the topics whose deletion a stop
// interrupted and Open has not finished (none once Open has returned).
func (b *Broker) PendingTopicDeletions() []string { return b.store.PendingTopicDeletions() }

// finishDeletions finishes the deletions a stop interrupted (the store
// lists them); Open calls it once the store and the DLQ state are open.
func (b *Broker) finishDeletions() error {
	b.deleteMu.Lock()
	defer b.deleteMu.Unlock()
	for _, name := range b.store.PendingTopicDeletions() {
		b.log.Warn("finishing a topic deletion interrupted by a stop", "topic", name)
		if err := b.deleteTopic(name); err != nil {
			return err
		}
	}
	return nil
}

// DeleteGroup removes a consumer group's subscription config and, unless
// keepOffsets, its committed offsets in every topic (those of its
// broadcasting clients too) and its retry and dead-letter topics
// (%RETRY%<group>, %DLQ%<group>: their queues, files, offsets and
// dead-letter state, as DeleteTopic deletes them), as RocketMQ's
// DELETE_SUBSCRIPTIONGROUP with cleanOffset followed by mqadmin
// deleteSubGroup's deletion of those topics. A client that uses the name
// again starts with no offsets, retries or dead letters. A group of which
// the broker holds nothing (no config and, unless keepOffsets, no offsets
// and no retry or dead-letter topic) is ErrGroupNotFound. Live clients of
// the group are not disconnected: with autoCreateSubscriptionGroup on,
// their next heartbeat creates the group again. The change is saved before
// DeleteGroup returns.
func (b *Broker) DeleteGroup(name string, keepOffsets bool) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return err
	}
	if err := checkGroupName(name); err != nil {
		return err
	}
	b.deleteMu.Lock()
	defer b.deleteMu.Unlock()
	hadConfig := b.meta.DeleteGroup(name)
	var topics []string
	if !keepOffsets {
		for _, t := range []string{RetryTopic(name), DLQTopic(name)} {
			if b.topicKnown(t) {
				topics = append(topics, t)
			}
		}
	}
	hadOffsets := len(b.meta.OffsetKeys(name, "")) > 0
	if !hadConfig && (keepOffsets || !hadOffsets && len(topics) == 0) {
		return fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	if !keepOffsets {
		b.meta.DeleteOffsets(name, "")
		b.resets.forgetGroup(name)
	}
	if err := b.meta.Save(); err != nil {
		return fmt.Errorf("broker: group %q deleted but not saved: %w", name, err)
	}
	for _, t := range topics {
		if err := b.deleteTopic(t); err != nil {
			return fmt.Errorf("broker: group %q deleted, its topic %q not: %w", name, t, err)
		}
	}
	if len(topics) > 0 {
		b.topicsChanged()
	} else {
		b.metaChanged()
	}
	b.log.Info("subscription group deleted", "group", name, "offsets_kept", keepOffsets, "topics_deleted", topics)
	return nil
}

// forgetTopic drops the pending resets of every group in topic.
func (t *resetTable) forgetTopic(topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.m, func(k resetKey, _ pendingReset) bool { return k.topic == topic })
}

// forgetGroup drops the pending resets of group.
func (t *resetTable) forgetGroup(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.m, func(k resetKey, _ pendingReset) bool { return k.group == group })
}

// forgetTopic drops every group's locks on topic's queues.
func (t *lockTable) forgetTopic(topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, g := range t.byGroup {
		maps.DeleteFunc(g, func(q QueueRef, _ queueLock) bool { return q.Topic == topic })
		if len(g) == 0 {
			delete(t.byGroup, name)
		}
	}
}

// wakeTopic wakes every pull held on topic's queues: they answer from the
// topic's state now (gone, or empty).
func (n *notifier) wakeTopic(topic string) {
	n.mu.Lock()
	var chs []chan struct{}
	for k, ch := range n.waits {
		if k.Topic == topic {
			chs = append(chs, ch)
			delete(n.waits, k)
		}
	}
	n.mu.Unlock()
	for _, ch := range chs {
		close(ch)
	}
}
