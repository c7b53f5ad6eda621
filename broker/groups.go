package broker

import (
	"fmt"

	"github.com/gantrymq/gantry/broker/metadata"
)

// GroupKnown reports whether the broker knows a consumer group: by its
// subscription config, its committed offsets or its live clients. The
// admin requests about a group answer "not found" for any other.
func (b *Broker) GroupKnown(name string) bool {
	if _, ok := b.meta.Group(name); ok {
		return true
	}
	return len(b.meta.OffsetKeys(name, "")) > 0 || len(b.ConsumerList(name)) > 0
}

// PutGroup creates a consumer group or replaces its subscription config
// (an administrator's: maxConsumerGroups does not apply) and saves the
// table before it returns. A bad name or value is ErrInvalidArgument.
func (b *Broker) PutGroup(g metadata.SubscriptionGroup) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.meta.PutGroup(g); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := b.meta.SaveGroups(); err != nil {
		return fmt.Errorf("broker: group %q updated but not saved: %w", g.GroupName, err)
	}
	b.log.Info("subscription group updated", "group", g.GroupName)
	return nil
}

// DeleteGroup removes a consumer group's subscription config and, unless
// keepOffsets, its committed offsets in every topic (those of its
// broadcasting clients too), as RocketMQ's DELETE_SUBSCRIPTIONGROUP does
// with and without cleanOffset. A group the broker knows neither by its
// config nor by offsets is ErrGroupNotFound. Live clients of the group are
// not disconnected: with autoCreateSubscriptionGroup on, their next
// heartbeat creates the group again. The change is saved before DeleteGroup
// returns.
func (b *Broker) DeleteGroup(name string, keepOffsets bool) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := checkGroupName(name); err != nil {
		return err
	}
	hadConfig := b.meta.DeleteGroup(name)
	hadOffsets := len(b.meta.OffsetKeys(name, "")) > 0
	if !hadConfig && (keepOffsets || !hadOffsets) {
		return fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	if !keepOffsets {
		b.meta.DeleteOffsets(name, "")
	}
	if err := b.meta.Save(); err != nil {
		return fmt.Errorf("broker: group %q deleted but not saved: %w", name, err)
	}
	b.log.Info("subscription group deleted", "group", name, "offsets_kept", keepOffsets)
	return nil
}
