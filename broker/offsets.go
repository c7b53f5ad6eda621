package broker

import (
	"errors"
	"fmt"
	"maps"

	"github.com/gantrymq/gantry/broker/metadata"
)

// CommitOffset records group's consume offset in a queue of topic. The
// topic must exist and queueID be one of its queues; an unknown group is
// created when autoCreateSubscriptionGroup is on (else ErrGroupNotFound).
// Offsets are saved every flushConsumerOffsetInterval and at Close.
//
// After ResetOffsetByTime, a commit of another offset than the queue's new
// one is ignored (it succeeds and changes nothing) until the group pulls
// the queue from its new offset: it comes from a member that has not
// heard of the reset yet.
func (b *Broker) CommitOffset(group, topic string, queueID int32, offset int64) error {
	return b.commitOffset(group, "", topic, queueID, offset)
}

// CommitHeldOffset is CommitOffset for a client that consumes the queue
// under its lock (LockQueues): it is refused with ErrQueueLocked while
// another client holds the queue's lock. A member that lost the queue
// (it died with the commit in flight, or its lock expired and another
// member took it) so cannot move the offset its queue's new owner started
// from. Without a lock on the queue, or with clientID's own, it is
// CommitOffset.
func (b *Broker) CommitHeldOffset(group, clientID, topic string, queueID int32, offset int64) error {
	if clientID == "" {
		return fmt.Errorf("%w: a held offset commit without a client id", ErrInvalidArgument)
	}
	return b.commitOffset(group, clientID, topic, queueID, offset)
}

// commitOffset is CommitOffset, checked against the queue's lock when
// holder is set.
func (b *Broker) commitOffset(group, holder, topic string, queueID int32, offset int64) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return err
	}
	return b.commitEntered(group, holder, topic, queueID, offset)
}

// commitEntered is commitOffset inside a call (b.calls entered).
func (b *Broker) commitEntered(group, holder, topic string, queueID int32, offset int64) error {
	if err := b.checkCommit(group, topic, queueID, offset); err != nil {
		return err
	}
	ignored, err := b.resets.commit(group, topic, queueID, offset, func() error {
		return b.locks.whileHeld(group, holder, QueueRef{Topic: topic, QueueID: queueID}, func() error {
			return b.meta.CommitOffset(group, topic, queueID, offset)
		})
	})
	switch {
	case errors.Is(err, ErrQueueLocked):
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if ignored {
		b.log.Debug("offset commit ignored: the offsets were reset", "group", group, "topic", topic, "queue", queueID, "offset", offset)
	}
	return nil
}

// CommitClientOffset records the consume offset of one client of group in
// a queue of topic: broadcast consumption, where every client consumes
// every queue. It checks what CommitOffset checks, and that clientID is
// set. Client offsets are saved with the group offsets, in the same file.
func (b *Broker) CommitClientOffset(group, clientID, topic string, queueID int32, offset int64) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return err
	}
	return b.commitClientEntered(group, clientID, topic, queueID, offset)
}

// commitClientEntered is CommitClientOffset inside a call (b.calls
// entered).
func (b *Broker) commitClientEntered(group, clientID, topic string, queueID int32, offset int64) error {
	if clientID == "" {
		return fmt.Errorf("%w: client offset without a client id", ErrInvalidArgument)
	}
	if err := b.checkCommit(group, topic, queueID, offset); err != nil {
		return err
	}
	if err := b.meta.CommitClientOffset(group, clientID, topic, queueID, offset); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// OffsetCommit is one queue's offset in CommitOffsets.
type OffsetCommit struct {
	Topic   string
	QueueID int32
	Offset  int64
}

// CommitOffsets commits several offsets of group in one call: each entry as
// CommitClientOffset does when clientID is set, else as CommitHeldOffset
// does when holder is set, else as CommitOffset does. errs holds each
// entry's error, in order, nil for those committed. err is the call's own,
// and then nothing was committed: ErrShuttingDown, or the group's (an
// invalid name, ErrGroupNotFound with autoCreateSubscriptionGroup off,
// ErrTooManyGroups). The caller bounds len(commits).
func (b *Broker) CommitOffsets(group, clientID, holder string, commits []OffsetCommit) (errs []error, err error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return nil, err
	}
	if _, err := b.ensureGroup(group); err != nil {
		return nil, err
	}
	errs = make([]error, len(commits))
	for i, c := range commits {
		if clientID != "" {
			errs[i] = b.commitClientEntered(group, clientID, c.Topic, c.QueueID, c.Offset)
		} else {
			errs[i] = b.commitEntered(group, holder, c.Topic, c.QueueID, c.Offset)
		}
	}
	return errs, nil
}

// checkCommit checks an offset commit and creates its group if need be.
func (b *Broker) checkCommit(group, topic string, queueID int32, offset int64) error {
	tc, err := b.topic(topic)
	if err != nil {
		return err
	}
	if err := checkQueue(tc, queueID); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: offset %d: want >= 0", ErrInvalidArgument, offset)
	}
	_, err = b.ensureGroup(group)
	return err
}

// checkQueue checks that queueID is one of tc's queues (read or write).
func checkQueue(tc metadata.TopicConfig, queueID int32) error {
	if n := max(tc.ReadQueueNums, tc.WriteQueueNums); queueID < 0 || queueID >= n {
		return fmt.Errorf("%w: queue id %d: topic %q has queues 0..%d", ErrInvalidArgument, queueID, tc.TopicName, n-1)
	}
	return nil
}

// QueryOffset returns group's committed offset in a queue of topic, and
// whether there is one.
func (b *Broker) QueryOffset(group, topic string, queueID int32) (int64, bool) {
	return b.meta.Offset(group, topic, queueID)
}

// QueryClientOffset returns the committed offset of one client of group in
// a queue of topic (broadcast consumption), and whether there is one.
func (b *Broker) QueryClientOffset(group, clientID, topic string, queueID int32) (int64, bool) {
	return b.meta.ClientOffset(group, clientID, topic, queueID)
}

// ResetOffsetByTime commits, for every read queue of topic, the offset of
// the first message stored at or after ts (unix ms; a queue's max offset if
// none was), and returns them by queue id. The group must exist (else
// ErrGroupNotFound: a reset never creates one).
//
// The group's live members are told (their WatchGroup streams, and the
// hooks of AddOffsetResetHook: RESET_CONSUMER_CLIENT_OFFSET) and the reset
// holds against what they do before they hear: until the group pulls a
// queue from its new offset, commits of other offsets of it are ignored,
// and, after a grace period of 20 s, pulls from elsewhere are answered
// "offset moved" to it. That state lasts channelExpiredTimeout at most.
func (b *Broker) ResetOffsetByTime(group, topic string, ts int64) (map[int32]int64, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return nil, err
	}
	tc, err := b.topic(topic)
	if err != nil {
		return nil, err
	}
	if err := b.existingGroup(group); err != nil {
		return nil, err
	}
	out := make(map[int32]int64, tc.ReadQueueNums)
	for q := range tc.ReadQueueNums {
		off, err := b.store.OffsetAtTime(topic, q, ts)
		if err != nil {
			return nil, fmt.Errorf("broker: reset offsets of %q in %s/%d to %d: %w", group, topic, q, ts, err)
		}
		out[q] = off
	}
	err = b.resets.reset(group, topic, out, func() error {
		for q, off := range out {
			if err := b.meta.CommitOffset(group, topic, q, off); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.log.Info("offsets reset by time", "group", group, "topic", topic, "ts", ts, "offsets", out)
	b.offsetsReset(OffsetReset{Group: group, Topic: topic, Timestamp: ts, Offsets: maps.Clone(out)})
	return out, nil
}

// existingGroup checks that a subscription group exists.
func (b *Broker) existingGroup(name string) error {
	if err := checkGroupName(name); err != nil {
		return err
	}
	if _, ok := b.meta.Group(name); !ok {
		return fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	return nil
}

// ensureGroup returns a subscription group, creating it with RocketMQ's
// defaults when autoCreateSubscriptionGroup is on.
func (b *Broker) ensureGroup(name string) (metadata.SubscriptionGroup, error) {
	if err := checkGroupName(name); err != nil {
		return metadata.SubscriptionGroup{}, err
	}
	if g, ok := b.meta.Group(name); ok { // every commit comes here
		return g, nil
	}
	gs, errs := b.ensureGroups([]string{name})
	if err := errs[name]; err != nil {
		return metadata.SubscriptionGroup{}, err
	}
	return gs[0], nil
}

// ensureGroups returns the subscription groups of names (valid names,
// maybe repeated), each once, in the order given, creating the unknown
// ones with RocketMQ's defaults when autoCreateSubscriptionGroup is on, in
// one change of the table (saved with the offsets). A group that could not
// be had is left out, with its error in errs: ErrGroupNotFound with
// auto-creation off, ErrTooManyGroups past maxConsumerGroups.
func (b *Broker) ensureGroups(names []string) (groups []metadata.SubscriptionGroup, errs map[string]error) {
	names = uniq(names)
	errs = map[string]error{}
	var missing []string
	for _, name := range names {
		if _, ok := b.meta.Group(name); !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		b.createGroups(missing, errs)
	}
	for _, name := range names {
		if errs[name] != nil {
			continue
		}
		if g, ok := b.meta.Group(name); ok {
			groups = append(groups, g)
		} else { // deleted meanwhile
			errs[name] = fmt.Errorf("%w: %q", ErrGroupNotFound, name)
		}
	}
	return groups, errs
}

// uniq returns ss without repeats, in order.
func uniq(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := ss[:0:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// createGroups creates the groups names that are still missing, as many as
// maxConsumerGroups allows, and records in errs why the others were not.
func (b *Broker) createGroups(names []string, errs map[string]error) {
	if !*b.cfg.AutoCreateSubscriptionGroup {
		for _, name := range names {
			errs[name] = fmt.Errorf("%w: %q (autoCreateSubscriptionGroup is off)", ErrGroupNotFound, name)
		}
		return
	}
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	have := b.meta.GroupCount()
	var create []metadata.SubscriptionGroup
	for _, name := range names {
		if _, ok := b.meta.Group(name); ok {
			continue // created meanwhile
		}
		if n := have + len(create); n >= b.cfg.MaxConsumerGroups {
			errs[name] = fmt.Errorf("%w: group %q not created: the broker has %d groups, at most %d (maxConsumerGroups)",
				ErrTooManyGroups, name, n, b.cfg.MaxConsumerGroups)
			continue
		}
		create = append(create, metadata.DefaultSubscriptionGroup(name))
	}
	if err := b.meta.PutGroups(create); err != nil {
		for _, g := range create {
			errs[g.GroupName] = fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		return
	}
	switch len(create) {
	case 0:
	case 1:
		b.log.Info("subscription group created", "group", create[0].GroupName)
	default:
		b.log.Info("subscription groups created", "count", len(create), "first", create[0].GroupName)
	}
}

// checkGroupName checks a group name: the topic name rules (RocketMQ's).
func checkGroupName(name string) error {
	if metadata.ValidTopicName(name) != nil {
		return fmt.Errorf("%w: group name %q: want 1 to 127 characters from [a-zA-Z0-9_%%-]", ErrInvalidArgument, name)
	}
	return nil
}
