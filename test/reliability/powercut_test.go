package reliability

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantrymq/gantry/internal/powercut"
	"github.com/gantrymq/gantry/test/reliability/checker"
)

// MountPowerCut mounts a power-cut file system (internal/powercut) for a
// broker's store and returns it and its mount point; it is unmounted when
// the test ends (after the processes a later NewEnv starts are killed).
// The test is skipped, with the reason, when the process is not root or
// FUSE cannot be mounted.
func MountPowerCut(t *testing.T) (*powercut.FS, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: power cuts are simulated with a FUSE file system, which needs root to mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipped: power cuts are simulated with a FUSE file system: %v", err)
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "store")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Skipf("skipped: cannot mount a FUSE file system on %s: %v", mnt, err)
	}
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return fsys, mnt
}

// Async flush under power cuts (RELIABILITY.md §4): the broker's store is
// on a power-cut file system; the broker is SIGKILLed and every file's
// data not yet fsynced or msynced is reverted to what was last synced, as
// a machine losing power would find its disk, and the broker is
// restarted on it, *cycles* times while two producers send. ASYNC_FLUSH
// acknowledges before the flush, so it may lose acknowledged messages,
// but only a per-queue suffix acknowledged within the flush interval
// (500 ms) plus slack (1 s) before the cut (checker.Options.LossAllowance);
// everything else the contract forbids is 0 and the store verifies clean.
// Figures: maxLossAge (the oldest lost ack's age at the cut),
// lostAllowed, and what the cuts reverted.
func TestAsyncFlushPowerCut(t *testing.T) {
	const flushInterval = 500 * time.Millisecond
	runPowerCuts(t, "async-flush-power-cut", "ASYNC_FLUSH", flushInterval, flushInterval+time.Second)
}

// Sync flush under the same power cuts: an acknowledged message was
// synced before its ack, so nothing acknowledged may be lost (lost = 0,
// no allowance).
func TestSyncFlushPowerCut(t *testing.T) {
	runPowerCuts(t, "sync-flush-power-cut", "SYNC_FLUSH", 0, 0)
}

func runPowerCuts(t *testing.T, name, flush string, flushInterval, allowance time.Duration) {
	fsys, store := MountPowerCut(t)
	e := NewEnv(t, name)
	e.Spec.Store = store
	e.Spec.Flush = flush
	e.Spec.FlushInterval = flushInterval
	loop := faultLoop{cycles: Pick(4, 50), maxGap: 1500 * time.Millisecond,
		opts: checker.Options{MinAcked: 200, LossAllowance: allowance}}
	loop.fault = func([]*Proc, func(string) *Proc) {
		e.Fault("power cut: SIGKILL broker, unsynced data reverted")
		e.Broker.Kill()
		if _, err := fsys.PowerCut(); err != nil {
			t.Fatalf("power cut: %v", err)
		}
	}
	r := loop.run(e)
	s := fsys.Totals()
	r.Add("cuts", s.Cuts)
	r.Add("filesReverted", s.Files)
	r.Add("pagesReverted", s.PagesLost)
	r.Add("bytesCutOff", s.BytesDropped)
	e.Report(r)
}
