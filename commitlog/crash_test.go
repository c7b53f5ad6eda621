package commitlog_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// crashStates is how many crash states each mode enumerates: 1,000 by
// default, GANTRY_CRASH_STATES (e.g. 10000, the long tier) when set.
func crashStates(t *testing.T) int { return testutil.EnvInt(t, "GANTRY_CRASH_STATES", 1000) }

// crashWorld is the reference the crash states are checked against.
type crashWorld struct {
	mu      sync.Mutex
	encoded [][]byte // record i as the workload encoded it
	at      map[int64]placed
	log     atomic.Pointer[commitlog.Log]
	enabled atomic.Bool // take states at hooks

	rng      *rand.Rand
	states   int
	target   int
	failures []string
	cfg      commitlog.Config
}

type placed struct {
	idx int
	ts  int64
}

// TestCrashStates runs a workload of appends, flushes, segment rolls,
// checkpoints and retention on the in-memory filesystem and, before every
// filesystem operation, takes the state a power cut would leave (durable
// data only, and durable data plus a random prefix of what was not yet
// synced). Every state must open; every record acknowledged as flushed at
// that moment must come back byte-identical; nothing that was never written
// may come back; an unflushed record may survive intact or vanish with
// everything after it.
func TestCrashStates(t *testing.T) {
	for _, tt := range []struct {
		name      string
		flush     commitlog.FlushMode
		write     commitlog.WriteMode
		directMin int // WriteBuffered: smallest flush written directly and padded; 0 for none
	}{
		{"sync-buffered", commitlog.SyncFlush, commitlog.WriteBuffered, 0},
		{"sync-buffered-direct", commitlog.SyncFlush, commitlog.WriteBuffered, 1},
		{"async-buffered", commitlog.AsyncFlush, commitlog.WriteBuffered, 0},
		{"async-buffered-direct", commitlog.AsyncFlush, commitlog.WriteBuffered, 1},
		{"async-mapped", commitlog.AsyncFlush, commitlog.WriteMapped, 0},
		{"async-direct", commitlog.AsyncFlush, commitlog.WriteDirect, 0},
		{"async-hybrid", commitlog.AsyncFlush, commitlog.WriteHybrid, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.directMin > 0 {
				commitlog.SetDirectMinBytes(t, tt.directMin)
			}
			w := runCrashWorkload(t, tt.flush, tt.write, tt.directMin > 0, crashStates(t))
			t.Logf("%s: %d crash states checked, %d records appended", tt.name, w.states, len(w.at))
			assert.Empty(t, w.failures)
			assert.GreaterOrEqual(t, w.states, w.target)
			if tt.directMin > 0 {
				assert.Positive(t, w.log.Load().Stats().DirectWrites, "flushes written directly")
			}
		})
	}
}

func runCrashWorkload(t *testing.T, flush commitlog.FlushMode, write commitlog.WriteMode, directWrites bool, target int) *crashWorld {
	mem := fsx.NewMemFS()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	allHours := make([]string, 24)
	for h := range allHours {
		allHours[h] = strconv.Itoa(h)
	}
	w := &crashWorld{
		at:     map[int64]placed{},
		rng:    rand.New(rand.NewPCG(1, uint64(flush)*7+uint64(write))),
		target: target,
		cfg: commitlog.Config{
			FS: mem, Dir: "/store/commitlog", StateDir: "/store", SegmentBytes: 8 << 10,
			FlushMode: flush, FlushInterval: time.Hour, CheckpointInterval: time.Hour,
			SyncFlushTimeout: time.Minute, CleanInterval: -1, FileReservedTime: 30 * time.Second,
			DeleteWhen: strings.Join(allHours, ";"),
			Now:        func() time.Time { return time.UnixMilli(clock.Load()).UTC() },
			Logger:     testLogger(t),
		}.Mode(write),
	}
	switch {
	case write == commitlog.WriteHybrid || write == commitlog.WriteBuffered && flush == commitlog.AsyncFlush && !directWrites:
		// Batches of one to four records: both paths (WriteBuffered under
		// AsyncFlush copies small writes into the mapping).
		w.cfg.DirectBytes = 1500
	case write == commitlog.WriteBuffered && flush == commitlog.AsyncFlush:
		w.cfg.PrefaultAhead = -1 // no write through the mapping: direct wherever a flush is aligned
	}
	// Its file operations are crash points on any goroutine; with a mode
	// that copies into the mapping, only the test goroutine's steps are
	// (a crash state read on another would race with the copy).
	buffered := write == commitlog.WriteDirect || write == commitlog.WriteBuffered && flush == commitlog.SyncFlush
	mem.SetHook(func(fsx.Op, string) {
		if buffered || w.enabled.Load() {
			w.takeStates(t, mem)
		}
	})
	w.enabled.Store(true)
	l, err := commitlog.Open(t.Context(), w.cfg)
	require.NoError(t, err)
	l.SettleAlloc()
	w.log.Store(l)
	w.enabled.Store(false)

	rng := rand.New(rand.NewPCG(42, 7))
	next := 0
	during := func(f func() error) { // a step of the test goroutine whose filesystem operations are crash points
		w.enabled.Store(true)
		require.NoError(t, f())
		w.enabled.Store(false)
	}
	for step := 0; w.count() < target && step < 20*target; step++ {
		switch p := rng.IntN(100); {
		case p < 70:
			n := 1 + rng.IntN(4)
			var batch []byte
			w.mu.Lock()
			first := next
			for range n {
				rec := record(t, next, 50+rng.IntN(650))
				w.encoded = append(w.encoded, rec)
				batch = append(batch, rec...)
				next++
			}
			w.mu.Unlock()
			i := first
			_, err := l.Append(t.Context(), batch, func(rec []byte, off int64) {
				w.mu.Lock()
				w.at[off] = placed{idx: i, ts: message.StoreTimestampOf(rec)}
				w.mu.Unlock()
				i++
			})
			require.NoError(t, err)
			clock.Add(100)
		case p < 80:
			during(l.Flush)
		case p < 88:
			during(l.CheckpointNow)
		default:
			clock.Add(10_000)
			during(func() error { _, err := l.Clean(); return err })
		}
		l.SettleAlloc()
		if !buffered { // between steps: unflushed appends may survive or not
			w.takeStates(t, mem)
		}
	}
	require.NoError(t, l.Close())
	w.takeStates(t, mem)
	return w
}

func (w *crashWorld) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.states
}

// takeStates checks two crash states of mem as it is now.
func (w *crashWorld) takeStates(t *testing.T, mem *fsx.MemFS) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.states >= w.target || len(w.failures) > 10 {
		return
	}
	var flushed, minOff int64
	if l := w.log.Load(); l != nil {
		flushed, minOff = l.FlushedOffset(), l.MinOffset()
	}
	for _, r := range []*rand.Rand{nil, w.rng} {
		w.states++
		if err := w.check(t, mem.Crash(r), flushed, minOff); err != nil {
			w.failures = append(w.failures, fmt.Sprintf("state %d (flushed %d, min %d): %v", w.states, flushed, minOff, err))
		}
	}
}

// check opens a crash state and compares it with the reference. w.mu is held.
func (w *crashWorld) check(t *testing.T, fs *fsx.MemFS, flushed, minOff int64) error {
	cfg := w.cfg
	cfg.FS = fs
	l, err := commitlog.Open(t.Context(), cfg)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer l.Close()
	if l.MinOffset() > minOff {
		return fmt.Errorf("recovered log starts at %d, after the %d the log still had", l.MinOffset(), minOff)
	}
	seen := map[int64]bool{}
	for off := l.MinOffset(); ; {
		r, next, err := l.ReadRecord(off)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			break
		}
		if err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		start := next - int64(len(r.B))
		p, ok := w.at[start]
		var want []byte
		if ok {
			want = bytes.Clone(w.encoded[p.idx])
			message.SetPhysicalOffset(want, start)
			message.SetStoreTimestamp(want, p.ts)
			_ = message.SealCRC(want)
		}
		same := ok && bytes.Equal(want, r.B)
		r.Release()
		if !same {
			return fmt.Errorf("record at %d was never written there (known: %v)", start, ok)
		}
		seen[start] = true
		off = next
	}
	for off, p := range w.at {
		if off >= l.MinOffset() && off+int64(len(w.encoded[p.idx])) <= flushed && !seen[off] {
			return fmt.Errorf("record %d at %d was flushed (flushed offset %d) but is gone; recovered [%d, %d)",
				p.idx, off, flushed, l.MinOffset(), l.MaxOffset())
		}
	}
	return nil
}
