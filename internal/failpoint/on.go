//go:build failpoint

package failpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Enabled is true: this binary was built with the failpoint tag.
const Enabled = true

// EnvVar names the environment variable read at start.
const EnvVar = "GANTRY_FAILPOINTS"

type point struct {
	term  Term
	hits  atomic.Int64
	fired atomic.Int64
}

var (
	mu     sync.Mutex                        // serializes Enable and Disable
	points atomic.Pointer[map[string]*point] // copy-on-write: Inject reads without a lock
	hits   sync.Map                          // name -> *atomic.Int64, every evaluation, armed or not
)

func init() {
	m := map[string]*point{}
	points.Store(&m)
	spec, err := ParseSpec(os.Getenv(EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", EnvVar, err)
		os.Exit(2)
	}
	for name, t := range spec {
		m[name] = &point{term: t}
	}
}

// Inject evaluates the point name: nil unless it is armed and fires.
func Inject(name string) error {
	counter(name).Add(1)
	p := (*points.Load())[name]
	if p == nil {
		return nil
	}
	n := p.hits.Add(1)
	if !p.term.due(n, p.fired.Load(), rand.IntN(100)) {
		return nil
	}
	if f := p.fired.Add(1); p.term.Times > 0 && f > p.term.Times {
		return nil // a concurrent evaluation took the last firing
	}
	return fire(name, p.term)
}

func fire(name string, t Term) error {
	switch t.Action {
	case Error:
		msg := t.Arg
		if msg == "" {
			msg = "at " + name
		}
		return fmt.Errorf("%w: %s", ErrInjected, msg)
	case Panic:
		panic(fmt.Sprintf("failpoint %s: %s", name, t.Arg))
	case Kill:
		fmt.Fprintf(os.Stderr, "failpoint %s: kill\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case Sleep:
		time.Sleep(t.Sleep)
	}
	return nil
}

func counter(name string) *atomic.Int64 {
	if c, ok := hits.Load(name); ok {
		return c.(*atomic.Int64)
	}
	c, _ := hits.LoadOrStore(name, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// Enable arms the point name with a term (see the package doc), replacing
// its setting and counts.
func Enable(name, term string) error {
	t, err := ParseTerm(term)
	if err != nil {
		return err
	}
	update(func(m map[string]*point) { m[name] = &point{term: t} })
	return nil
}

// Disable disarms the point name.
func Disable(name string) { update(func(m map[string]*point) { delete(m, name) }) }

func update(f func(map[string]*point)) {
	mu.Lock()
	defer mu.Unlock()
	old := *points.Load()
	m := make(map[string]*point, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	f(m)
	points.Store(&m)
}

// Hits returns how many times the point name was evaluated, armed or not.
func Hits(name string) int64 { return counter(name).Load() }
