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
	if err := b.writable(); err != nil {
		return err
	}
	if err := b.meta.PutGroup(g); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := b.meta.SaveGroups(); err != nil {
		return fmt.Errorf("broker: group %q updated but not saved: %w", g.GroupName, err)
	}
	b.log.Info("subscription group updated", "group", g.GroupName)
	b.metaChanged()
	return nil
}
