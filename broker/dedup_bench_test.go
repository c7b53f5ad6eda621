package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// BenchmarkSendRecordsDedup sends 1 KiB records, each with a new UNIQ_KEY,
// through SendRecords (async flush) with the duplication window on (5 min,
// the default) and off: what de-duplication costs the fast path per
// message. ns/op and msgs/s count the sends; the dispatcher may fall
// behind them (dispatch-lag-bytes when the sends end), so
// dispatched-msgs/s, up to the last message dispatched, is the rate the
// broker sustains.
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

// openBenchBroker opens a broker with topic Bench (8 queues) and the
// duplication window on (the default) or off; the benchmark's cleanup
// closes it.
func openBenchBroker(b *testing.B, dedup bool) *broker.Broker {
	cfg := broker.Config{StorePathRootDir: testutil.BenchDir(b)}
	if !dedup {
		cfg.DuplicationWindow = broker.DuplicationOff
	}
	br, err := broker.Open(b.Context(), cfg)
	require.NoError(b, err)
	b.Cleanup(func() { _ = br.Close(context.Background()) })
	require.NoError(b, br.CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: "Bench", ReadQueueNums: 8, WriteQueueNums: 8, Perm: metadata.PermRead | metadata.PermWrite,
	}))
	require.NoError(b, br.Store().CommitLog().WaitPrefault(b.Context()))
	return br
}

func benchSendRecords(b *testing.B, batch int, dedup bool) {
	br := openBenchBroker(b, dedup)
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
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	start := time.Now()
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
	b.ReportMetric(float64(br.Store().CommitLog().MaxOffset()-br.Store().DispatchedOffset()), "dispatch-lag-bytes")
	b.ReportMetric(float64(br.Status().DedupRecent), "recent-keys")
	waitDispatched(b, br, int64(n))
	b.ReportMetric(float64(int(n))/time.Since(start).Seconds(), "dispatched-msgs/s")
}

// waitDispatched waits until the queues of topic Bench hold n messages.
func waitDispatched(b *testing.B, br *broker.Broker, n int64) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		var got int64
		for q := range int32(8) {
			_, next := br.Store().QueueOffsets("Bench", q)
			got += next
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d messages dispatched after a minute", got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkSendDedup is BenchmarkSendRecordsDedup for Send (messages, not
// records), one message a send.
//
//	go test -run=^$ -bench=SendDedup -benchmem ./broker
func BenchmarkSendDedup(b *testing.B) {
	for _, dedup := range []bool{false, true} {
		b.Run(fmt.Sprintf("dedup=%t", dedup), func(b *testing.B) {
			br := openBenchBroker(b, dedup)
			m := &message.Message{Topic: "Bench", QueueID: broker.BrokerPicksQueue, Body: bytes.Repeat([]byte("x"), 900),
				Properties: message.Properties{{Key: message.PropTags, Value: "TagA"}, {Key: message.PropUniqKey}}}
			msgs := []*message.Message{m}
			b.SetBytes(int64(len(m.Body)))
			b.ReportAllocs()
			start := time.Now()
			n := 0
			for b.Loop() {
				n++
				m.Properties[1].Value = fmt.Sprintf("0A1B2C3D4E5F6071%016X", n)
				if _, err := br.Send(b.Context(), "Bench", msgs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
			waitDispatched(b, br, int64(n))
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "dispatched-msgs/s")
		})
	}
}

// BenchmarkDedupRepeat sends again a message stored a while ago: the
// broker finds it in the store's index and answers with its result,
// storing nothing.
//
//	go test -run=^$ -bench=DedupRepeat -benchmem ./broker
func BenchmarkDedupRepeat(b *testing.B) {
	br := openBenchBroker(b, true)
	m := &message.Message{Topic: "Bench", QueueID: 0, Body: []byte("x"),
		Properties: message.Properties{{Key: message.PropUniqKey, Value: "0A1B2C3D4E5F60718293A4B5C6D7E8F9"}}}
	msgs := []*message.Message{m}
	if _, err := br.Send(b.Context(), "Bench", msgs); err != nil {
		b.Fatal(err)
	}
	br.DedupSettle(b)
	b.ReportAllocs()
	for b.Loop() {
		res, err := br.Send(b.Context(), "Bench", msgs)
		if err != nil || !res[0].Duplicate {
			b.Fatal(err, res)
		}
	}
}
