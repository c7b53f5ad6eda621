package broker

import (
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// AppendRecordAt appends to dst the stored record (RocketMQ's MessageExt
// bytes) that starts at commit-log offset phys. ErrMessageNotFound when
// phys is outside the log (deleted by retention, not yet written) or no
// record starts there.
func (b *Broker) AppendRecordAt(dst []byte, phys int64) ([]byte, error) {
	r, _, err := b.store.CommitLog().ReadRecord(phys)
	if err != nil {
		if errors.Is(err, commitlog.ErrOffsetTooSmall) || errors.Is(err, commitlog.ErrOffsetTooBig) || errors.Is(err, commitlog.ErrBadOffset) {
			return dst, fmt.Errorf("%w: %w", ErrMessageNotFound, err)
		}
		return dst, err
	}
	defer r.Release()
	if message.PhysicalOffsetOf(r.B) != phys {
		return dst, fmt.Errorf("%w: no message starts at commit-log offset %d", ErrMessageNotFound, phys)
	}
	return append(dst, r.B...), nil
}

// MessageByOffsetID returns the message an offset message id of this
// broker names.
func (b *Broker) MessageByOffsetID(id string) (*message.Message, error) {
	return b.store.MessageByOffsetID(id)
}
