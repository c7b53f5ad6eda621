package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
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
//
// It also measures the official client alone: the same SendSync against a
// responder that answers every send at once and stores nothing (Gantry's
// remoting server with a canned answer, in the same process). That is the
// most the official client does here whatever the broker behind it; it
// writes each request in four system calls under a lock per connection
// (remote_client.go doRequest, codec.go WriteTo), one connection per
// broker.
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

	alone := responderSender(t)
	load(t.Context(), benchSenders, 2*time.Second, alone)
	an, ad, aerr := load(t.Context(), benchSenders, window, alone)
	ar := float64(an) / ad.Seconds()

	t.Logf("%d senders, %d-byte bodies, %s each:", benchSenders, benchBodySize, window)
	t.Logf("  official client SendSync (remoting): %8.0f msgs/s (%d in %s, %d errors)", or, on, od.Round(time.Millisecond), oerr)
	t.Logf("  Gantry client Producer.Send (gRPC):  %8.0f msgs/s (%d in %s, %d errors)", gr, gn, gd.Round(time.Millisecond), gerr)
	t.Logf("  official / Gantry: %.2f", or/gr)
	t.Logf("  official client SendSync against a responder that stores nothing: %8.0f msgs/s (%d errors); / Gantry: %.2f",
		ar, aerr, ar/gr)
	require.Zero(t, oerr+gerr+aerr, "send errors")
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
	t.Cleanup(func() { _ = gp.Close(context.Background()) })
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

// responderSender starts a remoting server that is the official client's
// name server and broker at once: it routes every topic to itself (8
// queues) and answers every SEND_MESSAGE with success and an offset at
// once, storing nothing. It returns an official SendSync of a 1 KiB
// message to it.
func responderSender(t testing.TB) func(context.Context) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	route, err := json.Marshal(nameserver.TopicRoute{
		QueueDatas:  []nameserver.QueueData{{BrokerName: "responder", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
		BrokerDatas: []nameserver.BrokerData{{Cluster: "responder", BrokerName: "responder", BrokerAddrs: map[int64]string{0: addr}}},
	})
	require.NoError(t, err)
	var offset atomic.Int64
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqGetRouteInfoByTopic, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.ResSuccess, "")
		resp.Body = route
		return resp
	})
	mux.HandleFunc(remoting.ReqHeartBeat, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.ResSuccess, "")
	})
	send := func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		off := offset.Add(1)
		resp := remoting.NewResponse(req, remoting.ResSuccess, "")
		resp.ExtFields = map[string]string{
			"msgId":       message.EncodeOffsetMsgID(netip.MustParseAddrPort("127.0.0.1:10911"), off*1024),
			"queueId":     "0",
			"queueOffset": strconv.FormatInt(off, 10),
		}
		return resp
	}
	mux.HandleFunc(remoting.ReqSendMessage, send)
	mux.HandleFunc(remoting.ReqSendMessageV2, send)
	srv, err := remoting.NewServer(remoting.Config{}, mux)
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })

	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{addr}),
		producer.WithGroupName("PG_responder"), producer.WithInstanceName(instanceName(t, "responder")))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	body := bytes.Repeat([]byte{'b'}, benchBodySize)
	return func(ctx context.Context) error {
		_, err := p.SendSync(ctx, primitive.NewMessage("T_bench_responder", body))
		return err
	}
}
