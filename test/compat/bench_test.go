package compat

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// Throughput of the official client against Gantry's own, on one embedded
// cluster in one run: 64 goroutines each sending one 1 KiB message at a
// time (the official producer's SendSync, Gantry's Producer.Send), for a
// fixed time each. It runs only with GANTRY_COMPAT_BENCH=1 (it takes
// about 2×GANTRY_COMPAT_BENCH_SECONDS, default 10 s each, plus warm-ups):
//
//	GANTRY_COMPAT_BENCH=1 go test -run=TestSendThroughput -count=1 -v ./...
//
// Run it without -race for meaningful figures. go test -bench=SendSync
// measures the same two as ordinary benchmarks (ns/op per message).
const (
	benchSenders  = 64
	benchBodySize = 1 << 10
)

func TestSendThroughput(t *testing.T) {
	if os.Getenv("GANTRY_COMPAT_BENCH") != "1" {
		t.Skip("set GANTRY_COMPAT_BENCH=1 to compare the official client's throughput with Gantry's")
	}
	window := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("GANTRY_COMPAT_BENCH_SECONDS")); err == nil && s > 0 {
		window = time.Duration(s) * time.Second
	}
	e := newEnv(t)
	official, gantry := benchSenders2(t, e)

	for _, warm := range []func(context.Context) error{official, gantry} {
		load(t.Context(), benchSenders, 2*time.Second, warm)
	}
	on, od, oerr := load(t.Context(), benchSenders, window, official)
	gn, gd, gerr := load(t.Context(), benchSenders, window, gantry)
	or, gr := float64(on)/od.Seconds(), float64(gn)/gd.Seconds()
	t.Logf("%d senders, %d-byte bodies, %s each:", benchSenders, benchBodySize, window)
	t.Logf("  official client SendSync (remoting): %8.0f msgs/s (%d in %s, %d errors)", or, on, od.Round(time.Millisecond), oerr)
	t.Logf("  Gantry client Producer.Send (gRPC):  %8.0f msgs/s (%d in %s, %d errors)", gr, gn, gd.Round(time.Millisecond), gerr)
	t.Logf("  official / Gantry: %.2f", or/gr)
	require.Zero(t, oerr+gerr, "send errors")
}

// BenchmarkSendSync is the same comparison as a benchmark: ns/op is the
// time per message with 64 concurrent senders.
func BenchmarkSendSync(b *testing.B) {
	b.Run("client=official", func(b *testing.B) { benchClient(b, true) })
	b.Run("client=gantry", func(b *testing.B) { benchClient(b, false) })
}

func benchClient(b *testing.B, official bool) {
	e := newEnv(b)
	o, g := benchSenders2(b, e)
	send := g
	if official {
		send = o
	}
	load(b.Context(), benchSenders, time.Second, send) // warm up: routes, connections, the store's first files
	b.SetBytes(benchBodySize)
	b.SetParallelism(max(1, benchSenders/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := send(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchSenders2 returns the two send functions: one official SendSync and
// one Gantry Producer.Send of a 1 KiB message, each to its own topic of 8
// queues.
func benchSenders2(t testing.TB, e *env) (official, gantry func(context.Context) error) {
	e.createTopic("T_bench_official", 8)
	e.createTopic("T_bench_gantry", 8)
	body := bytes.Repeat([]byte{'b'}, benchBodySize)
	var p rocketmq.Producer = e.producer()
	official = func(ctx context.Context) error {
		_, err := p.SendSync(ctx, primitive.NewMessage("T_bench_official", body))
		return err
	}
	gp, err := client.NewProducer(t.Context(), e.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = gp.Close() })
	gantry = func(ctx context.Context) error {
		_, err := gp.Send(ctx, &client.Message{Topic: "T_bench_gantry", Body: body})
		return err
	}
	return official, gantry
}

// load runs send on n goroutines for d and returns how many sends
// succeeded, the time taken and how many failed.
func load(ctx context.Context, n int, d time.Duration, send func(context.Context) error) (ok int64, took time.Duration, failed int64) {
	var okN, failN atomic.Int64
	stop := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := send(ctx); err != nil {
					failN.Add(1)
					continue
				}
				okN.Add(1)
			}
		})
	}
	wg.Wait()
	return okN.Load(), time.Since(start), failN.Load()
}
