package consumequeue_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/testutil"
)

func BenchmarkAppend(b *testing.B) {
	q, err := consumequeue.Open(b.Context(), consumequeue.Config{Dir: filepath.Join(b.TempDir(), "q")})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	b.ReportAllocs()
	b.SetBytes(consumequeue.EntrySize)
	var i int64
	for b.Loop() {
		if err := q.Append(i, entry(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkRead(b *testing.B) {
	const n = 100_000
	q, err := consumequeue.Open(b.Context(), consumequeue.Config{Dir: filepath.Join(b.TempDir(), "q"), EntriesPerFile: 30_000})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	for i := range int64(n) {
		if err := q.Append(i, entry(i)); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]consumequeue.Entry, 0, 32)
	b.ReportAllocs()
	b.SetBytes(32 * consumequeue.EntrySize)
	var from int64
	for b.Loop() {
		dst, err = q.Read(from, 32, dst[:0])
		if err != nil || len(dst) != 32 {
			b.Fatal(err, len(dst))
		}
		from = (from + 32) % (n - 32)
	}
}

// BenchmarkQueueCreate opens a new queue and appends its first entry: what
// the dispatcher pays for the first message of a queue. disk-KiB/queue is
// the real disk the queues take (stat blocks), not their size.
//
//	go test -run=^$ -bench=QueueCreate -benchtime=1000x ./consumequeue
func BenchmarkQueueCreate(b *testing.B) {
	root := testutil.BenchDir(b)
	var qs []*consumequeue.Queue
	defer func() {
		for _, q := range qs {
			q.Close()
		}
	}()
	i := 0
	cpu := testutil.ProcessCPU(b)
	for b.Loop() {
		q, err := consumequeue.Open(b.Context(), consumequeue.Config{Dir: filepath.Join(root, strconv.Itoa(i/8), strconv.Itoa(i%8))})
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Append(0, entry(0)); err != nil {
			b.Fatal(err)
		}
		qs = append(qs, q)
		i++
	}
	b.StopTimer()
	b.ReportMetric(float64((testutil.ProcessCPU(b)-cpu).Microseconds())/float64(i), "cpu-µs/op")
	b.ReportMetric(float64(testutil.DiskBytes(b, root))/1024/float64(i), "disk-KiB/queue")
}
