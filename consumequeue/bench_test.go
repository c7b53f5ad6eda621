package consumequeue_test

import (
	"path/filepath"
	"testing"

	"github.com/gantrymq/gantry/consumequeue"
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
