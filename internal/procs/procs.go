// Package procs sets how many processors a process runs Go code on
// (GOMAXPROCS) by how busy it is: few while it is quiet, more while it is
// saturated.
//
// `gantry dev` shares its machine with the application and the tests that
// use it. A request answered at once costs less on one processor than on
// two (the hand-overs between gRPC's goroutines then wake no idle CPU: one
// send at a time waited 1-2.5 µs less at the median, 15-20 µs less at the
// p99 here), but a broker kept to one processor under load leaves the
// second CPU idle while its appenders wait for the disk (a produce of a
// million messages ran 5-15 % slower, a consume 11-15 %; docs/BENCHMARKS.md,
// twenty-third session). A Governor gives it both: Low processors until
// the process uses nearly all of them, High until it has used well under
// Low for a while.
package procs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"syscall"
	"time"
)

// Config configures a Governor. The zero value of a field means its
// default.
type Config struct {
	// Low and High bound GOMAXPROCS; 1 <= Low < High. Required.
	Low, High int
	// Interval is how often the process's CPU use is looked at. Default
	// 50 ms.
	Interval time.Duration
	// Up: with Low processors, a look that finds the process used more than
	// Up × Low CPUs since the last one switches to High. Default 0.85.
	Up float64
	// Down: with High processors, DownAfter looks in a row that find it
	// used less than Down × Low CPUs switch to Low. Default 0.5 and 10
	// (half a second).
	Down      float64
	DownAfter int
	// CPU returns the CPU time the process has used so far. Default: user
	// plus system time of getrusage(RUSAGE_SELF).
	CPU func() (time.Duration, error)
	// Set sets GOMAXPROCS. Default runtime.GOMAXPROCS.
	Set func(n int)
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the switches at debug level. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = 50 * time.Millisecond
	}
	if c.Up == 0 {
		c.Up = 0.85
	}
	if c.Down == 0 {
		c.Down = 0.5
	}
	if c.DownAfter == 0 {
		c.DownAfter = 10
	}
	if c.CPU == nil {
		c.CPU = processCPU
	}
	if c.Set == nil {
		c.Set = func(n int) { runtime.GOMAXPROCS(n) }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every problem of c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Low < 1 || c.High <= c.Low {
		errs = append(errs, fmt.Errorf("procs: want 1 <= Low < High, got Low %d, High %d", c.Low, c.High))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("procs: Interval must not be negative, got %v", c.Interval))
	}
	if c.Up <= 0 || c.Down <= 0 || c.Down >= c.Up {
		errs = append(errs, fmt.Errorf("procs: want 0 < Down < Up, got Down %g, Up %g", c.Down, c.Up))
	}
	if c.DownAfter < 0 {
		errs = append(errs, fmt.Errorf("procs: DownAfter must not be negative, got %d", c.DownAfter))
	}
	return errors.Join(errs...)
}

// Governor switches GOMAXPROCS between Config.Low and Config.High. Start
// one with Start; Close stops it.
type Governor struct {
	cfg  Config
	stop context.CancelFunc
	done chan struct{}

	// The loop's state (only its goroutine uses it, and Step in tests).
	procs  int           // what it last set
	quiet  int           // looks in a row under Down
	last   time.Duration // the process's CPU time at the last look
	lastAt time.Time     // and when
}

// Start sets GOMAXPROCS to cfg.Low and starts the governor's goroutine.
func Start(cfg Config) (*Governor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g, err := newGovernor(cfg)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	g.stop = stop
	go func() {
		defer close(g.done)
		t := time.NewTicker(g.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				g.step()
			}
		}
	}()
	return g, nil
}

func newGovernor(cfg Config) (*Governor, error) {
	g := &Governor{cfg: cfg.withDefaults(), done: make(chan struct{})}
	cpu, err := g.cfg.CPU()
	if err != nil {
		return nil, fmt.Errorf("procs: read the process's CPU time: %w", err)
	}
	g.last, g.lastAt, g.procs = cpu, g.cfg.Now(), g.cfg.Low
	g.cfg.Set(g.procs)
	return g, nil
}

// step looks at the CPU the process used since the last look and
// switches when the thresholds say so.
func (g *Governor) step() {
	cpu, err := g.cfg.CPU()
	now := g.cfg.Now()
	wall := now.Sub(g.lastAt)
	if err != nil || wall <= 0 {
		return // looked at again next time
	}
	used := float64(cpu-g.last) / float64(wall) // CPUs busy on average
	g.last, g.lastAt = cpu, now
	low := float64(g.cfg.Low)
	switch {
	case g.procs == g.cfg.Low && used > g.cfg.Up*low:
		g.switchTo(g.cfg.High, used)
	case g.procs == g.cfg.High && used < g.cfg.Down*low:
		if g.quiet++; g.quiet >= g.cfg.DownAfter {
			g.switchTo(g.cfg.Low, used)
		}
	default:
		g.quiet = 0
	}
}

func (g *Governor) switchTo(n int, used float64) {
	g.cfg.Logger.Debug("GOMAXPROCS", "from", g.procs, "to", n, "cpus-used", fmt.Sprintf("%.2f", used))
	g.procs, g.quiet = n, 0
	g.cfg.Set(n)
}

// Close stops the governor and waits for its goroutine; GOMAXPROCS stays
// as it last set it.
func (g *Governor) Close() {
	g.stop()
	<-g.done
}

// processCPU is the user and system CPU time the process has used.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
