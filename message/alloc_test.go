package message_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

func TestZeroAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters change allocation counts")
	}
	m := sampleMessage(1024)
	m.BornHost, m.StoreHost = bornV6, storeV6
	rec := encode(t, m, true)
	dst := make([]byte, 0, len(rec))
	idBuf := make([]byte, 0, 56)
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	g.Next() // the first id may compute the month window
	var sinkErr error
	tests := []struct {
		name string
		fn   func()
	}{
		{"Append", func() { dst, sinkErr = message.Append(dst[:0], m, true) }},
		{"Check", func() { sinkErr = message.Check(rec, m.PhysicalOffset, true) }},
		{"HasCRC", func() { _ = message.HasCRC(rec) }},
		{"SealCRC", func() { sinkErr = message.SealCRC(rec) }},
		{"Stamp", func() { sinkErr = message.Stamp(rec, m.PhysicalOffset, 1, 2) }},
		{"setters", func() {
			message.SetQueueOffset(rec, 1)
			message.SetPhysicalOffset(rec, m.PhysicalOffset)
			message.SetStoreTimestamp(rec, 3)
			message.SetReconsumeTimes(rec, 4)
			message.SetPreparedTransactionOffset(rec, 5)
		}},
		{"accessors", func() {
			_, _, _ = message.RecordSize(rec)
			_ = message.StoreTimestampOf(rec) + message.QueueOffsetOf(rec) + message.PhysicalOffsetOf(rec)
			_ = message.ReconsumeTimesOf(rec) + message.QueueIDOf(rec) + message.SysFlagOf(rec)
		}},
		{"AppendOffsetMsgID", func() { idBuf = message.AppendOffsetMsgID(idBuf[:0], m.StoreHost, m.PhysicalOffset) }},
		{"AppendNext", func() { idBuf = g.AppendNext(idBuf[:0]) }},
		{"TagsCode", func() { _ = message.TagsCode("标签😀TagA") }},
		{"AppendBlank", func() { idBuf = message.AppendBlank(idBuf[:0], 100) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(100, tt.fn))
			require.NoError(t, sinkErr)
		})
	}
}
