package broker

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
)

func (c Config) validateDelays(bad badFunc) {
	if c.TimerMaxDelay < 0 {
		bad("timerMaxDelay %s: want > 0", c.TimerMaxDelay)
	}
	if c.DLQRetention < 0 {
		bad("dlqRetentionHours %s: want > 0", c.DLQRetention)
	}
	if n := len(c.MessageDelayLevel); n > metadata.MaxQueueNums {
		bad("messageDelayLevel: %d levels, want 1..%d", n, metadata.MaxQueueNums)
		return
	}
	for i, d := range c.MessageDelayLevel {
		if d <= 0 {
			bad("messageDelayLevel: level %d is %s, want > 0", i+1, d)
		}
	}
}

// delayUnits are the units of messageDelayLevel, as in RocketMQ.
var delayUnits = map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}

// ParseDelayLevels parses a messageDelayLevel value: space-separated
// delays, each a positive count and a unit s, m, h or d ("1s 5s 10s 30s
// 1m"), level 1 first.
func ParseDelayLevels(v string) ([]time.Duration, error) {
	fields := strings.Fields(v)
	if len(fields) == 0 {
		return nil, errors.New("want at least one level, like 1s 5s 10s")
	}
	if len(fields) > metadata.MaxQueueNums {
		return nil, fmt.Errorf("%d levels, at most %d", len(fields), metadata.MaxQueueNums)
	}
	out := make([]time.Duration, len(fields))
	for i, f := range fields {
		unit, ok := delayUnits[f[len(f)-1]]
		n, err := strconv.ParseInt(f[:len(f)-1], 10, 64)
		if !ok || err != nil || n <= 0 || n > int64(math.MaxInt64/unit) {
			return nil, fmt.Errorf("level %d %q: want a positive count and a unit s, m, h or d (like 10s)", i+1, f)
		}
		out[i] = time.Duration(n) * unit
	}
	return out, nil
}
