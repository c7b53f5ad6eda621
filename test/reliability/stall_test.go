package reliability

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// A full disk with the dispatcher stalled: the store lives on a
// 640 MiB tmpfs with the broker's default queue files and an index of
// 30,000,000 slots (520 MB files, which reserve their 120 MB slot table at
// creation: index files are sparse), forced cleaning on
// (diskSpaceCleanForciblyRatio 85, disk full at 90), 256 KiB segments (a
// producer slowed by a busy machine still seals several before sends are
// refused). A ballast leaves the disk 86 % used before the broker starts: above the
// forced-cleaning ratio, and too little room for the index's file, so the
// dispatcher stops at the first record. A producer sends, one message in
// ten with delay level 1.
//
// Pass: sends are acknowledged only for the stall's bound, then refused
// with a definite "dispatch stalled"; /readyz is not ready and names the
// stall; forced cleaning deletes no segment (the log's min offset stays 0
// with several sealed segments); a SIGKILL and restart in that state
// starts, still stalled; once the ballast is deleted the dispatcher
// resumes by itself, /readyz is ready and sends succeed again; every
// acknowledged message, delayed ones included, is readable at the end, once
// (lost = duplicated = 0, and the rest of the usual counts); gantry verify
// is clean.
func TestDiskFullDispatchStall(t *testing.T) {
	const size = 640 << 20
	mnt := MountTmpfs(t, size)
	e := NewEnv(t, "disk-full-dispatch-stall")
	e.Spec.Store = filepath.Join(mnt, "store")
	e.Spec.SegmentBytes = 256 << 10
	e.Spec.StoreDefaults = true
	e.Spec.IndexSlots = 30_000_000 // 114 MiB reserved at creation; 89.6 MiB free
	e.Spec.DiskFullRatio, e.Spec.DiskForceCleanRatio = 0.90, 0.85
	e.Spec.CleanInterval = 200 * time.Millisecond

	free, err := FreeBytes(mnt)
	require.NoError(t, err)
	ballast := filepath.Join(mnt, "ballast")
	require.NoError(t, Ballast(ballast, free-size*14/100))
	e.Fault(fmt.Sprintf("ballast: %d MiB of %d MiB free left, less than an index file", size*14/100>>20, free>>20))
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	e.WaitTopicSaved()
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Concurrency = 16; s.DelayEvery = 10 })

	// Full: acknowledged for the stall's bound, then refused.
	require.Eventually(t, func() bool { return countStalled(e.Events()) >= 50 || e.Broker.Exited() },
		2*time.Minute, 100*time.Millisecond, "sends were never refused for the stalled dispatcher")
	require.False(t, e.Broker.Exited(), "the broker died (log %s)", e.Broker.Log)
	ackedFull := len(ackedIDs(e.Events()))
	code, body := httpGet(t, e.Ready.HTTP, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "dispatch stalled")
	// Forced cleaning (every 200 ms, the disk above 85 %) had sealed
	// segments to delete and wanted to (the broker logs that it holds one
	// back): it deleted none.
	var segs int
	require.Eventually(t, func() bool {
		names, err := os.ReadDir(filepath.Join(e.Spec.Store, "commitlog"))
		text, lerr := os.ReadFile(e.Broker.Log)
		segs = len(names)
		return err == nil && lerr == nil && strings.Contains(string(text), "holds records not yet dispatched")
	}, time.Minute, 100*time.Millisecond, "forced cleaning wanted to delete")
	require.GreaterOrEqual(t, segs, 3, "sealed segments forced cleaning could have deleted")
	_, metrics := httpGet(t, e.Ready.HTTP, "/metrics")
	require.Equal(t, "0", metric(t, metrics, "gantry_commitlog_min_offset_bytes"), "forced cleaning deleted nothing")
	require.Equal(t, "2", metric(t, metrics, "gantry_store_dispatch_stalled"))

	// A restart in that state starts, still stalled.
	e.KillBroker()
	e.StartBroker()
	code, body = httpGet(t, e.Ready.HTTP, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "dispatch stalled")

	// Space comes back: the dispatcher resumes by itself.
	require.NoError(t, os.Remove(ballast))
	freed := history.Now()
	e.Record(history.Event{Kind: history.Mark, Note: "ballast deleted", Time: freed})
	var resumed time.Duration
	require.Eventually(t, func() bool {
		code, _ := httpGet(t, e.Ready.HTTP, "/readyz")
		if code == http.StatusOK && resumed == 0 {
			resumed = time.Duration(history.Now() - freed)
		}
		return code == http.StatusOK && nthAfter(e.Events(), history.Send, history.OK, freed, 200) > 0
	}, 3*time.Minute, 200*time.Millisecond, "not ready, or sends not acknowledged, after the space came back")
	e.StopWorkers(prod)

	// The delayed messages come due (level 1: 1 s) and are delivered.
	acked := len(ackedIDs(e.Events()))
	require.Eventually(t, func() bool {
		n, _, err := readAll(e)
		return err == nil && n >= acked
	}, 2*time.Minute, time.Second, "acknowledged messages not readable")
	r := e.DrainAndCheck(checker.Options{MinAcked: 200})
	r.Add("ackedWhileFull", ackedFull)
	r.Add("refusedStalled", countStalled(e.Events()))
	r.Add("diskFullErrors", countDiskFull(e.Events()))
	r.Add("readyWithin", resumed.Round(100*time.Millisecond))
	if resumed > resumeBound {
		r.Fail("ready %s after the space came back (limit %s)", resumed.Round(100*time.Millisecond), resumeBound)
	}
	e.StopBroker()
	e.Verify(r)
	e.Report(r)
}

// countStalled counts the definite send failures that say the dispatcher
// is stalled.
func countStalled(evs []history.Event) int { return countRefused(evs, "dispatch stalled") }

// httpGet fetches a path of the broker's HTTP server.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metric returns a metric's value in a /metrics page.
func metric(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(page)
	require.Len(t, m, 2, "metric %s not found", name)
	return m[1]
}
