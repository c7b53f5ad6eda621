package procs

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fake is a process whose CPU use and scheduling waits the test sets
// look by look.
type fake struct {
	cpu           time.Duration
	now           time.Time
	waited, woken uint64
	sets          []int
}

func (f *fake) config() Config {
	return Config{Low: 1, High: 2, Interval: 50 * time.Millisecond, DownAfter: 3,
		CPU:   func() (time.Duration, error) { return f.cpu, nil },
		Waits: func(time.Duration) (uint64, uint64) { return f.waited, f.woken },
		Now:   func() time.Time { return f.now },
		Set:   func(n int) { f.sets = append(f.sets, n) }}
}

// look advances the clock one interval during which the process used
// cpus CPUs on average and waitPct of 100 goroutines made runnable waited
// long, and has g look.
func (f *fake) look(g *Governor, cpus float64, waitPct uint64) int {
	const d = 50 * time.Millisecond
	f.now = f.now.Add(d)
	f.cpu += time.Duration(cpus * float64(d))
	f.waited, f.woken = f.waited+waitPct, f.woken+100
	g.step()
	return g.procs
}

func TestGovernorSwitches(t *testing.T) {
	f := &fake{now: time.Unix(1, 0)}
	g, err := newGovernor(f.config())
	require.NoError(t, err)
	assert.Equal(t, []int{1}, f.sets, "starts at Low")

	for _, tt := range []struct {
		name    string
		cpus    float64
		waitPct uint64
		want    int
	}{
		{"quiet", 0.3, 0, 1},
		{"busy, no one waits", 0.9, 5, 1},
		{"goroutines wait once", 0.7, 50, 1},
		{"and not again: the count starts over", 0.7, 0, 1},
		{"they wait", 0.6, 30, 1},
		{"twice: UpAfter", 0.6, 30, 2},
		{"busy on two", 1.6, 0, 2},
		{"one send at a time on two", 0.5, 0, 2},
		{"quiet twice", 0.5, 0, 2},
		{"busy again: the count starts over", 0.7, 0, 2},
		{"quiet 1", 0.5, 0, 2},
		{"quiet 2", 0.5, 0, 2},
		{"quiet 3: DownAfter", 0.5, 0, 1},
		{"one send at a time on one", 0.4, 0, 1},
	} {
		assert.Equal(t, tt.want, f.look(g, tt.cpus, tt.waitPct), tt.name)
	}
	assert.Equal(t, []int{1, 2, 1}, f.sets, "set only on a switch")
}

// A late look measures over the time that passed, not over Interval:
// 200 ms of CPU over half a second is 0.4 CPUs, under Down (over one
// Interval it would be 4).
func TestGovernorLateLook(t *testing.T) {
	f := &fake{now: time.Unix(1, 0)}
	cfg := f.config()
	cfg.DownAfter = 1
	g, err := newGovernor(cfg)
	require.NoError(t, err)
	for g.procs == 1 { // up, goroutines waiting
		f.look(g, 0.9, 50)
	}
	f.now = f.now.Add(500 * time.Millisecond)
	f.cpu += 200 * time.Millisecond
	g.step()
	assert.Equal(t, 1, g.procs)
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Low: 1, High: 2}, ""},
		{Config{Low: 0, High: 2}, "want 1 <= Low < High"},
		{Config{Low: 2, High: 2}, "want 1 <= Low < High"},
		{Config{Low: 1, High: 2, WaitShare: 2}, "0 < WaitShare <= 1"},
		{Config{Low: 1, High: 2, UpAfter: -1}, "must not be negative"},
		{Config{Low: 1, High: 2, Interval: -time.Second}, "Interval must not be negative"},
	} {
		err := tt.cfg.Validate()
		if tt.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorContains(t, err, tt.want)
	}
}

// Start sets Low, runs until Close, and switches the real GOMAXPROCS.
func TestStartClose(t *testing.T) {
	var sets []int
	done := make(chan struct{})
	g, err := Start(Config{Low: 1, High: 2, Interval: time.Millisecond, Wait: 1, WaitShare: 1e-9, Down: 1e-10,
		Set: func(n int) {
			sets = append(sets, n)
			if len(sets) == 2 {
				close(done)
			}
		}})
	require.NoError(t, err)
	for busy := time.Now(); ; { // use CPU until it switches up
		select {
		case <-done:
			g.Close()
			assert.Equal(t, []int{1, 2}, sets)
			return
		default:
		}
		if time.Since(busy) > 10*time.Second {
			t.Fatal("no switch to High while busy")
		}
	}
}

// The rule the governor keeps on any machine: a busy process (every
// processor it has used, goroutines waiting for one) reaches High within
// UpAfter looks and stays there while it is busy; a quiet one goes back
// to Low; nothing else is ever set. Low and High are what gantry dev
// passes: half the CPUs (at least one) and all of them.
func TestGovernorNeverHoldsABusyProcessBelowItsCPUs(t *testing.T) {
	for _, cpus := range []int{2, 3, 4, 8, 16, 64, 256} {
		for _, waitsReadable := range []bool{true, false} {
			low, high := max(1, cpus/2), cpus
			f := &fake{now: time.Unix(1, 0)}
			cfg := f.config()
			cfg.Low, cfg.High, cfg.DownAfter = low, high, 10
			if !waitsReadable { // runtime/metrics without the histogram
				cfg.Waits = func(time.Duration) (uint64, uint64) { return 0, 0 }
			}
			g, err := newGovernor(cfg)
			require.NoError(t, err)
			name := func(what string) string {
				return fmt.Sprintf("%d CPUs, waits readable %v: %s", cpus, waitsReadable, what)
			}

			for range 2 { // UpAfter
				f.look(g, float64(low), 40)
			}
			assert.Equal(t, high, g.procs, name("busy on Low: switched to every CPU"))
			for range 100 { // busy on High, whether or not goroutines wait
				f.look(g, float64(low), 0)
				f.look(g, float64(high), 50)
			}
			assert.Equal(t, high, g.procs, name("busy on High: stays"))
			for range 10 {
				f.look(g, 0.1*float64(low), 0)
			}
			assert.Equal(t, low, g.procs, name("quiet: back to Low"))
			for _, n := range f.sets {
				assert.Contains(t, []int{low, high}, n, name("only Low or High is set"))
			}
		}
	}
}

// One send at a time on Low (a third of a CPU, no goroutine waiting)
// stays there, whether or not the waits can be read.
func TestGovernorKeepsALightLoadOnLow(t *testing.T) {
	for _, waitsReadable := range []bool{true, false} {
		f := &fake{now: time.Unix(1, 0)}
		cfg := f.config()
		if !waitsReadable {
			cfg.Waits = func(time.Duration) (uint64, uint64) { return 0, 0 }
		}
		g, err := newGovernor(cfg)
		require.NoError(t, err)
		for range 50 {
			f.look(g, 0.4, 0)
		}
		assert.Equal(t, 1, g.procs, "waits readable %v", waitsReadable)
	}
}

// Where the scheduler's waits can be read, a look that counted no
// wake-up is no sign of waiting, however much CPU the process used: it
// does not count towards High. Where they cannot be read, a process that
// fills Low does.
func TestGovernorLookWithoutWakeUps(t *testing.T) {
	for _, tt := range []struct {
		name          string
		waitsReadable bool
		want          int
	}{
		{"waits readable: stays on Low", true, 1},
		{"waits unreadable: busy on Low switches", false, 2},
	} {
		f := &fake{now: time.Unix(1, 0), woken: 100}
		cfg := f.config()
		if !tt.waitsReadable {
			f.woken = 0
		}
		g, err := newGovernor(cfg)
		require.NoError(t, err)
		for range 10 { // a full CPU on Low, no goroutine made runnable counted
			f.now = f.now.Add(50 * time.Millisecond)
			f.cpu += 50 * time.Millisecond
			g.step()
		}
		assert.Equal(t, tt.want, g.procs, tt.name)
	}
}
