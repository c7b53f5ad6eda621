package broker

import (
	"net"
	"strconv"
	"time"
)

// The replication keys (docs/REPLICATION.md, "Running a master and
// slaves"), RocketMQ's names.
func init() {
	for k, f := range map[string]func(c *Config, v string) error{
		"haListenPort":      func(c *Config, v string) error { return parseInt(v, &c.HAListenPort) },
		"haMasterAddress":   func(c *Config, v string) error { c.HAMasterAddress = v; return nil },
		"inSyncReplicas":    func(c *Config, v string) error { return parseInt(v, &c.InSyncReplicas) },
		"slaveTimeout":      func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.SlaveTimeout) },
		"haMaxGapNotInSync": func(c *Config, v string) error { return parseInt(v, &c.HAMaxGapNotInSync) },
		"slaveReadEnable":   func(c *Config, v string) error { return parseBool(v, &c.SlaveReadEnable) },
	} {
		setters[k] = f
	}
}

func (c Config) validateReplication(bad badFunc) {
	checkRanges(bad,
		intRange{"haListenPort", c.HAListenPort, 0, 65535, " (0: listenPort+1)"},
		intRange{"inSyncReplicas", c.InSyncReplicas, 1, MaxInSyncReplicas, " (the master included)"})
	if c.HAListenPort != 0 && c.HAListenPort == c.ListenPort {
		bad("haListenPort %d: it is listenPort too; want another port", c.HAListenPort)
	}
	if c.HAMasterAddress != "" {
		if err := checkHostPort(c.HAMasterAddress, false); err != nil {
			bad("haMasterAddress %q: %v", c.HAMasterAddress, err)
		}
	}
	if c.SlaveTimeout < time.Millisecond {
		bad("slaveTimeout %s: want at least 1ms", c.SlaveTimeout)
	}
	if c.HAMaxGapNotInSync < 0 {
		bad("haMaxGapNotInSync %d: want > 0 (bytes)", c.HAMaxGapNotInSync)
	}
}

// HAListenAddr returns the address a master's HA port listens on:
// bindAddress:haListenPort, or listenPort+1 when haListenPort is unset.
func (c Config) HAListenAddr() string {
	c = c.withDefaults()
	port := c.HAListenPort
	if port == 0 {
		port = c.ListenPort + 1
	}
	return net.JoinHostPort(c.BindAddress, strconv.Itoa(port))
}
