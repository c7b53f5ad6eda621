package failpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInjected is what the error action's errors wrap.
var ErrInjected = errors.New("failpoint: injected error")

// Action is what an armed point does when it fires.
type Action int

const (
	Off   Action = iota // nothing
	Error               // Inject returns an error wrapping ErrInjected
	Panic               // Inject panics
	Kill                // the process sends itself SIGKILL
	Sleep               // Inject sleeps Term.Sleep, then returns nil
)

var actionNames = [...]string{"off", "error", "panic", "kill", "sleep"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Term is one point's parsed setting: [P%][N*]action[(arg)][@K].
type Term struct {
	Action Action
	// Arg is the error text or panic value (error, panic).
	Arg string
	// Sleep is the sleep action's duration.
	Sleep time.Duration
	// From is the first evaluation (1-based) that may fire; 0 and 1 mean
	// the first.
	From int64
	// Times is the most times the point fires; 0 means no limit.
	Times int64
	// Percent is the probability of firing at an evaluation, 1..100; 0
	// means 100.
	Percent int
}

// ParseTerm parses one term, e.g. "1*kill@40", "sleep(2s)", "25%error(EIO)".
func ParseTerm(s string) (Term, error) {
	var t Term
	rest := strings.TrimSpace(s)
	if i := strings.LastIndexByte(rest, '@'); i >= 0 && i > strings.LastIndexByte(rest, ')') {
		k, err := strconv.ParseInt(rest[i+1:], 10, 64)
		if err != nil || k < 1 {
			return Term{}, fmt.Errorf("failpoint: term %q: @K wants a positive count", s)
		}
		t.From, rest = k, rest[:i]
	}
	if i := strings.IndexByte(rest, '%'); i >= 0 && !strings.Contains(rest[:i], "(") {
		p, err := strconv.Atoi(rest[:i])
		if err != nil || p < 1 || p > 100 {
			return Term{}, fmt.Errorf("failpoint: term %q: P%% wants 1..100", s)
		}
		t.Percent, rest = p, rest[i+1:]
	}
	if i := strings.IndexByte(rest, '*'); i >= 0 && !strings.Contains(rest[:i], "(") {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n < 1 {
			return Term{}, fmt.Errorf("failpoint: term %q: N* wants a positive count", s)
		}
		t.Times, rest = n, rest[i+1:]
	}
	name, arg, hasArg := rest, "", false
	if i := strings.IndexByte(rest, '('); i >= 0 {
		if !strings.HasSuffix(rest, ")") {
			return Term{}, fmt.Errorf("failpoint: term %q: unclosed argument", s)
		}
		name, arg, hasArg = rest[:i], rest[i+1:len(rest)-1], true
	}
	found := false
	for a, n := range actionNames {
		if n == name {
			t.Action, found = Action(a), true
		}
	}
	if !found {
		return Term{}, fmt.Errorf("failpoint: term %q: unknown action %q (want off, error, panic, kill or sleep)", s, name)
	}
	switch t.Action {
	case Sleep:
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return Term{}, fmt.Errorf("failpoint: term %q: sleep wants a duration, as sleep(500ms)", s)
		}
		t.Sleep = d
	case Error, Panic:
		t.Arg = arg
	default:
		if hasArg {
			return Term{}, fmt.Errorf("failpoint: term %q: %s takes no argument", s, t.Action)
		}
	}
	return t, nil
}

// String formats t in the syntax ParseTerm reads.
func (t Term) String() string {
	var b strings.Builder
	if t.Percent > 0 && t.Percent < 100 {
		fmt.Fprintf(&b, "%d%%", t.Percent)
	}
	if t.Times > 0 {
		fmt.Fprintf(&b, "%d*", t.Times)
	}
	b.WriteString(t.Action.String())
	switch {
	case t.Action == Sleep:
		fmt.Fprintf(&b, "(%s)", t.Sleep)
	case t.Arg != "":
		fmt.Fprintf(&b, "(%s)", t.Arg)
	}
	if t.From > 1 {
		fmt.Fprintf(&b, "@%d", t.From)
	}
	return b.String()
}

// ParseSpec parses a GANTRY_FAILPOINTS value: "name=term;name=term".
// Empty entries are ignored.
func ParseSpec(s string) (map[string]Term, error) {
	out := map[string]Term{}
	var errs []error
	for entry := range strings.SplitSeq(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, term, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			errs = append(errs, fmt.Errorf("failpoint: %q: want name=term", entry))
			continue
		}
		t, err := ParseTerm(term)
		if err != nil {
			errs = append(errs, fmt.Errorf("failpoint: %s: %w", name, err))
			continue
		}
		out[name] = t
	}
	return out, errors.Join(errs...)
}

// due reports whether the n-th evaluation (1-based) fires, given how many
// times the point already fired and a random percentile in [0, 100).
func (t Term) due(n, fired int64, percentile int) bool {
	if t.Action == Off || n < t.From {
		return false
	}
	if t.Times > 0 && fired >= t.Times {
		return false
	}
	return t.Percent == 0 || percentile < t.Percent
}
