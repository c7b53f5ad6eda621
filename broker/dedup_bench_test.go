package broker_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// BenchmarkSendRecordsDedup sends 1 KiB records, each with a new UNIQ_KEY,
// through SendRecords (async flush) with the duplication window on and
// off: what de-duplication costs the fast path per message.
//
//	go test -run=^$ -bench=SendRecordsDedup -benchmem ./broker
func BenchmarkSendRecordsDedup(b *testing.B) {
	for _, batch := range []int{1, 32} {
		for _, dedup := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/dedup=%t", batch, dedup), func(b *testing.B) {
				benchSendRecords(b, batch, dedup)
			})
		}
	}
}

func benchSendRecords(b *testing.B, batch int, dedup bool) {
	cfg := broker.Config{StorePathRootDir: testutil.BenchDir(b)}
	if !dedup {
		cfg.DuplicationWindow = broker.DuplicationOff
	}
	br, err := broker.Open(b.Context(), cfg)
	require.NoError(b, err)
	defer br.Close(b.Context())
	require.NoError(b, br.CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: "Bench", ReadQueueNums: 8, WriteQueueNums: 8, Perm: metadata.PermRead | metadata.PermWrite,
	}))
	// One chunk of batch records whose UNIQ_KEYs (32 hex digits, at keyAt)
	// are rewritten before every send.
	var chunk []byte
	var keyAt []int
	for i := range batch {
		m := &message.Message{Topic: "Bench", QueueID: int32(i % 8), Body: bytes.Repeat([]byte("x"), 900),
			Properties: message.Properties{{Key: message.PropTags, Value: "TagA"}}}
		rec, err := message.AppendUnsealed(nil, m, message.NewUniqID())
		require.NoError(b, err)
		at := bytes.Index(rec, []byte(message.PropUniqKey+"\x01"))
		require.Positive(b, at)
		keyAt = append(keyAt, len(chunk)+at+len(message.PropUniqKey)+1)
		chunk = append(chunk, rec...)
	}
	require.NoError(b, br.Store().CommitLog().WaitPrefault(b.Context()))
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	n := uint64(0)
	for b.Loop() {
		for _, at := range keyAt {
			n++
			for i := range 16 { // the low 64 bits of the key, in hex
				chunk[at+31-i] = "0123456789ABCDEF"[n>>(4*i)&0xF]
			}
		}
		if _, err := br.SendRecords(b.Context(), "Bench", [][]byte{chunk}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(int(n))/b.Elapsed().Seconds(), "msgs/s")
}
