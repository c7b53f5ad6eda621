package store_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// kibMsg returns a message whose record is 1 KiB once the store adds its
// UNIQ_KEY and CRC, on queue q of topic "Bench".
func kibMsg(b *testing.B, q int32, keys string) *message.Message {
	m := &message.Message{Topic: "Bench", QueueID: q, Properties: message.Properties{
		{Key: message.PropTags, Value: "TagA"},
		{Key: message.PropKeys, Value: keys},
		{Key: message.PropUniqKey, Value: message.NewUniqID()},
	}}
	n, err := message.EncodedSize(m, true)
	require.NoError(b, err)
	m.Body = make([]byte, 1024-n)
	m.Properties = m.Properties[:2] // the store adds a UNIQ_KEY of the same length
	return m
}

func waitAllDispatched(b *testing.B, s *store.Store) {
	for s.DispatchedOffset() < s.CommitLog().MaxOffset() {
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkPutDispatch stores 1 KiB messages round-robin over 8 queues
// (async flush) and counts a message once it is dispatched (in its consume
// queue and the index). batch=1 is one Put per message from 4 goroutines;
// batch=32 one Put of 32 messages.
//
//	go test -run=^$ -bench=PutDispatch -benchtime=1000000x ./broker/store
func BenchmarkPutDispatch(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, err := store.Open(b.Context(), store.Config{Root: testutil.BenchDir(b), Log: commitlog.Config{SegmentBytes: 1 << 30}})
			require.NoError(b, err)
			defer s.Close()
			msgs := make([]*message.Message, 8)
			for q := range msgs {
				msgs[q] = kibMsg(b, int32(q), fmt.Sprintf("order-%d", q))
			}
			b.SetBytes(1024)
			b.ReportAllocs()
			require.NoError(b, s.CommitLog().WaitPrefault(b.Context())) // one-time start-up work, not put work
			syscall.Sync()
			b.ResetTimer()
			ctx := b.Context()
			if batch == 1 {
				var n atomic.Int64
				b.SetParallelism(2) // 2 x GOMAXPROCS putters
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						if _, err := putMsgs(ctx, s, msgs[i%8:i%8+1]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				put := make([]*message.Message, 0, batch)
				for i := 0; i < b.N; i += batch {
					put = put[:0]
					for j := range min(batch, b.N-i) {
						put = append(put, msgs[(i+j)%8])
					}
					if _, err := putMsgs(ctx, s, put); err != nil {
						b.Fatal(err)
					}
				}
			}
			waitAllDispatched(b, s)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkGet reads one queue of 200,000 1 KiB messages front to back in
// batches of 32, without copying (the records are views of the mapping).
//
//	go test -run=^$ -bench=BenchmarkGet -benchtime=200x ./broker/store
func BenchmarkGet(b *testing.B) {
	s, err := store.Open(b.Context(), store.Config{Root: testutil.BenchDir(b), Log: commitlog.Config{SegmentBytes: 1 << 30}})
	require.NoError(b, err)
	defer s.Close()
	const n = 200_000
	m := kibMsg(b, 0, "k")
	batch := slices.Repeat([]*message.Message{m}, 100)
	for range n / 100 {
		_, err := putMsgs(b.Context(), s, batch)
		require.NoError(b, err)
	}
	waitAllDispatched(b, s)
	b.ReportAllocs()
	b.ResetTimer()
	var msgs int
	for b.Loop() {
		for off := int64(0); off < n; {
			g, err := s.Get("Bench", 0, off, 32, 1<<20, nil)
			if err != nil || g.Status != store.Found {
				b.Fatal(err, g.Status)
			}
			msgs += len(g.Records)
			off = g.NextOffset
			g.Release()
		}
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkKeyLookup looks up random keys among 10,000,000 distinct indexed
// keys (1,250,000 messages with 8 keys each, plus their UNIQ_KEYs) and
// reports the latency percentiles of MessagesByKey, which reads and
// compares each candidate record.
//
//	go test -run=^$ -bench=KeyLookup -benchtime=100000x -timeout=30m ./broker/store
func BenchmarkKeyLookup(b *testing.B) {
	const msgs, keysPer = 1_250_000, 8
	s, err := store.Open(b.Context(), store.Config{Root: testutil.BenchDir(b), Log: commitlog.Config{SegmentBytes: 1 << 30}})
	require.NoError(b, err)
	defer s.Close()
	batch := make([]*message.Message, 100)
	for i := 0; i < msgs; i += len(batch) {
		for j := range batch {
			keys := ""
			for k := range keysPer {
				keys += fmt.Sprintf("key-%d ", (i+j)*keysPer+k)
			}
			batch[j] = &message.Message{Topic: "Bench", QueueID: int32(j % 8), Body: []byte("x"),
				Properties: message.Properties{{Key: message.PropKeys, Value: keys}}}
		}
		_, err := putMsgs(b.Context(), s, batch)
		require.NoError(b, err)
	}
	waitAllDispatched(b, s)
	rng := rand.New(rand.NewPCG(1, 2))
	end := time.Now().Add(time.Hour).UnixMilli()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		key := fmt.Sprintf("key-%d", rng.IntN(msgs*keysPer))
		t0 := time.Now()
		got, err := s.MessagesByKey("Bench", key, 0, end, 32)
		lat = append(lat, time.Since(t0))
		if err != nil || len(got) != 1 {
			b.Fatal(key, err, len(got))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkRebuild deletes the consume queues, the index and the dispatch
// checkpoint of a store holding 1 GiB of 1 KiB messages over 8 queues and
// measures the Open that rebuilds them from the log. GANTRY_DROP_CACHES=1
// (root) drops the page cache first, for a cold-cache figure.
//
//	go test -run=^$ -bench=Rebuild -benchtime=3x ./broker/store
func BenchmarkRebuild(b *testing.B) {
	root := testutil.BenchDir(b)
	cfg := store.Config{Root: root, Log: commitlog.Config{SegmentBytes: 1 << 30}}
	s, err := store.Open(b.Context(), cfg)
	require.NoError(b, err)
	msgs := make([]*message.Message, 64)
	for j := range msgs {
		msgs[j] = kibMsg(b, int32(j%8), fmt.Sprintf("order-%d", j))
	}
	for s.CommitLog().MaxOffset() < 1<<30-64<<10 {
		_, err := putMsgs(b.Context(), s, msgs)
		require.NoError(b, err)
	}
	require.NoError(b, s.Close())
	b.ResetTimer()
	var records int64
	for b.Loop() {
		b.StopTimer()
		for _, p := range []string{"consumequeue", "index", "dispatch.json"} {
			require.NoError(b, os.RemoveAll(filepath.Join(root, p)))
		}
		if os.Getenv("GANTRY_DROP_CACHES") == "1" {
			syscall.Sync()
			require.NoError(b, os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0))
		}
		b.StartTimer()
		s, err := store.Open(b.Context(), cfg)
		require.NoError(b, err)
		b.StopTimer()
		r := s.Recovery()
		require.True(b, r.Rebuilt)
		records = r.DispatchedRecords
		require.NoError(b, s.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(records), "records")
}
