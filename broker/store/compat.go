package store

import (
	"context"

	"github.com/gantrymq/gantry/message"
)

// Put encodes msgs (Encode) and stores them (PutBatch).
//
// Callers move to broker/delivery, which encodes a message where it enters
// and calls the broker's put path; removed once broker/delivery lands.
func (s *Store) Put(ctx context.Context, msgs []*message.Message) ([]PutResult, error) {
	b, err := s.Encode(msgs)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return s.PutBatch(ctx, b)
}
