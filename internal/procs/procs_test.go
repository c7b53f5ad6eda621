package procs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fake is a process whose CPU use the test sets look by look.
type fake struct {
	cpu  time.Duration
	now  time.Time
	sets []int
}

func (f *fake) config() Config {
	return Config{Low: 1, High: 2, Interval: 50 * time.Millisecond, DownAfter: 3,
		CPU: func() (time.Duration, error) { return f.cpu, nil },
		Now: func() time.Time { return f.now },
		Set: func(n int) { f.sets = append(f.sets, n) }}
}

// look advances the clock one interval during which the process used
// cpus CPUs on average, and has g look.
func (f *fake) look(g *Governor, cpus float64) int {
	const d = 50 * time.Millisecond
	f.now = f.now.Add(d)
	f.cpu += time.Duration(cpus * float64(d))
	g.step()
	return g.procs
}

func TestGovernorSwitches(t *testing.T) {
	f := &fake{now: time.Unix(1, 0)}
	g, err := newGovernor(f.config())
	require.NoError(t, err)
	assert.Equal(t, []int{1}, f.sets, "starts at Low")

	for _, tt := range []struct {
		name string
		cpus float64
		want int
	}{
		{"quiet", 0.3, 1},
		{"busy, under Up", 0.8, 1},
		{"saturated", 0.95, 2},
		{"still busy on two", 1.6, 2},
		{"quiet once", 0.2, 2},
		{"quiet twice", 0.2, 2},
		{"busy again: the count starts over", 0.7, 2},
		{"quiet 1", 0.2, 2},
		{"quiet 2", 0.2, 2},
		{"quiet 3: DownAfter", 0.2, 1},
		{"quiet on one", 0.2, 1},
	} {
		assert.Equal(t, tt.want, f.look(g, tt.cpus), tt.name)
	}
	assert.Equal(t, []int{1, 2, 1}, f.sets, "set only on a switch")
}

// A late look measures over the time that passed, not over Interval.
func TestGovernorLateLook(t *testing.T) {
	f := &fake{now: time.Unix(1, 0)}
	g, err := newGovernor(f.config())
	require.NoError(t, err)
	f.now = f.now.Add(500 * time.Millisecond)
	f.cpu += 200 * time.Millisecond // 0.4 CPUs over the half second
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
		{Config{Low: 1, High: 2, Up: 0.4, Down: 0.5}, "want 0 < Down < Up"},
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
	g, err := Start(Config{Low: 1, High: 2, Interval: time.Millisecond, Up: 1e-9, Down: 1e-10,
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
