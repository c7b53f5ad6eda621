package reliability

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

const (
	tailTopic    = "ReliabilityTail"
	tailMsgBytes = 256 << 10
)

// Recovery time after a SIGKILL with a large unflushed tail (RELIABILITY.md
// §4, crash during produce): under ASYNC_FLUSH with a flusher that never
// runs (FlushInterval 1 h) and one commit-log segment (no roll), 64 MiB
// (long: 1 GiB) of 256 KiB messages is written to a second topic while a
// recording producer sends to the checked one; as soon as the last of them
// is acknowledged the broker is SIGKILLed and restarted. The restart
// recovers the whole unflushed tail from the page cache (the recovery
// report names the checkpoint and what was scanned). Pass: restart to
// serving within 10 s (long: 60 s), every acknowledged tail message read
// back intact and once, the usual counts 0, a clean offline verify.
func TestRecoveryLargeTail(t *testing.T) {
	tail := Pick(int64(64<<20), int64(1<<30))
	e := NewEnv(t, "recovery-large-tail")
	if free, err := FreeBytes(e.Dir); err != nil || free < 4*tail {
		t.Skipf("skipped: %d bytes free under %s (err %v); the run needs %d (four times the tail)", free, e.Dir, err, 4*tail)
	}
	e.Spec.Flush = "ASYNC_FLUSH"
	e.Spec.FlushInterval = time.Hour // nothing is flushed: the whole tail stays in the page cache
	e.Spec.SegmentBytes = tail + Pick(int64(32<<20), int64(256<<20))
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	createTopic(t, e, tailTopic, 4)
	e.WaitTopicSaved()
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Rate = 500 })

	fillStart := time.Now()
	acked, fillErrs := fillTail(t, e, int(tail/tailMsgBytes))
	fillTook := time.Since(fillStart)
	e.KillBroker()
	killedAt := time.Now()
	startup := e.StartBroker()
	servingAfterKill := time.Since(killedAt)
	rep, repErr := readRecoveryReport(e.Spec.Store)
	e.Sleep(time.Second, 1500*time.Millisecond) // acks after the restart
	e.StopWorkers(prod)

	r := e.DrainAndCheck(checker.Options{MinAcked: 100})
	checkTail(t, e, acked, r)
	e.StopBroker()
	e.Verify(r)
	r.Add("tailMsgs", len(acked))
	r.Add("tailBytes", MiB(int64(len(acked))*tailMsgBytes))
	r.Add("fillTook", fillTook.Round(time.Millisecond))
	r.Add("restartToServing", startup.Round(time.Millisecond))
	r.Add("killToServing", servingAfterKill.Round(time.Millisecond))
	if repErr != nil {
		r.Fail("recovery report: %v", repErr)
	} else {
		lr := rep.Log
		r.Add("checkpointAtKill", lr.CheckpointOffset)
		r.Add("scanned", MiB(lr.MaxOffset-lr.ScanFrom))
		r.Add("recordsScanned", lr.RecordsScanned)
		r.Add("logRecovery", time.Duration(lr.DurationMS*float64(time.Millisecond)).Round(time.Millisecond))
		r.Add("redispatched", rep.DispatchedRecords)
		r.Add("storeRecovery", rep.Duration.Round(time.Millisecond))
		if lr.MaxOffset-lr.ScanFrom < tail {
			r.Fail("recovery scanned %d bytes, less than the %d-byte tail: the tail was flushed", lr.MaxOffset-lr.ScanFrom, tail)
		}
	}
	r.Add("race", raceEnabled)
	for _, err := range fillErrs {
		r.Fail("tail send: %v", err)
	}
	if bound := Pick(10*time.Second, time.Minute); startup > bound {
		r.Fail("the restart took %s to serve (limit %s)", startup, bound)
	}
	e.Report(r)
}

// createTopic creates a topic of queues queues and waits for its route.
func createTopic(t *testing.T, e *Env, topic string, queues int32) {
	t.Helper()
	a := e.Admin()
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues}))
	require.Eventually(t, func() bool {
		rt, err := a.Route(t.Context(), topic)
		return err == nil && len(rt.WriteQueues()) == int(queues)
	}, 30*time.Second, 20*time.Millisecond, "no route for %s", topic)
}

// tailBody is the body of tail message i: "tail-<i>|" then a 4 KiB block
// drawn from a generator seeded by i, repeated to tailMsgBytes.
func tailBody(i int) []byte {
	block := make([]byte, 4096)
	g := rand.New(rand.NewPCG(uint64(i), 0x7a11))
	for j := 0; j < len(block); j += 8 {
		binary.LittleEndian.PutUint64(block[j:], g.Uint64())
	}
	b := fmt.Appendf(make([]byte, 0, tailMsgBytes), "tail-%d|", i)
	for len(b) < tailMsgBytes {
		b = append(b, block[:min(len(block), tailMsgBytes-len(b))]...)
	}
	return b
}

// fillTail sends n tail messages from four goroutines and returns which
// were acknowledged, and the send errors (the broker is up: none expected).
func fillTail(t *testing.T, e *Env, n int) ([]bool, []error) {
	t.Helper()
	p, err := client.NewProducer(t.Context(), workload.ClientConfig([]string{e.NSAddr}, nil), client.WithSendTimeout(30*time.Second))
	require.NoError(t, err)
	defer p.Close(context.Background())
	acked := make([]bool, n)
	var (
		mu   sync.Mutex
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				_, err := p.Send(ctx, &client.Message{Topic: tailTopic, Body: tailBody(i), Keys: []string{fmt.Sprint(i)}})
				cancel()
				mu.Lock()
				if err == nil {
					acked[i] = true
				} else if len(errs) < 5 {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked, errs
}

// checkTail reads the tail topic back and records in r how many
// acknowledged tail messages were read intact (tailLost, tailCorrupt and
// tailDuplicated must be 0).
func checkTail(t *testing.T, e *Env, acked []bool, r *checker.Result) {
	t.Helper()
	pc, err := client.NewPullConsumer(t.Context(), workload.ClientConfig([]string{e.NSAddr}, nil), "reliability-tail-check")
	require.NoError(t, err)
	defer pc.Close(context.Background())
	seen := make([]int, len(acked))
	corrupt := 0
	err = eachTailMessage(t.Context(), pc, func(m *client.MessageExt) {
		var i int
		if _, err := fmt.Sscan(strings.Join(m.Keys(), ""), &i); err != nil || i < 0 || i >= len(acked) ||
			!bytes.Equal(m.Body, tailBody(i)) {
			corrupt++
			return
		}
		seen[i]++
	})
	if err != nil {
		r.Fail("reading the tail back: %v", err)
	}
	lost, dup := 0, 0
	for i, ok := range acked {
		if ok && seen[i] == 0 {
			lost++
		}
		dup += max(seen[i]-1, 0)
	}
	r.Add("tailLost", lost)
	r.Add("tailCorrupt", corrupt)
	r.Add("tailDuplicated", dup)
	if lost+corrupt+dup > 0 {
		r.Fail("tail: %d acknowledged messages lost, %d corrupt, %d duplicated", lost, corrupt, dup)
	}
}

// eachTailMessage pulls every queue of the tail topic from its min to its
// max offset.
func eachTailMessage(ctx context.Context, pc *client.PullConsumer, f func(*client.MessageExt)) error {
	qs, err := pc.Queues(ctx, tailTopic)
	if err != nil {
		return err
	}
	for _, q := range qs {
		lo, hi, err := pc.QueueOffsets(ctx, q)
		if err != nil {
			return err
		}
		for off := lo; off < hi; {
			res, err := pc.Pull(ctx, q, off, client.PullOptions{MaxMessages: 8}) // 2 MiB: under gRPC's 4 MiB default
			if err != nil {
				return fmt.Errorf("queue %d at %d: %w", q.ID, off, err)
			}
			for _, m := range res.Messages {
				f(m)
				off = m.QueueOffset + 1
			}
			if len(res.Messages) == 0 {
				if res.NextOffset <= off {
					return fmt.Errorf("queue %d: pull at %d found nothing (%s) below max %d", q.ID, off, res.Status, hi)
				}
				off = res.NextOffset
			}
		}
	}
	return nil
}

// readRecoveryReport reads the store's report of its last recovery (the
// commit log's included).
func readRecoveryReport(root string) (*store.RecoveryReport, error) {
	b, err := os.ReadFile(filepath.Join(root, "recovery-report.json"))
	if err != nil {
		return nil, err
	}
	var rep store.RecoveryReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, err
	}
	if rep.Log.Clean {
		return &rep, errors.New("the report says the last shutdown was clean")
	}
	return &rep, nil
}
