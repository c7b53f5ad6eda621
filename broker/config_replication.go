package broker

import (
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// HAConfig holds the replication keys of controller mode and of reads
// from slaves (docs/REPLICATION.md, "Failover"), RocketMQ's names.
type HAConfig struct {
	// EnableControllerMode (enableControllerMode): the controllers at
	// ControllerAddr elect the group's master; brokerRole then says only
	// how a master acknowledges (SYNC_MASTER or ASYNC_MASTER) and brokerId
	// is the broker's id in its group, above 0. broker/server's Member runs
	// such a broker. Default false.
	EnableControllerMode bool
	// ControllerAddr (controllerAddr, "host:port;host:port"): the
	// controller members' gRPC addresses.
	ControllerAddr []string
	// BrokerHeartbeatInterval (brokerHeartbeatInterval, ms): how often the
	// broker heartbeats to the controller; default 1 s.
	BrokerHeartbeatInterval time.Duration
	// MasterLease (masterLeaseMillis, ms): how long a master acknowledges
	// writes after a heartbeat the controller answered naming it master;
	// keep it well below the controller's brokerTimeout (10 s), after
	// which another broker may be elected. Default 5 s.
	MasterLease time.Duration
	// HAMaxTimeSlaveNotCatchup (haMaxTimeSlaveNotCatchup, ms): a slave of
	// a controller-mode master's in-sync set leaves it once its acks have
	// not caught up with the master's log for this long (stalled, or
	// lagging for good), so that the master's acks and reads stop waiting
	// for it. At least 2 s (an idle slave acks every second); default 15 s.
	HAMaxTimeSlaveNotCatchup time.Duration
	// Lease, when set, is the lease a master's writes need (not a key: its
	// owner, broker/server's Member, renews it).
	Lease *Lease
	// DispatchLimit, when set, bounds what consumers read (not a key: its
	// owner, broker/server, sets it in controller mode): a message reaches
	// its consume queue only once it ends at or below the log offset it
	// returns (store.Config.DispatchLimit); call Broker.ConfirmMoved when
	// that grows.
	DispatchLimit func() int64
	// AccessMessageInMemoryMaxRatio (accessMessageInMemoryMaxRatio,
	// percent of the machine's memory): a master with slaveReadEnable
	// tells a RocketMQ consumer to pull from slave brokerId 1 when what it
	// reads lies further behind the log's end than this share of memory
	// (no longer in the page cache, as RocketMQ reasons). 1..100,
	// default 40.
	AccessMessageInMemoryMaxRatio int
}

// Default controller-mode settings.
const (
	DefaultBrokerHeartbeatInterval  = time.Second
	DefaultMasterLease              = 5 * time.Second
	DefaultHAMaxTimeSlaveNotCatchup = 15 * time.Second
)

func (m *HAConfig) setDefaults() {
	setDefault(&m.AccessMessageInMemoryMaxRatio, 40)
	setDefault(&m.BrokerHeartbeatInterval, DefaultBrokerHeartbeatInterval)
	setDefault(&m.MasterLease, DefaultMasterLease)
	setDefault(&m.HAMaxTimeSlaveNotCatchup, DefaultHAMaxTimeSlaveNotCatchup)
}

// Lease is a master's right to acknowledge writes until a deadline. The
// zero Lease is expired. Safe for concurrent use.
type Lease struct{ until atomic.Int64 } // unix nanoseconds

// Renew extends the lease to until; a lease only moves forward.
func (l *Lease) Renew(until time.Time) {
	n := until.UnixNano()
	for {
		old := l.until.Load()
		if n <= old || l.until.CompareAndSwap(old, n) {
			return
		}
	}
}

// Revoke ends the lease now.
func (l *Lease) Revoke() { l.until.Store(0) }

// Valid reports whether the lease holds at now.
func (l *Lease) Valid(now time.Time) bool { return now.UnixNano() < l.until.Load() }

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

		"enableControllerMode": func(c *Config, v string) error { return parseBool(v, &c.EnableControllerMode) },
		"controllerAddr":       func(c *Config, v string) error { c.ControllerAddr = splitList(v); return nil },
		"brokerHeartbeatInterval": func(c *Config, v string) error {
			return parseDuration(v, time.Millisecond, &c.BrokerHeartbeatInterval)
		},
		"masterLeaseMillis": func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.MasterLease) },
		"accessMessageInMemoryMaxRatio": func(c *Config, v string) error {
			return parseInt(v, &c.AccessMessageInMemoryMaxRatio)
		},
		"haMaxTimeSlaveNotCatchup": func(c *Config, v string) error {
			return parseDuration(v, time.Millisecond, &c.HAMaxTimeSlaveNotCatchup)
		},
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
	checkRanges(bad, intRange{"accessMessageInMemoryMaxRatio", c.AccessMessageInMemoryMaxRatio, 1, 100, " (percent of memory)"})
	c.validateControllerMode(bad)
	if c.HAMaxTimeSlaveNotCatchup < 2*time.Second {
		bad("haMaxTimeSlaveNotCatchup %s: want at least 2s (an idle slave acknowledges every second)", c.HAMaxTimeSlaveNotCatchup)
	}
	if c.HAMaxGapNotInSync < 0 {
		bad("haMaxGapNotInSync %d: want > 0 (bytes)", c.HAMaxGapNotInSync)
	}
	c.validateTLS(bad) // config_tls.go: the HA port and the dials to the master serve and dial TLS too
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

func (c Config) validateControllerMode(bad badFunc) {
	if !c.EnableControllerMode {
		return
	}
	if len(c.ControllerAddr) == 0 {
		bad("enableControllerMode: controllerAddr is empty; want the controllers' host:port;host:port")
	}
	for _, a := range c.ControllerAddr {
		if err := checkHostPort(a, false); err != nil {
			bad("controllerAddr %q: %v", a, err)
		}
	}
	if c.BrokerID <= 0 {
		bad("brokerId %d: with enableControllerMode, brokerId is the broker's id in its group, above 0 (the controller elects the master)", c.BrokerID)
	}
	if c.BrokerRole == Slave {
		bad("brokerRole SLAVE: with enableControllerMode the controller decides who is master; brokerRole says how a master acknowledges: SYNC_MASTER or ASYNC_MASTER")
	}
	if c.HAMasterAddress != "" {
		bad("haMasterAddress %q: with enableControllerMode a slave follows the master the controller names; remove the key", c.HAMasterAddress)
	}
	if c.BrokerHeartbeatInterval < 10*time.Millisecond {
		bad("brokerHeartbeatInterval %s: want at least 10ms", c.BrokerHeartbeatInterval)
	}
	if c.MasterLease < 2*c.BrokerHeartbeatInterval {
		bad("masterLeaseMillis %s: want at least twice brokerHeartbeatInterval (%s), or a master loses its lease between heartbeats",
			c.MasterLease, c.BrokerHeartbeatInterval)
	}
}

// WithDefaults returns c with every unset setting at its default, as Open
// applies them.
func (c Config) WithDefaults() Config { return c.withDefaults() }
