package compat

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
)

// goroutine is one goroutine of a runtime.Stack dump.
type goroutine struct {
	id    string
	stack string
}

func goroutines() []goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		head, _, _ := bytes.Cut(g, []byte("\n"))
		f := strings.Fields(string(head)) // goroutine 12 [running]:
		if len(f) >= 2 && f[0] == "goroutine" {
			out = append(out, goroutine{id: f[1], stack: string(g)})
		}
	}
	return out
}

// officialPackages mark the goroutines the official client (and its
// logging and cache libraries) starts. It leaves some behind after
// Shutdown (timers that sleep before they look at the done channel, pull
// goroutines in back-off): those are counted, not failed.
var officialPackages = []string{"github.com/apache/rocketmq-client-go/", "gopkg.in/natefinch/lumberjack", "github.com/patrickmn/go-cache"}

func isOfficial(g goroutine) bool {
	return slices.ContainsFunc(officialPackages, func(p string) bool { return strings.Contains(g.stack, p) })
}

// TestShutdownLeavesNothing runs a producer, a push consumer and a pull
// consumer of the official client against a cluster, shuts them and the
// cluster down, and checks that the cluster's side (broker, nameserver,
// Gantry's admin and pull client) left no goroutine running and, as
// every test here does, no connection open. The official client's own
// leftovers are only counted. It is not parallel, so the goroutines it
// sees are its own.
func TestShutdownLeavesNothing(t *testing.T) {
	before := map[string]bool{}
	for _, g := range goroutines() {
		before[g.id] = true
	}
	t.Run("scenario", func(t *testing.T) {
		e := newEnv(t)
		const topic, group = "T_leak", "G_leak"
		e.createTopic(topic, 2)
		p := e.producer()
		var msgs []*primitive.Message
		for i := range 10 {
			msgs = append(msgs, primitive.NewMessage(topic, fmt.Appendf(nil, "leak-%d", i)))
		}
		sendAll(t, p, msgs)
		rec := newRecorder()
		e.pushConsumer(group, topic, all, rec.handler("A"))
		rec.waitBodies(t, bodiesOf(msgs), waitShort)
		pc := e.pullConsumer("G_leak_pull", topic, all)
		mqs, err := pc.GetTopicRouteInfo(topic)
		require.NoError(t, err)
		_, err = pc.PullFrom(t.Context(), mqs[0], 0, 8)
		require.NoError(t, err)
		e.readTopic(topic)
	})

	var leaked, official []goroutine
	deadline := time.Now().Add(10 * time.Second)
	for {
		leaked, official = nil, nil
		for _, g := range goroutines() {
			switch {
			case before[g.id]:
			case isOfficial(g):
				official = append(official, g)
			default:
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after shutdown: %d goroutines of the official client left behind (not checked), %d of the cluster or Gantry's client", len(official), len(leaked))
	if len(leaked) > 0 {
		var stacks []string
		for _, g := range leaked {
			stacks = append(stacks, g.stack)
		}
		t.Errorf("goroutines left behind by the cluster or Gantry's client:\n%s", strings.Join(stacks, "\n\n"))
	}
}
