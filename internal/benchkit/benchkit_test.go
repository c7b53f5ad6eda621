package benchkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The verifier counts every run's distinct, missing and duplicated
// messages when bodies arrive from many goroutines in any order.
func TestVerifierConcurrent(t *testing.T) {
	const total = 10_000
	run, other := NewRunID(), NewRunID()
	var v Verifier
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for seq := int64(g); seq < total; seq += 8 {
				if seq%1000 == 7 {
					continue // lost
				}
				v.Add(Body(run, seq, total, 64))
				if seq%500 == 3 {
					v.Add(Body(run, seq, total, 64)) // a duplicate
				}
			}
		})
	}
	wg.Go(func() {
		for seq := range int64(100) {
			v.Add(Body(other, seq, 0, 64)) // a run bounded by time
		}
		v.Add([]byte("not a bench body"))
	})
	wg.Wait()
	lines, ok := v.Report()
	assert.False(t, ok, "messages were lost")
	assert.ElementsMatch(t, []string{
		fmt.Sprintf("run %s: %d/%d received, 10 LOST, 20 duplicates", run, total-10, total),
		fmt.Sprintf("run %s: 100 distinct messages, 0 duplicates (run bounded by time: no expected count)", other),
		"1 messages not written by gantry bench",
	}, lines)
	require.Equal(t, int64(total-10+100), v.Received())
}

// ProcCPU reads a process's CPU time, and CPUMeter reports what was spent
// between Start and Stop.
func TestCPUMeter(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	m := StartCPU(os.Getpid()) // this process as the "server" too
	// Spin until the process has used 0.2 s of CPU (not 0.2 s of wall
	// time, of which a busy machine may give it less than the 0.05 s
	// asserted below), at most for 30 s.
	cpu0, err := ProcCPU(os.Getpid())
	require.NoError(t, err)
	sum := 0
	for start := time.Now(); time.Since(start) < 30*time.Second; {
		for range 1 << 20 {
			sum++ // spin: user time
		}
		if cpu, err := ProcCPU(os.Getpid()); err == nil && cpu-cpu0 >= 0.2 {
			break
		}
	}
	line := m.Stop(1000)
	assert.NotZero(t, sum)
	assert.Greater(t, m.Client, 0.05, line)
	assert.InDelta(t, m.Client, m.Server, 0.05, line)
	assert.Regexp(t, `^cpu: client \d+\.\d\d s, server \d+\.\d\d s; \d+\.\d\d µs a message in all$`, line)

	_, err = ProcCPU(-1)
	assert.Error(t, err)
	assert.Regexp(t, `^cpu: not measured: `, StartCPU(1<<30).Stop(1), "a server that cannot be read")
}

// Produce returns once every send is answered, with the counts and bytes
// of the answers, never more in flight than the window, and the first
// error.
func TestProduce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		count    int64
		inflight int
		failEach int64 // every failEach-th send fails; 0: none
	}{
		{"one in flight", 100, 1, 0},
		{"window", 5000, 64, 0},
		{"failures", 5000, 64, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, maxOut, answered atomic.Int64
			var seq atomic.Int64
			send := func(_ context.Context, body []byte, done func(error)) {
				require.Len(t, body, 100)
				n := seq.Add(1)
				cur := out.Add(1)
				for m := maxOut.Load(); cur > m && !maxOut.CompareAndSwap(m, cur); m = maxOut.Load() {
				}
				go func() { // answered later, on another goroutine
					time.Sleep(time.Duration(n%3) * time.Microsecond)
					out.Add(-1)
					answered.Add(1)
					if tc.failEach > 0 && n%tc.failEach == 0 {
						done(fmt.Errorf("send %d refused", n))
						return
					}
					done(nil)
				}()
			}
			res, err := Produce(context.Background(), send, ProduceConfig{Count: tc.count, Size: 100, Inflight: tc.inflight, Run: NewRunID()})
			assert.Equal(t, tc.count, answered.Load(), "returned before every answer")
			assert.LessOrEqual(t, maxOut.Load(), int64(tc.inflight))
			fails := int64(0)
			if tc.failEach > 0 {
				fails = tc.count / tc.failEach
				require.Error(t, err)
				assert.Contains(t, err.Error(), fmt.Sprintf("%d sends failed, the first: send ", fails))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.count-fails, res.Msgs)
			assert.Equal(t, fails, res.Errors)
			assert.Equal(t, (tc.count-fails)*100, res.Bytes)
			assert.Equal(t, tc.count, res.Latency.Count())
		})
	}
}

// With a duration, Produce stops sending when it ends and still waits for
// the sends out.
func TestProduceDuration(t *testing.T) {
	var out atomic.Int64
	send := func(_ context.Context, _ []byte, done func(error)) {
		out.Add(1)
		go func() {
			time.Sleep(time.Millisecond)
			out.Add(-1)
			done(nil)
		}()
	}
	res, err := Produce(context.Background(), send, ProduceConfig{Duration: 50 * time.Millisecond, Size: 64, Inflight: 16, Run: NewRunID()})
	require.NoError(t, err)
	assert.Zero(t, out.Load())
	assert.Positive(t, res.Msgs)
	assert.GreaterOrEqual(t, res.Elapsed, 50*time.Millisecond)
}

// A context that has already ended stops Produce before it sends, even
// when a slot of the window is free too: the slot Produce may have taken
// is given back, so that its wait for the sends out returns. (That select
// picks either case at random: 50 runs take the slot about 25 times.)
func TestProduceEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	send := func(_ context.Context, _ []byte, done func(error)) { done(nil) }
	for range 50 {
		ret := make(chan Result, 1)
		go func() {
			res, _ := Produce(ctx, send, ProduceConfig{Count: 10, Size: 64, Inflight: 4, Run: NewRunID()})
			ret <- res
		}()
		select {
		case res := <-ret:
			assert.Zero(t, res.Msgs)
		case <-time.After(10 * time.Second):
			t.Fatal("Produce did not return: it kept a slot of its window")
		}
	}
}

// BenchmarkProduceHarness is Produce's own cost a message, with a sender
// that answers at once from another goroutine, as a client's would: what
// the peer benchmark adds to both systems' figures.
//
//	go test -run=^$ -bench=ProduceHarness -benchmem ./internal/benchkit
func BenchmarkProduceHarness(b *testing.B) {
	answers := make(chan func(error), 4096)
	go func() {
		for done := range answers {
			done(nil)
		}
	}()
	defer close(answers)
	send := func(_ context.Context, _ []byte, done func(error)) { answers <- done }
	b.ReportAllocs()
	b.ResetTimer()
	res, err := Produce(b.Context(), send, ProduceConfig{Count: int64(b.N), Size: 1024, Inflight: 4096})
	require.NoError(b, err)
	require.Equal(b, int64(b.N), res.Msgs)
}

// A fatal error ends the run at once; others are counted and it goes on.
func TestProduceStopsAtAFatalError(t *testing.T) {
	errMissing, errBusy := errors.New("no such topic"), errors.New("busy")
	var sent atomic.Int64
	send := func(_ context.Context, _ []byte, done func(error)) {
		if sent.Add(1)%2 == 0 {
			done(errBusy)
			return
		}
		done(errMissing)
	}
	fatal := func(err error) bool { return errors.Is(err, errMissing) }
	_, err := Produce(t.Context(), send, ProduceConfig{Count: 100_000, Inflight: 64, Run: NewRunID(), Fatal: fatal})
	require.ErrorIs(t, err, errMissing)
	assert.ErrorContains(t, err, "stopped at the first send that no retry can help")
	assert.Equal(t, int64(1), sent.Load())

	sent.Store(1) // from now on busy, missing, busy, ...
	res, err := Produce(t.Context(), send, ProduceConfig{Count: 10, Inflight: 1, Run: NewRunID(), Fatal: func(err error) bool { return false }})
	require.ErrorIs(t, err, errBusy)
	assert.Equal(t, int64(10), res.Errors, "counted, not fatal")
}

// A run that took no time has a rate of 0, not NaN.
func TestResultOfNothing(t *testing.T) {
	assert.Equal(t, "consume: 0 msgs in 0.00s = 0 msgs/s, 0.0 MB/s, 0 errors", Result{Op: "consume"}.String())
}
