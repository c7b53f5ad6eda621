package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// scaleConfig is a store with a small index, so that the consume queues
// are what the scale benchmarks measure.
func scaleConfig(root string) store.Config {
	return store.Config{
		Root: root, IndexSlots: 100_000, IndexEntries: 400_000,
		Log: commitlog.Config{SegmentBytes: 64 << 20, CleanInterval: -1},
	}
}

// putScale stores msgs messages in each of the queues of topics topics of
// 8 queues each ("S<n>"), a topic's 8×msgs messages in one Put.
func putScale(b *testing.B, s *store.Store, topics, msgs int) {
	b.Helper()
	for t := range topics {
		batch := make([]*message.Message, 0, 8*msgs)
		for q := range 8 {
			for i := range msgs {
				batch = append(batch, &message.Message{Topic: fmt.Sprintf("S%05d", t), QueueID: int32(q),
					Body: fmt.Appendf(nil, "body-%d", i)})
			}
		}
		_, err := putMsgs(b.Context(), s, batch)
		require.NoError(b, err)
	}
	for s.DispatchedOffset() < s.CommitLog().MaxOffset() {
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkQueuesCreate opens an empty store, stores one message in each
// of 8×topics new queues and waits until all are dispatched (create-ms:
// the time from the first Put) and until every queue has its file
// (files-ms), then closes the store (close-ms). disk-KiB/queue is the
// consume queues' real disk (stat blocks) per queue.
//
//	go test -run=^$ -bench=QueuesCreate -benchtime=1x ./broker/store
func BenchmarkQueuesCreate(b *testing.B) {
	for _, topics := range []int{125, 1250} {
		b.Run(fmt.Sprintf("queues=%d", 8*topics), func(b *testing.B) {
			var create, files, closing time.Duration
			var disk int64
			for range b.N {
				root := testutil.BenchDir(b)
				s, err := store.Open(b.Context(), scaleConfig(root))
				require.NoError(b, err)
				start := time.Now()
				putScale(b, s, topics, 1)
				create += time.Since(start)
				for s.DeferredQueues() > 0 {
					time.Sleep(time.Millisecond)
				}
				files += time.Since(start)
				start = time.Now()
				require.NoError(b, s.Close())
				closing += time.Since(start)
				disk = testutil.DiskBytes(b, filepath.Join(root, "consumequeue"))
				require.NoError(b, os.RemoveAll(root))
			}
			b.ReportMetric(float64(create.Milliseconds())/float64(b.N), "create-ms")
			b.ReportMetric(float64(files.Milliseconds())/float64(b.N), "files-ms")
			b.ReportMetric(float64(closing.Milliseconds())/float64(b.N), "close-ms")
			b.ReportMetric(float64(disk)/1024/float64(8*topics), "disk-KiB/queue")
		})
	}
}

// BenchmarkStoreOpen opens a store of 8×topics queues holding 4 messages
// each: after a clean stop, and after a kill -9 (the abort marker left and
// the periodic dispatch checkpoint, not Close's).
//
//	go test -run=^$ -bench=StoreOpen -benchtime=5x ./broker/store
func BenchmarkStoreOpen(b *testing.B) {
	for _, topics := range []int{125, 1250} {
		for _, crash := range []bool{false, true} {
			name := fmt.Sprintf("queues=%d/%s", 8*topics, map[bool]string{false: "clean", true: "kill-9"}[crash])
			b.Run(name, func(b *testing.B) {
				root := testutil.BenchDir(b)
				cfg := scaleConfig(root)
				s, err := store.Open(b.Context(), cfg)
				require.NoError(b, err)
				putScale(b, s, topics, 4)
				for s.DeferredQueues() > 0 { // every queue has its file, as some time after producing
					time.Sleep(10 * time.Millisecond)
				}
				require.NoError(b, s.Close())
				b.ResetTimer()
				for range b.N {
					if crash {
						b.StopTimer()
						simulateKill(b, root)
						b.StartTimer()
					}
					s, err := store.Open(b.Context(), cfg)
					require.NoError(b, err)
					b.StopTimer()
					require.Equal(b, 8*topics, s.Recovery().Queues)
					require.False(b, s.Recovery().Rebuilt, s.Recovery().RebuildReason)
					require.NoError(b, s.Close())
					b.StartTimer()
				}
			})
		}
	}
}

// simulateKill makes the store in root look as a kill -9 leaves it: the
// commit log's abort marker present and a dispatch checkpoint that is not
// Close's.
func simulateKill(b *testing.B, root string) {
	b.Helper()
	p := filepath.Join(root, "dispatch.json")
	raw, err := os.ReadFile(p)
	require.NoError(b, err)
	var cp map[string]any
	require.NoError(b, json.Unmarshal(raw, &cp))
	delete(cp, "clean")
	raw, err = json.Marshal(cp)
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(p, raw, 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(root, "abort"), nil, 0o644))
}
