package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Env is one test run: a nameserver, a broker and workers, each a child
// process, their histories, and the faults injected. Its methods fail the
// test on harness errors; the verdict comes from Check.
type Env struct {
	T     *testing.T
	Name  string
	Dir   string
	Seed  uint64
	Rand  *rand.Rand
	Topic string

	// Spec is the broker's configuration for its next start; BrokerEnv
	// adds environment variables to it (GANTRY_FAILPOINTS=...).
	Spec      BrokerSpec
	BrokerEnv []string
	Broker    *Proc
	Ready     BrokerReady // what the running broker reported
	NS        *Proc
	NSAddr    string
	// Dial rewrites the workers' connections (a broker's address to a
	// fault proxy); the drain always connects directly.
	Dial map[string]string

	faults    *history.Writer
	mu        sync.Mutex
	histories []string
	procs     []*Proc
	startups  []time.Duration
	workers   map[string]int // name -> incarnations
	admin     *client.Admin
}

// NewEnv prepares a run named name (the verdict's name) with a SYNC_FLUSH
// broker spec on free loopback ports, saving its metadata every 500 ms
// (so that WaitTopicSaved is quick), with the disk-use thresholds off (a
// host disk above 85 % would otherwise make retention delete the messages
// under test, and above 90 % refuse them); nothing is started yet.
func NewEnv(t *testing.T, name string) *Env {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv(DirEnv); root != "" {
		require.NoError(t, os.MkdirAll(root, 0o755))
		d, err := os.MkdirTemp(root, name+"-")
		require.NoError(t, err)
		dir = d
	}
	seed := Seed(t)
	e := &Env{T: t, Name: name, Dir: dir, Seed: seed, Rand: rand.New(rand.NewPCG(seed, seed>>1|1)), Topic: "Reliability",
		workers: map[string]int{}}
	e.Spec = BrokerSpec{Name: "broker-a", Store: filepath.Join(dir, "store"), GRPC: freeAddr(t), HTTP: freeAddr(t),
		ListenPort: freePort(t), HAPort: freePort(t), Flush: "SYNC_FLUSH", QueueNums: 8, OffsetInterval: 500 * time.Millisecond,
		DiskFullRatio: 1, DiskForceCleanRatio: 1}
	w, err := history.Create(filepath.Join(dir, "faults.jsonl"))
	require.NoError(t, err)
	e.faults = w
	e.histories = append(e.histories, filepath.Join(dir, "faults.jsonl"))
	t.Cleanup(e.cleanup)
	t.Logf("%s: seed %d, data in %s", name, seed, dir)
	return e
}

// freeAddr returns a loopback address with a free port (freePort).
func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}

// freePort returns a port free on every interface, below the kernel's
// ephemeral range: a port the kernel hands out (":0") can be taken by any
// outgoing connection's local end while a killed broker is down, and a
// restart on its kept ports would then fail with "address already in use"
// (seen in CI). Ports are tried at random from 10000 up to the range,
// and none is handed out twice: a run's ports are all picked before its
// processes bind them, so a port picked twice is free when checked and
// taken when the second process binds it.
func freePort(t *testing.T) int {
	t.Helper()
	lo, hi := 10000, ephemeralLow()
	if hi-lo < 1000 {
		lis, err := net.Listen("tcp", ":0")
		require.NoError(t, err)
		defer lis.Close()
		return lis.Addr().(*net.TCPAddr).Port
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if portsGiven[port] {
			continue
		}
		if lis, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err == nil {
			lis.Close()
			portsGiven[port] = true
			return port
		}
	}
	t.Fatalf("no free port in [%d, %d)", lo, hi)
	return 0
}

// portsGiven holds the ports freePort handed out.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow returns the start of the kernel's ephemeral port range
// (Linux; 32768 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}

func (e *Env) cleanup() {
	e.mu.Lock()
	procs := slices.Clone(e.procs)
	e.mu.Unlock()
	for _, p := range procs {
		if !p.Exited() {
			p.Kill()
		}
	}
	if e.admin != nil {
		_ = e.admin.Close()
	}
	_ = e.faults.Close()
	if e.T.Failed() {
		seen := map[string]bool{}
		for _, p := range procs {
			if !seen[p.Log] {
				seen[p.Log] = true
				e.T.Logf("--- last lines of %s:\n%s", p.Log, tail(p.Log, 25))
			}
		}
		if os.Getenv(DirEnv) == "" {
			e.T.Logf("set %s=DIR to keep the data and histories of the run; %s=%d replays its choices", DirEnv, SeedEnv, e.Seed)
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func (e *Env) track(p *Proc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs = append(e.procs, p)
}

// Fault records a fault in the run's history (call it just before
// injecting the fault: the checker measures loss ages from it).
func (e *Env) Fault(note string) {
	e.T.Helper()
	require.NoError(e.T, e.faults.Append(history.Event{Kind: history.Fault, Note: note, Time: history.Now()}))
}

// StartNameServer starts (or restarts, on the same address) the nameserver.
func (e *Env) StartNameServer() {
	e.T.Helper()
	if e.NSAddr == "" {
		e.NSAddr = freeAddr(e.T)
	}
	p, err := startProc("namesrv", RoleNameServer, NameServerSpec{Listen: e.NSAddr}, filepath.Join(e.Dir, "namesrv.log"))
	require.NoError(e.T, err)
	e.track(p)
	require.NoError(e.T, p.WaitReady(30*time.Second, nil))
	e.NS = p
}

// KillNameServer kills the nameserver with SIGKILL.
func (e *Env) KillNameServer() {
	e.Fault("SIGKILL nameserver")
	e.NS.Kill()
}

// StartBroker starts the broker on Spec and waits until it serves and (if
// the nameserver runs) routes to it. It returns the time the process took
// from start to serving, recovery included.
func (e *Env) StartBroker() time.Duration {
	e.T.Helper()
	require.True(e.T, e.TryStartBroker(), "the broker died while starting (log %s)", e.Broker.Log)
	return e.Ready.Startup
}

// TryStartBroker is StartBroker for a broker that may die while it starts
// (a failpoint armed on a step of recovery): false when it did.
func (e *Env) TryStartBroker() bool {
	e.T.Helper()
	e.Spec.NameServers = []string{e.NSAddr}
	// Before the process exists: an ack read before this came from the
	// broker a fault killed (history.Start).
	e.Record(history.Event{Kind: history.Start, Note: "broker started", Time: history.Now()})
	p, err := startProc("broker", RoleBroker, e.Spec, filepath.Join(e.Dir, "broker.log"), e.BrokerEnv...)
	require.NoError(e.T, err)
	e.track(p)
	e.Broker = p
	if err := p.WaitReady(2*time.Minute, &e.Ready); err != nil {
		if p.Exited() {
			return false
		}
		require.NoError(e.T, err)
	}
	e.startups = append(e.startups, e.Ready.Startup)
	e.Record(history.Event{Kind: history.Heal, Note: "broker serving", Time: history.Now()})
	if e.NS != nil && !e.NS.Exited() && !e.waitRegistered() {
		if p.Exited() {
			return false
		}
		e.T.Fatalf("the broker did not register with the nameserver (log %s)", p.Log)
	}
	return true
}

// waitRegistered waits until the nameserver lists the broker; false if
// it did not within 30 s or the broker exited.
func (e *Env) waitRegistered() bool {
	e.T.Helper()
	a := e.Admin()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !e.Broker.Exited() {
		ctx, cancel := context.WithTimeout(e.T.Context(), time.Second)
		ci, err := a.ClusterInfo(ctx)
		cancel()
		if err == nil && slices.Contains(slices.Collect(maps.Values(ci.Brokers[e.Spec.Name].Addrs)), e.Ready.GRPC) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// KillBroker records the fault and kills the broker with SIGKILL.
func (e *Env) KillBroker() {
	e.Fault("SIGKILL broker")
	e.Broker.Kill()
}

// StopBroker stops the broker cleanly (SIGTERM), failing the test if it
// does not exit cleanly.
func (e *Env) StopBroker() {
	e.T.Helper()
	require.NoError(e.T, e.Broker.Stop(30*time.Second), "broker shutdown (log %s)", e.Broker.Log)
}

// Admin returns an admin client of the cluster (direct connections).
func (e *Env) Admin() *client.Admin {
	e.T.Helper()
	if e.admin == nil {
		a, err := client.NewAdmin(e.T.Context(), workload.ClientConfig([]string{e.NSAddr}, nil))
		require.NoError(e.T, err)
		e.admin = a
	}
	return e.admin
}

// CreateTopic creates e.Topic with queues queues and waits for its route.
func (e *Env) CreateTopic(queues int32) {
	e.T.Helper()
	a := e.Admin()
	require.NoError(e.T, a.CreateTopic(e.T.Context(), client.TopicConfig{Name: e.Topic, ReadQueueNums: queues, WriteQueueNums: queues}))
	require.Eventually(e.T, func() bool {
		rt, err := a.Route(e.T.Context(), e.Topic)
		return err == nil && len(rt.WriteQueues()) == int(queues)
	}, 30*time.Second, 20*time.Millisecond, "no route for the topic")
}

// WaitTopicSaved waits until the broker's topics.json names the topic:
// tests that kill the broker make sure of it first, so that they test
// what they mean to (the broker saves a topic before it answers its
// creation; see TestTopicSurvivesSIGKILL).
func (e *Env) WaitTopicSaved() {
	e.T.Helper()
	path := filepath.Join(e.Spec.Store, "config", "topics.json")
	require.Eventually(e.T, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), `"`+e.Topic+`"`)
	}, time.Minute, 50*time.Millisecond, "%s does not name topic %s", path, e.Topic)
}

// worker names the next incarnation of a worker: "p0.1", "p0.2", ...
func (e *Env) worker(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.workers[name]++
	return fmt.Sprintf("%s.%d", name, e.workers[name])
}

// Producer starts a producer worker process named after name (its ids
// are unique across incarnations); mod adjusts its spec.
func (e *Env) Producer(name string, mod func(*workload.ProducerSpec)) *Proc {
	e.T.Helper()
	w := e.worker(name)
	spec := workload.ProducerSpec{Worker: w, NameServers: []string{e.NSAddr}, Topic: e.Topic,
		History: filepath.Join(e.Dir, w+".jsonl"), Dial: e.Dial}
	if mod != nil {
		mod(&spec)
	}
	return e.startWorker(w, RoleProducer, spec, spec.History)
}

// Consumer starts a push-consumer worker process in group; mod adjusts
// its spec. It returns once the consumer has started.
func (e *Env) Consumer(name, group string, mod func(*workload.ConsumerSpec)) *Proc {
	e.T.Helper()
	w := e.worker(name)
	spec := workload.ConsumerSpec{Worker: w, NameServers: []string{e.NSAddr}, Topic: e.Topic, Group: group,
		History: filepath.Join(e.Dir, w+".jsonl"), Dial: e.Dial}
	if mod != nil {
		mod(&spec)
	}
	return e.startWorker(w, RoleConsumer, spec, spec.History)
}

func (e *Env) startWorker(name, role string, spec any, hist string) *Proc {
	e.T.Helper()
	p, err := startProc(name, role, spec, filepath.Join(e.Dir, name+".log"))
	require.NoError(e.T, err)
	e.track(p)
	e.mu.Lock()
	e.histories = append(e.histories, hist)
	e.mu.Unlock()
	require.NoError(e.T, p.WaitReady(time.Minute, nil))
	return p
}

// StopWorkers stops the given workers cleanly and waits for them.
func (e *Env) StopWorkers(ps ...*Proc) {
	e.T.Helper()
	for _, p := range ps {
		_ = p.Signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		require.NoError(e.T, p.Stop(time.Minute), "worker %s (log %s)", p.Name, p.Log)
	}
}

// Sleep waits a random duration in [lo, hi) drawn from the run's seed.
func (e *Env) Sleep(lo, hi time.Duration) {
	d := lo
	if hi > lo {
		d += time.Duration(e.Rand.Int64N(int64(hi - lo)))
	}
	time.Sleep(d)
}

// Drain reads every queue of the topic into drain.jsonl (directly, not
// through any proxy). The nameserver and broker must be up. An error (the
// topic has no route, a pull failed) is returned for the verdict: what was
// read so far is kept.
func (e *Env) Drain() (int, error) {
	e.T.Helper()
	path := filepath.Join(e.Dir, "drain.jsonl")
	w, err := history.Create(path)
	require.NoError(e.T, err)
	ctx, cancel := context.WithTimeout(e.T.Context(), 2*time.Minute)
	defer cancel()
	n, err := workload.Drain(ctx, workload.ClientConfig([]string{e.NSAddr}, nil), e.Topic, w)
	require.NoError(e.T, w.Close())
	e.mu.Lock()
	e.histories = append(e.histories, path)
	e.mu.Unlock()
	return n, err
}

// Verify runs the offline store verifier (gantry verify) on the broker's
// store, which must be stopped, and records the outcome in r: clean, or a
// harness failure naming the first problem.
func (e *Env) Verify(r *checker.Result) {
	e.T.Helper()
	require.True(e.T, e.Broker.Exited(), "verify needs the broker stopped")
	rep, err := verify.Run(e.T.Context(), fsx.OS, e.Spec.Store, verify.Options{})
	if err != nil {
		r.Fail("verify: %v", err)
		return
	}
	if !rep.Clean {
		r.Fail("verify: %d problems, first %v", rep.ErrorCount, rep.Errors[0])
		return
	}
	r.Add("verify", "clean")
}

// DrainAndCheck drains the topic and checks the run; a failed drain is a
// harness failure in the result.
func (e *Env) DrainAndCheck(opts checker.Options) *checker.Result {
	e.T.Helper()
	n, err := e.Drain()
	opts.Drained = true
	r := e.Check(opts)
	if err != nil {
		r.Fail("drain (after %d messages): %v", n, err)
	}
	return r
}

// Histories returns the paths of every history of the run so far.
func (e *Env) Histories() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.histories)
}

// Events reads every history of the run so far (for progress checks while
// it runs; a worker's torn last line is skipped).
func (e *Env) Events() []history.Event {
	var all []history.Event
	for _, p := range e.Histories() {
		evs, err := history.Read(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.T.Errorf("reading history: %v", err) // not Fatal: this may run inside require.Eventually
		}
		all = append(all, evs...)
	}
	return all
}

// WaitHandled waits, polling every poll for up to timeout, until every
// message acknowledged so far has been handled by a consumer; msg is the
// failure's message.
func (e *Env) WaitHandled(timeout, poll time.Duration, msg string) {
	e.T.Helper()
	acked := ackedIDs(e.Events())
	require.Eventually(e.T, func() bool { return handledAll(e.Events(), acked) }, timeout, poll, msg)
}

// ackedIDs returns the acknowledged ids.
func ackedIDs(evs []history.Event) map[string]bool {
	ids := map[string]bool{}
	for _, e := range evs {
		if e.Kind == history.Send && e.Outcome == history.OK {
			ids[e.ID] = true
		}
	}
	return ids
}

// handledAll reports whether every id in ids has a Recv event.
func handledAll(evs []history.Event, ids map[string]bool) bool {
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Kind == history.Recv && ids[e.ID] {
			seen[e.ID] = true
		}
	}
	return len(seen) == len(ids)
}

// WorkerEvents reads one worker's history.
func (e *Env) WorkerEvents(worker string) []history.Event {
	evs, err := history.Read(filepath.Join(e.Dir, worker+".jsonl"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.T.Errorf("reading history: %v", err)
	}
	return evs
}

// Record appends events to the run's own history (faults.jsonl).
func (e *Env) Record(evs ...history.Event) {
	e.T.Helper()
	require.NoError(e.T, e.faults.Append(evs...))
}

// Committed records the group's committed offset of every queue of the
// topic as Commit events, read now.
func (e *Env) Committed(group string) {
	e.T.Helper()
	pc, err := client.NewPullConsumer(e.T.Context(), workload.ClientConfig([]string{e.NSAddr}, nil), group)
	require.NoError(e.T, err)
	defer pc.Close(context.Background())
	qs, err := pc.Queues(e.T.Context(), e.Topic)
	require.NoError(e.T, err)
	var evs []history.Event
	for _, q := range qs {
		off, found, err := pc.CommittedOffset(e.T.Context(), q)
		require.NoError(e.T, err)
		if found {
			evs = append(evs, history.Event{Kind: history.Commit, Topic: e.Topic, Broker: q.BrokerName, Queue: q.ID,
				Offset: off, Note: group, Time: history.Now()})
		}
	}
	e.Record(evs...)
}

// Check reads every history of the run and checks it.
func (e *Env) Check(opts checker.Options) *checker.Result {
	e.T.Helper()
	if opts.Name == "" {
		opts.Name = e.Name
	}
	opts.Seed = e.Seed
	require.NoError(e.T, e.faults.Sync())
	e.mu.Lock()
	paths := slices.Clone(e.histories)
	e.mu.Unlock()
	r, err := checker.CheckFiles(opts, paths...)
	require.NoError(e.T, err)
	if len(e.startups) > 1 {
		r.Add("restarts", len(e.startups)-1)
		r.Add("maxStartup", slices.Max(e.startups[1:]).Round(time.Millisecond))
		if gap, ok := maxResume(e.Events()); ok {
			r.Add("maxFirstAckAfterRestart", gap.Round(time.Millisecond))
		}
	}
	return r
}

// Report prints r's verdict line (and its problems when it failed), counts
// it for the summary, and fails the test unless it passed.
func (e *Env) Report(r *checker.Result) {
	e.T.Helper()
	line := r.Verdict()
	fmt.Fprintln(os.Stdout, line)
	e.T.Log(line)
	countVerdict(r.Passed())
	if !r.Passed() {
		for _, p := range r.Problems {
			e.T.Log("  " + p)
		}
		e.T.Errorf("verdict: FAIL (%s)", e.Name)
	}
}

// maxResume returns, over the broker restarts of a run, the longest time
// from the broker serving again to the next acknowledgement: how long the
// clients took to find it again (an availability figure, not a verdict).
func maxResume(evs []history.Event) (time.Duration, bool) {
	var marks, acks []int64
	for _, ev := range evs {
		switch {
		case ev.Kind == history.Heal && ev.Note == "broker serving":
			marks = append(marks, ev.Time)
		case ev.Kind == history.Send && ev.Outcome == history.OK:
			acks = append(acks, ev.Time)
		}
	}
	slices.Sort(acks)
	var worst time.Duration
	found := false
	for _, m := range marks[min(1, len(marks)):] { // restarts, not the first start
		i, _ := slices.BinarySearch(acks, m)
		if i < len(acks) {
			worst, found = max(worst, time.Duration(acks[i]-m)), true
		}
	}
	return worst, found
}

// FreeAddr returns a loopback address with a free port, never handed out
// before in this process (freePort), for a test's own listeners.
func FreeAddr(t *testing.T) string { return freeAddr(t) }
