package embedded_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// One send at a time, 1 KiB, against an in-process broker: the Go client's
// Send and a bare unary gRPC call, to see what the client adds.
//
//	go test -run=^$ -bench=SendOne -benchtime=20000x ./embedded
func BenchmarkSendOne(b *testing.B) {
	c, err := embedded.Start(b.Context(), embedded.Options{})
	require.NoError(b, err)
	defer c.Close(context.Background())
	body := make([]byte, 1024)
	b.Run("client", func(b *testing.B) {
		p, err := client.NewProducer(b.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
		require.NoError(b, err)
		defer p.Close(context.Background())
		_, err = p.Send(b.Context(), &client.Message{Topic: "One", Body: body})
		require.NoError(b, err)
		for b.Loop() {
			if _, err := p.Send(b.Context(), &client.Message{Topic: "One", Body: body}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unary", func(b *testing.B) {
		cc, err := grpc.NewClient(c.BrokerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(b, err)
		defer cc.Close()
		m := gantryv1.NewMessagingClient(cc)
		req := &gantryv1.SendRequest{Topic: "One", Messages: []*gantryv1.Message{{QueueId: 0, Body: body}}}
		for b.Loop() {
			if _, err := m.Send(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		cc, err := grpc.NewClient(c.BrokerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(b, err)
		defer cc.Close()
		m := gantryv1.NewMessagingClient(cc)
		st, err := m.SendStream(b.Context())
		require.NoError(b, err)
		req := &gantryv1.SendRequest{Topic: "One", Messages: []*gantryv1.Message{{QueueId: 0, Body: body}}}
		for b.Loop() {
			if err := st.Send(req); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				b.Fatal(err)
			}
		}
		_ = st.CloseSend()
	})
}

// A SYNC_MASTER with one slave against a standalone master, on loopback,
// 1 KiB messages through the Go client: one send at a time ("one", its
// latency, with p50 and p99), 64 senders ("parallel") and 4,096 sends in
// flight through SendAsync ("async-4096"), throughput.
//
//	go test -run=^$ -bench=SendSyncMaster -benchtime=5000x ./embedded
func BenchmarkSendSyncMaster(b *testing.B) {
	for _, mode := range []struct {
		name   string
		role   broker.BrokerRole
		slaves int
	}{{"standalone", broker.AsyncMaster, 0}, {"sync-1-slave", broker.SyncMaster, 1}} {
		b.Run(mode.name, func(b *testing.B) {
			opts := embedded.Options{Slaves: mode.slaves, Broker: func(c *broker.Config) { c.BrokerRole = mode.role }}
			c, err := embedded.Start(b.Context(), opts)
			require.NoError(b, err)
			defer c.Close(context.Background())
			if mode.slaves > 0 {
				require.Eventually(b, func() bool {
					s := c.Server().Slaves()
					return len(s) == 1 && s[0].Connected
				}, 30*time.Second, 10*time.Millisecond)
			}
			p, err := client.NewProducer(b.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
			require.NoError(b, err)
			defer p.Close(context.Background())
			body := make([]byte, 1024)
			_, err = p.Send(b.Context(), &client.Message{Topic: "Sync", Body: body})
			require.NoError(b, err)
			b.Run("one", func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				for b.Loop() {
					start := time.Now()
					if _, err := p.Send(b.Context(), &client.Message{Topic: "Sync", Body: body}); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
			b.Run("async-4096", func(b *testing.B) {
				// 4,096 sends in flight through SendAsync: the issue's
				// throughput comparison.
				b.SetBytes(1024)
				inflight := make(chan struct{}, 4096)
				var failed atomic.Int64
				stopLag := sampleLag(b, c, mode.slaves > 0)
				defer stopLag()
				for b.Loop() {
					inflight <- struct{}{}
					p.SendAsync(context.Background(), &client.Message{Topic: "Sync", Body: body}, func(_ *client.Message, _ client.SendResult, err error) {
						if err != nil {
							failed.Add(1)
						}
						<-inflight
					})
				}
				for range cap(inflight) {
					inflight <- struct{}{}
				}
				stopLag()
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d sends failed", n)
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.SetParallelism(32) // 32 per GOMAXPROCS: many sends in flight
				b.SetBytes(1024)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := p.Send(context.Background(), &client.Message{Topic: "Sync", Body: body}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// sampleLag samples, every millisecond while the benchmark runs, how far
// the slave's acknowledged log end is behind the master's, and reports the
// p99 in KiB when stopped (stop is idempotent). Without a slave it does
// nothing.
func sampleLag(b *testing.B, c *embedded.Cluster, slave bool) (stop func()) {
	if !slave {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var lags []int64
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			end := c.Broker().ReplicaLog().MaxOffset()
			if s := c.Server().Slaves(); len(s) == 1 {
				lags = append(lags, max(end-s[0].Acked, 0))
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			if len(lags) == 0 {
				return
			}
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)*99/100])/1024, "lag-p99-KiB")
		})
	}
}
