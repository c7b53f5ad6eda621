// Package procs sets how many processors a process runs Go code on
// (GOMAXPROCS) by how busy it is: few while it is quiet, more while it is
// saturated.
//
// `gantry dev` shares its machine with the application and the tests that
// use it. A request answered at once costs less on fewer processors (the
// hand-overs between gRPC's goroutines then wake no idle CPU), but a
// broker kept to few processors under load leaves CPUs idle while its
// appenders wait for the disk. A Governor gives it both: Low processors
// until goroutines wait for one, High until the process has used well
// under Low CPUs for a while. Waiting, not CPU use, says Low is too few:
// a busy process on Low and one answering one request at a time can use
// about as much CPU, but only the busy one's goroutines wait for a
// processor. When the waits cannot be read, a process that fills Low
// counts as busy, so a busy process always reaches High. The figures:
// docs/decisions/0006-gomaxprocs-governor-for-gantry-dev.md.
package procs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/gantrymq/gantry/internal/tick"
)

// Config configures a Governor. The zero value of a field means its
// default.
type Config struct {
	// Low and High bound GOMAXPROCS; 1 <= Low < High. Required.
	Low, High int
	// Interval is how often the process's CPU use is looked at. Default
	// 50 ms.
	Interval time.Duration
	// Wait and WaitShare: with Low processors, UpAfter looks in a row that
	// find more than WaitShare of the goroutines made runnable since the
	// look before waited Wait or more for a processor switch to High.
	// Default 200 µs, 0.1 and 2 (a GC cycle is not load).
	Wait      time.Duration
	WaitShare float64
	UpAfter   int
	// Down: with High processors, DownAfter looks in a row that find the
	// process used less than Down × Low CPUs switch to Low. Default 0.6 and
	// 10 (half a second): below what a produce uses on Low, above what one
	// send at a time does.
	Down      float64
	DownAfter int
	// CPU returns the CPU time the process has used so far. Default: user
	// plus system time of getrusage(RUSAGE_SELF).
	CPU func() (time.Duration, error)
	// Waits returns how many times goroutines were made runnable so far,
	// and how many of those waited Wait or more for a processor. Default:
	// runtime/metrics' /sched/latencies:seconds.
	Waits func(wait time.Duration) (waited, all uint64)
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
	if c.Wait == 0 {
		c.Wait = 200 * time.Microsecond
	}
	if c.WaitShare == 0 {
		c.WaitShare = 0.1
	}
	if c.UpAfter == 0 {
		c.UpAfter = 2
	}
	if c.Down == 0 {
		c.Down = 0.6
	}
	if c.DownAfter == 0 {
		c.DownAfter = 10
	}
	if c.CPU == nil {
		c.CPU = processCPU
	}
	if c.Waits == nil {
		c.Waits = schedWaits
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
	if c.Wait < 0 || c.WaitShare <= 0 || c.WaitShare > 1 || c.Down <= 0 {
		errs = append(errs, fmt.Errorf("procs: want Wait >= 0, 0 < WaitShare <= 1 and Down > 0, got %v, %g and %g", c.Wait, c.WaitShare, c.Down))
	}
	if c.UpAfter < 0 || c.DownAfter < 0 {
		errs = append(errs, fmt.Errorf("procs: UpAfter and DownAfter must not be negative, got %d and %d", c.UpAfter, c.DownAfter))
	}
	return errors.Join(errs...)
}

// Governor switches GOMAXPROCS between Config.Low and Config.High. Start
// one with Start; Close stops it.
type Governor struct {
	cfg  Config
	stop context.CancelFunc
	done chan struct{}

	// The loop's state (only its goroutine uses it, and step in tests).
	procs  int           // what it last set
	streak int           // looks in a row past the threshold towards the other setting
	last   time.Duration // the process's CPU time at the last look
	lastAt time.Time     // and when
	// waited and woken are the counts of Config.Waits at the last look.
	waited, woken uint64
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
		tick.Every(ctx, g.cfg.Interval, g.step)
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
	g.waited, g.woken = g.cfg.Waits(g.cfg.Wait)
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
	waited, woken := g.cfg.Waits(g.cfg.Wait)
	dw, dn := waited-g.waited, woken-g.woken
	g.last, g.lastAt, g.waited, g.woken = cpu, now, waited, woken
	switch {
	case g.procs == g.cfg.Low && g.short(dw, dn, used):
		if g.streak++; g.streak >= g.cfg.UpAfter {
			g.switchTo(g.cfg.High, used)
		}
	case g.procs == g.cfg.High && used < g.cfg.Down*float64(g.cfg.Low):
		if g.streak++; g.streak >= g.cfg.DownAfter {
			g.switchTo(g.cfg.Low, used)
		}
	default:
		g.streak = 0
	}
}

// busyLow is the share of Low CPUs a look must find used to count towards
// High when the scheduler's waits cannot be read: a process that fills its
// processors then is never kept on Low.
const busyLow = 0.9

// short reports whether Low processors were too few in a look in which dw
// of the dn goroutines made runnable waited Wait or more and the process
// used `used` CPUs: more than WaitShare of them waited, or, where the
// waits cannot be read (none ever counted), the process filled Low. A look
// that counted no wake-up where the waits can be read is no sign of
// waiting: it does not count towards High.
func (g *Governor) short(dw, dn uint64, used float64) bool {
	if dn == 0 {
		return g.woken == 0 && used >= busyLow*float64(g.cfg.Low)
	}
	return float64(dw) > g.cfg.WaitShare*float64(dn)
}

func (g *Governor) switchTo(n int, used float64) {
	g.cfg.Logger.Debug("GOMAXPROCS", "from", g.procs, "to", n, "cpus-used", fmt.Sprintf("%.2f", used))
	g.procs, g.streak = n, 0
	g.cfg.Set(n)
}

// Close stops the governor and waits for its goroutine; GOMAXPROCS stays
// as it last set it.
func (g *Governor) Close() {
	g.stop()
	<-g.done
}

// schedWaits reads the runtime's histogram of how long goroutines made
// runnable waited for a processor: all of them, and those in buckets from
// wait up.
func schedWaits(wait time.Duration) (waited, all uint64) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := s[0].Value.Float64Histogram()
	for i, n := range h.Counts { // bucket i is [Buckets[i], Buckets[i+1])
		all += n
		if h.Buckets[i] >= wait.Seconds() {
			waited += n
		}
	}
	return waited, all
}

// processCPU is the user and system CPU time the process has used.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
