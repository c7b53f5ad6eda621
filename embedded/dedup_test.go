package embedded_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
)

// dropProxy forwards TCP connections to target, cutting each one (both
// ways) once it has carried a random 300..3,000 bytes from target back to
// the client: requests get through, and some of their answers are lost
// with the connection, so the client sees the send as indeterminate.
type dropProxy struct {
	lis    net.Listener
	target string
	cuts   atomic.Int64

	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dropProxy{lis: lis, target: target, rng: rand.New(rand.NewPCG(1, 2)), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p
}

func (p *dropProxy) addr() string { return p.lis.Addr().String() }

func (p *dropProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.relay(c) })
	}
}

// track registers conns for Close, or reports false once closed.
func (p *dropProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *dropProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *dropProxy) relay(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		client.Close()
		server.Close()
		return
	}
	defer p.untrack(client, server)
	p.mu.Lock()
	limit := int64(300 + p.rng.IntN(2700))
	p.mu.Unlock()
	p.wg.Go(func() {
		_, _ = io.Copy(server, client)
		p.untrack(client, server)
	})
	if n, _ := io.CopyN(client, server, limit); n == limit {
		p.cuts.Add(1)
	}
}

// Close stops accepting, cuts every connection and waits for the relays.
func (p *dropProxy) Close() {
	p.lis.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// stormResult is one message of a retry storm: its send's result or error.
type stormResult struct {
	res client.SendResult
	err error
}

// retryStorm sends n messages (body "m-<i>") from 8 goroutines through a
// proxy that loses answers, with indeterminate failures retried (each send
// gives up after retries retries or sendTimeout), and returns each one's
// outcome and how many connections the proxy cut.
func retryStorm(t *testing.T, c *embedded.Cluster, n, retries int, sendTimeout time.Duration) ([]stormResult, int64) {
	t.Helper()
	proxy := startDropProxy(t, c.BrokerAddr())
	defer proxy.Close()
	brokerAddr := c.BrokerAddr()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if addr == brokerAddr {
			addr = proxy.addr() // the route names the broker; the proxy stands in for it
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}, DialOptions: []grpc.DialOption{
		grpc.WithContextDialer(dial),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond,
			Multiplier: 1.6, MaxDelay: 50 * time.Millisecond}, MinConnectTimeout: time.Second}),
	}}
	p, err := client.NewProducer(t.Context(), cfg, client.WithRetryIndeterminate(true), client.WithRetries(retries),
		client.WithBackoff(time.Millisecond, 20*time.Millisecond), client.WithSendTimeout(sendTimeout))
	require.NoError(t, err)
	out := make([]stormResult, n)
	var wg sync.WaitGroup
	const senders = 8
	for s := range senders {
		wg.Go(func() {
			for i := s; i < n; i += senders {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				res, err := p.Send(ctx, &client.Message{Topic: "Storm", Body: fmt.Appendf(nil, "m-%d", i)})
				cancel()
				out[i].err = err
				if err == nil {
					out[i].res = res
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, p.Close(context.Background()))
	return out, proxy.cuts.Load()
}

// logMessages returns every message of topic in the broker's commit log,
// by body: once the whole log is dispatched, its queues hold them all.
func logMessages(t *testing.T, c *embedded.Cluster, topic string) map[string][]*message.Message {
	t.Helper()
	b := c.Broker()
	_, end := b.LogOffsets()
	require.Eventually(t, func() bool { return b.DispatchedOffset() >= end }, 10*time.Second, time.Millisecond)
	qs, err := b.TopicStatus(topic)
	require.NoError(t, err)
	out := map[string][]*message.Message{}
	for _, q := range qs {
		for off := q.MinOffset; off < q.MaxOffset; off++ {
			m, err := b.MessageByQueueOffset(topic, q.QueueID, off)
			require.NoError(t, err)
			out[string(m.Body)] = append(out[string(m.Body)], m)
		}
	}
	return out
}

// A producer retry storm (answers lost with their connections, every
// indeterminate send retried): with de-duplication the log holds each
// message once and every result names the stored message; without it, the
// retries store copies, which the test counts.
func TestDedupRetryStorm(t *testing.T) {
	n := 2000
	if raceEnabled || testing.Short() {
		n = 500
	}
	for _, dedup := range []bool{true, false} {
		t.Run(fmt.Sprint("dedup=", dedup), func(t *testing.T) {
			c, _ := start(t, embedded.Options{Broker: func(cfg *broker.Config) {
				if !dedup {
					cfg.DuplicationWindow = broker.DuplicationOff // on by default
				}
			}})
			start := time.Now()
			results, cuts := retryStorm(t, c, n, 50, 2*time.Second)
			st := checkStorm(t, c, results, dedup)
			assert.Positive(t, cuts, "the proxy cut connections")
			assert.Less(t, st.failed, n/10)
			summary := fmt.Sprintf("retry storm (dedup=%t): %d messages in %s, %d connections cut, %s",
				dedup, n, time.Since(start).Round(time.Millisecond), cuts, st)
			t.Log(summary)
			fmt.Println(summary)
			if dedup {
				assert.GreaterOrEqual(t, c.Broker().Status().Duplicates, int64(st.dupAnswers), "answers of duplicates may be lost too")
			} else {
				assert.Zero(t, st.dupAnswers)
			}
		})
	}
}

// Broker restarts in the middle of a retry storm let no duplicate in: the
// retries of sends stored before a restart (their answers lost with the
// connections it cut) find them in the key index the store recovered at
// Open (nothing is rebuilt in memory). Three restarts, each after another
// quarter of the messages, so that some sends are caught by one.
func TestDedupRetryStormRestart(t *testing.T) {
	n := 2000
	if raceEnabled || testing.Short() {
		n = 500
	}
	c, _ := start(t, embedded.Options{})
	restarted := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for range 3 {
			for c.Broker().Status().MessagesPut < int64(n/4) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if err := c.KillBroker(); err != nil { // connections cut, answers lost
				restarted <- err
				return
			}
			if err := c.StartBroker(context.Background()); err != nil {
				restarted <- err
				return
			}
		}
		restarted <- nil
	}()
	start := time.Now()
	results, cuts := retryStorm(t, c, n, 1000, 2*time.Second) // retries outlast a restart (the context: 30 s)
	require.NoError(t, <-restarted)
	st := checkStorm(t, c, results, true)
	assert.Less(t, st.failed, n/10)
	summary := fmt.Sprintf("retry storm with 3 restarts: %d messages in %s, %d connections cut, %s",
		n, time.Since(start).Round(time.Millisecond), cuts, st)
	t.Log(summary)
	fmt.Println(summary)
}

// stormStats sums up the outcome of a retry storm.
type stormStats struct {
	failed, retried, dupAnswers, distinct, copies int
}

func (s stormStats) String() string {
	return fmt.Sprintf("%d sends retried, %d answered as duplicates, %d failed; the log holds %d distinct messages and %d extra copies",
		s.retried, s.dupAnswers, s.failed, s.distinct, s.copies)
}

// checkStorm checks the log against a retry storm's results: every
// acknowledged message is stored and, with dedup, stored once (a failed
// one at most once) with its result naming the stored message.
func checkStorm(t *testing.T, c *embedded.Cluster, results []stormResult, dedup bool) stormStats {
	t.Helper()
	stored := logMessages(t, c, "Storm")
	st := stormStats{distinct: len(stored)}
	for i, r := range results {
		body := fmt.Sprintf("m-%d", i)
		ms := stored[body]
		if len(ms) > 1 {
			st.copies += len(ms) - 1
		}
		if r.err != nil {
			st.failed++
			if dedup {
				assert.LessOrEqual(t, len(ms), 1, "%s failed (%v), so it may be stored, but once", body, r.err)
			}
			continue
		}
		if r.res.Attempts > 1 {
			st.retried++
		}
		if r.res.Duplicate {
			st.dupAnswers++
		}
		if !assert.NotEmpty(t, ms, "%s was acknowledged", body) || !dedup {
			continue
		}
		require.Len(t, ms, 1, "%s is stored once", body)
		m := ms[0]
		assert.Equal(t, m.UniqKey(), r.res.UniqKey, body)
		assert.Equal(t, m.OffsetMsgID(), r.res.MsgID, body)
		assert.Equal(t, m.QueueID, r.res.QueueID, body)
		assert.Equal(t, m.QueueOffset, r.res.QueueOffset, body)
	}
	if dedup {
		for body, ms := range stored {
			assert.Len(t, ms, 1, "%s", body)
		}
		assert.Zero(t, st.copies)
	}
	assert.Positive(t, st.retried, "sends were retried")
	return st
}

// Two sends with one IdempotencyKey (two messages, two UNIQ_KEYs) store
// it once, across a broker restart: the second gets the first's result,
// marked duplicate.
func TestDedupIdempotencyKeyEndToEnd(t *testing.T) {
	c, cl := start(t, embedded.Options{}) // de-duplication is on by default
	p, err := client.NewProducer(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	defer p.Close(context.Background())
	send := func() client.SendResult {
		t.Helper()
		res, err := p.Send(t.Context(), &client.Message{Topic: "Pay", Body: []byte("charge 42"), IdempotencyKey: "order-42"})
		require.NoError(t, err)
		return res
	}
	first := send()
	assert.False(t, first.Duplicate)
	second := send()
	assert.True(t, second.Duplicate)
	assert.Equal(t, first.MsgID, second.MsgID)
	assert.Equal(t, first.UniqKey, second.UniqKey, "the stored message's id")
	assert.Equal(t, 1, second.Attempts)

	require.NoError(t, c.RestartBroker(t.Context()))
	var third client.SendResult
	require.Eventually(t, func() bool {
		res, err := p.Send(t.Context(), &client.Message{Topic: "Pay", Body: []byte("charge 42"), IdempotencyKey: "order-42"})
		if err != nil {
			return false
		}
		third = res
		return true
	}, 10*time.Second, 10*time.Millisecond)
	assert.True(t, third.Duplicate)
	assert.Equal(t, first.MsgID, third.MsgID)

	resp, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Pay", Messages: []*gantryv1.Message{{QueueId: -1,
		Body: []byte("charge 42"), Properties: map[string]string{message.PropIdempotencyKey: "order-42"}}}})
	require.NoError(t, err, "the unary path of messages answers the same")
	assert.True(t, resp.Results[0].Duplicate)
	assert.Equal(t, first.MsgID, resp.Results[0].MsgId)
	assert.Equal(t, first.UniqKey, resp.Results[0].UniqKey)
	assert.Len(t, logMessages(t, c, "Pay")["charge 42"], 1)
}
