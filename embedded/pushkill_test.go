package embedded_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// pushChildEnv makes the test binary a push consumer process (see
// runPushChild) instead of running tests.
const pushChildEnv = "GANTRY_PUSH_CHILD"

// runPushChild is a consumer process: it joins the group given in its
// environment, prints "READY" once started, "A <queue ids>" whenever its
// queues change and "H <queue id> <offset>" for every message before its
// handler returns, and shuts down when its stdin closes.
func runPushChild() int {
	var mu sync.Mutex
	out := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	cfg := client.Config{NameServers: []string{os.Getenv("GANTRY_CHILD_NAMESRV")}, ClientID: os.Getenv(pushChildEnv)}
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		var b strings.Builder
		for _, m := range msgs {
			fmt.Fprintf(&b, "H %d %d\n", m.Queue.ID, m.QueueOffset)
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(os.Stdout, b.String())
		return client.ConsumeSuccess
	}
	ctx := context.Background()
	commitEvery, _ := time.ParseDuration(os.Getenv("GANTRY_CHILD_COMMIT"))
	c, err := client.NewPushConsumer(ctx, cfg, os.Getenv("GANTRY_CHILD_GROUP"), h,
		client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithFetchHold(time.Second),
		client.WithCommitInterval(cmp.Or(commitEvery, client.DefaultCommitInterval)))
	if err == nil {
		err = c.Subscribe(os.Getenv("GANTRY_CHILD_TOPIC"), "*")
	}
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	out("READY")
	stdin := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdin) }()
	var last string
	for {
		var ids []string
		for _, q := range c.Assigned() {
			if q.Topic == os.Getenv("GANTRY_CHILD_TOPIC") {
				ids = append(ids, strconv.Itoa(int(q.ID)))
			}
		}
		if s := strings.Join(ids, ","); s != last {
			out("A %s", s)
			last = s
		}
		select {
		case <-stdin:
			if err := c.Shutdown(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "child: shutdown:", err)
				return 1
			}
			return 0
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// child is a consumer process and what it printed.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{}
	done  chan struct{} // its output ended
}

// handling is a message handled by a child, in arrival order.
type handling struct {
	child int
	q     int32
	off   int64
}

type pushProcs struct {
	mu       sync.Mutex
	handled  []handling
	assigned map[int][]int32 // child -> queue ids
	changed  time.Time       // when a child's queues last changed
	children []*child
}

func (pp *pushProcs) start(t *testing.T, i int, env []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=member-%d", pushChildEnv, i))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ch := &child{cmd: cmd, stdin: stdin, ready: make(chan struct{}), done: make(chan struct{})}
	pp.children = append(pp.children, ch)
	go func() {
		defer close(ch.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "READY":
				close(ch.ready)
			case len(f) >= 1 && f[0] == "A":
				var qs []int32
				if len(f) == 2 {
					for _, s := range strings.Split(f[1], ",") {
						n, _ := strconv.Atoi(s)
						qs = append(qs, int32(n))
					}
				}
				pp.mu.Lock()
				pp.assigned[i] = qs
				pp.changed = time.Now()
				pp.mu.Unlock()
			case len(f) == 3 && f[0] == "H":
				q, _ := strconv.Atoi(f[1])
				off, _ := strconv.ParseInt(f[2], 10, 64)
				pp.mu.Lock()
				pp.handled = append(pp.handled, handling{child: i, q: int32(q), off: off})
				pp.mu.Unlock()
			}
		}
	}()
}

// settled reports whether the children in alive hold all n queues exactly
// once between them, each some, and none of them has seen its queues
// change for a while: every member has heard of every other, so no queue
// moves between live members any more.
func (pp *pushProcs) settled(n int, alive ...int) bool {
	if !pp.covered(n, alive...) {
		return false
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, c := range alive {
		if len(pp.assigned[c]) == 0 {
			return false
		}
	}
	return time.Since(pp.changed) > time.Second
}

// covered reports whether the children in alive hold all n queues exactly
// once between them.
func (pp *pushProcs) covered(n int, alive ...int) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	seen := map[int32]int{}
	for _, c := range alive {
		for _, q := range pp.assigned[c] {
			seen[q]++
		}
	}
	if len(seen) != n {
		return false
	}
	for _, k := range seen {
		if k != 1 {
			return false
		}
	}
	return true
}

// Three consumer processes share 8 queues; one is killed with SIGKILL in
// the middle of the run. Every message is handled at least once, and the
// only duplicates are messages the killed member handled after the offset
// it had committed.
func TestPushMemberKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts consumer processes")
	}
	pc := newPushCluster(t, "Kills", 8)
	env := []string{"GANTRY_CHILD_NAMESRV=" + pc.c.NameServerAddr(), "GANTRY_CHILD_GROUP=kills", "GANTRY_CHILD_TOPIC=Kills",
		"GANTRY_CHILD_COMMIT=200ms"} // commits during the run, so that some of the killed member's work is committed
	pp := &pushProcs{assigned: map[int][]int32{}}
	for i := range 3 {
		pp.start(t, i, env)
	}
	defer func() {
		for i, ch := range pp.children {
			if i == 0 {
				continue
			}
			_ = ch.stdin.Close()
			_ = ch.cmd.Wait()
		}
	}()
	for _, ch := range pp.children {
		select {
		case <-ch.ready:
		case <-time.After(30 * time.Second):
			t.Fatal("a consumer process did not start")
		}
	}
	// Sending starts once the group has settled: a queue moving between
	// live members during the run would be handled twice by them.
	require.Eventually(t, func() bool { return pp.settled(8, 0, 1, 2) }, 30*time.Second, 10*time.Millisecond)

	n := pushMessages(t)
	sent := make(chan struct{})
	go func() { defer close(sent); pc.send(t, "Kills", "k", 0, n, nil, nil) }()
	require.Eventually(t, func() bool { pp.mu.Lock(); defer pp.mu.Unlock(); return len(pp.handled) >= n/2 }, time.Minute, time.Millisecond)

	// Kill member 0 and read, at once, the offsets it had committed (its
	// queues' next owners start from them, and commit only later).
	require.NoError(t, pp.children[0].cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	_ = pp.children[0].cmd.Wait()
	pull, err := client.NewPullConsumer(t.Context(), pc.cfg, "kills")
	require.NoError(t, err)
	defer pull.Close(context.Background())
	qs, err := pull.Queues(t.Context(), "Kills")
	require.NoError(t, err)
	committed := map[int32]int64{}
	for _, q := range qs {
		off, _, err := pull.CommittedOffset(t.Context(), q)
		require.NoError(t, err)
		committed[q.ID] = off
	}
	<-pp.children[0].done
	pp.mu.Lock()
	killedQueues := slices.Clone(pp.assigned[0])
	pp.mu.Unlock()
	require.Eventually(t, func() bool { return pp.covered(8, 1, 2) }, 10*time.Second, time.Millisecond)
	moved := time.Since(killed)

	<-sent
	require.Eventually(t, func() bool {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		seen := map[[2]int64]bool{}
		for _, h := range pp.handled {
			seen[[2]int64{int64(h.q), h.off}] = true
		}
		return len(seen) == n
	}, 2*time.Minute, 20*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // late duplicates

	pp.mu.Lock()
	defer pp.mu.Unlock()
	by := map[[2]int64][]int{}
	killedHandled := 0
	for _, h := range pp.handled {
		k := [2]int64{int64(h.q), h.off}
		by[k] = append(by[k], h.child)
		if h.child == 0 {
			killedHandled++
		}
	}
	require.Len(t, by, n, "every message handled at least once")
	dups, uncommitted := 0, 0
	for k, children := range by {
		if k[1] >= committed[int32(k[0])] && slices.Contains(children, 0) {
			uncommitted++
		}
		if len(children) == 1 {
			continue
		}
		dups += len(children) - 1
		require.Contains(t, children, 0, "message %v handled twice by live members: %v", k, children)
		require.Len(t, children, 2, "message %v: %v", k, children)
		require.GreaterOrEqual(t, k[1], committed[int32(k[0])], "message %v was committed by the killed member before it died", k)
	}
	assert.LessOrEqual(t, dups, uncommitted)
	fmt.Printf("push consumer kill: %d messages, the killed member (queues %v) handled %d, %d of them after its committed offsets; "+
		"duplicates %d (all of those); its queues moved %s after SIGKILL\n",
		n, killedQueues, killedHandled, uncommitted, dups, moved.Round(time.Millisecond))
}
