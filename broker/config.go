package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/memlimit"
	"github.com/gantrymq/gantry/message"
)

// BrokerRole is brokerRole: a master (async or sync replication) or a slave.
type BrokerRole int

const (
	AsyncMaster BrokerRole = iota // ASYNC_MASTER (default)
	SyncMaster                    // SYNC_MASTER: a send is acked once inSyncReplicas hold it
	Slave                         // SLAVE: a copy of its master's log; refuses writes
)

var roleNames = [...]string{"ASYNC_MASTER", "SYNC_MASTER", "SLAVE"}

func (r BrokerRole) String() string {
	if r >= 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("BrokerRole(%d)", int(r))
}

// ParseBrokerRole parses RocketMQ's brokerRole values.
func ParseBrokerRole(s string) (BrokerRole, error) {
	for i, n := range roleNames {
		if s == n {
			return BrokerRole(i), nil
		}
	}
	return 0, errors.New("want ASYNC_MASTER, SYNC_MASTER or SLAVE")
}

// Defaults of Config.
const (
	DefaultClusterName           = "DefaultCluster"
	DefaultBrokerName            = "broker-a"
	DefaultListenPort            = 10911
	DefaultGRPCListenAddr        = ":" + defaultGRPCPort // with bindAddress unset
	DefaultHTTPListenAddr        = ":" + defaultHTTPPort
	DefaultBrokerIP1             = "127.0.0.1"
	DefaultStorePathRootDir      = "./gantry-data/store"
	DefaultCommitLogSegmentBytes = 1 << 30
	DefaultFileReservedTime      = 72 * time.Hour
	DefaultDeleteWhen            = "04"
	DefaultDiskMaxUsedSpaceRatio = 75
	// DefaultDiskSpaceCleanForciblyRatio and
	// DefaultDiskSpaceWarningLevelRatio are RocketMQ's, in percent.
	DefaultDiskSpaceCleanForciblyRatio = 85
	DefaultDiskSpaceWarningLevelRatio  = 90
	// DefaultMaxHashSlotNum and DefaultMaxIndexNum size an index file as
	// RocketMQ does: 40 + 4*5,000,000 + 20*20,000,000 bytes (420 MB).
	DefaultMaxHashSlotNum        = 5_000_000
	DefaultMaxIndexNum           = 20_000_000
	DefaultTopicQueueNums        = 8
	DefaultMaxMessageSize        = message.MaxBodyBytes
	DefaultMaxPropertiesSize     = 32 << 10
	DefaultLongPollingMaxHold    = 15 * time.Second
	DefaultFlushOffsetInterval   = 5 * time.Second
	DefaultRegisterPeriod        = 30 * time.Second
	DefaultChannelExpiredTimeout = 120 * time.Second
	DefaultQueueLockTTL          = 60 * time.Second
	DefaultTimerMaxDelay         = 72 * time.Hour
	DefaultDLQRetention          = 72 * time.Hour
	DefaultDuplicationWindow     = 5 * time.Minute
	DefaultMaxGroupsPerHeartbeat = 1000
	DefaultMaxConsumerGroups     = 10000
	// DefaultInSyncReplicas, DefaultSlaveTimeout and
	// DefaultHAMaxGapNotInSync are the replication defaults
	// (docs/REPLICATION.md, "Running a master and slaves").
	DefaultInSyncReplicas    = 2
	DefaultSlaveTimeout      = 3 * time.Second
	DefaultHAMaxGapNotInSync = 256 << 20
	// MaxInSyncReplicas bounds inSyncReplicas: the master and the most
	// slaves its HA port serves.
	MaxInSyncReplicas = 17
	// MemoryLimitOff as Config.MemoryLimit turns the soft memory limit
	// off (memoryLimit=off).
	MemoryLimitOff = memlimit.Off

	// DuplicationOff as Config.DuplicationWindow (any negative value does)
	// turns the de-duplication of sends off; duplicationWindow=0 in
	// broker.conf sets it.
	DuplicationOff time.Duration = -1

	// DefaultMessageDelayLevel is RocketMQ's messageDelayLevel: levels 1..18.
	DefaultMessageDelayLevel = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
)

// The ports of grpcListenAddr's and httpListenAddr's defaults.
const (
	defaultGRPCPort = "8081"
	defaultHTTPPort = "5557"
)

// defaultScheduleTick is Config.scheduleTick's default.
const defaultScheduleTick = 100 * time.Millisecond

// defaultDLQSweepInterval is Config.dlqSweepInterval's default.
const defaultDLQSweepInterval = time.Minute

// defaultDelayLevels is DefaultMessageDelayLevel parsed.
var defaultDelayLevels = func() []time.Duration {
	d, err := ParseDelayLevels(DefaultMessageDelayLevel)
	if err != nil {
		panic(err) // a broken constant
	}
	return d
}()

// Config configures a Broker. Fields marked with a key are read from
// broker.conf by ParseConfig (RocketMQ's key names where RocketMQ has the
// setting); the zero value of every field means its default.
type Config struct {
	// BrokerClusterName (brokerClusterName). Default "DefaultCluster".
	BrokerClusterName string
	// BrokerName (brokerName): the master/slave group. Default "broker-a".
	BrokerName string
	// BrokerID (brokerId): 0 for the master. Default 0.
	BrokerID int64
	// NamesrvAddr (namesrvAddr, "host:port;host:port"): the nameservers to
	// register with. Default none.
	NamesrvAddr []string
	// ListenPort (listenPort): the remoting port, also in the broker address
	// stored in every record. Default 10911. It serves gRPC too (the first
	// bytes of a connection tell the protocols apart).
	ListenPort int
	// BindAddress (bindAddress, RocketMQ's key): the IP address the
	// remoting port listens on, and the host of grpcListenAddr's and
	// httpListenAddr's defaults. Default "" (0.0.0.0): every interface.
	BindAddress string
	// GRPCListenAddr (grpcListenAddr, Gantry's key): Gantry's gRPC port (it
	// serves RocketMQ remoting too). Default bindAddress:8081.
	GRPCListenAddr string
	// HTTPListenAddr (httpListenAddr, Gantry's key): metrics and health.
	// Default bindAddress:5557.
	HTTPListenAddr string
	// PprofEnable (pprofEnable, Gantry's key): serve Go's profiles at /debug/pprof/ on the HTTP port. Default false.
	PprofEnable bool
	// BrokerIP1 (brokerIP1): the address clients reach this broker at; an IP.
	// Default bindAddress when that is one address, else 127.0.0.1. That it
	// belongs to this host is checked by the binary.
	BrokerIP1 string
	// StorePathRootDir (storePathRootDir). Default "./gantry-data/store".
	StorePathRootDir string
	// MappedFileSizeCommitLog (mappedFileSizeCommitLog): commit-log segment
	// size in bytes. Default 1 GiB.
	MappedFileSizeCommitLog int64
	// FlushDiskType (flushDiskType: ASYNC_FLUSH or SYNC_FLUSH). Default ASYNC_FLUSH.
	FlushDiskType commitlog.FlushMode
	// PageCacheWrites (pageCacheWrites) is accepted and has no effect: the
	// commit log chooses how it writes from FlushDiskType (docs/STORAGE.md).
	// Open warns when it is set.
	//
	// Deprecated: remove the key; it goes in a later release.
	PageCacheWrites bool
	// BrokerRole (brokerRole): ASYNC_MASTER (default), SYNC_MASTER or
	// SLAVE. A master's brokerId is 0, a slave's above 0
	// (docs/REPLICATION.md, "Running a master and slaves").
	BrokerRole BrokerRole
	// Replication (config_replication.go; docs/REPLICATION.md). HAListenPort (haListenPort): a
	// master's HA port, default listenPort+1 (ephemeral when broker/server is given a remoting
	// listener and listenPort is unset, as in tests). HAMasterAddress (haMasterAddress): a slave's
	// master's HA host:port, default the one the nameserver names. InSyncReplicas (inSyncReplicas):
	// the replicas, master included, that hold a SYNC_MASTER's message before its ack; 1..17,
	// default 2. SlaveTimeout (slaveTimeout, ms): how long such a send waits for the slaves (then
	// ErrReplicaTimeout); default 3 s. HAMaxGapNotInSync (haMaxGapNotInSync, bytes): how far behind
	// a connected slave still counts as in sync; default 256 MiB. SlaveReadEnable
	// (slaveReadEnable): a slave serves pulls; default false.
	HAConfig          // config_replication.go
	AuthConfig        // config_auth.go
	TLSConfig         // config_tls.go (docs/SECURITY.md)
	HAListenPort      int
	HAMasterAddress   string
	InSyncReplicas    int
	SlaveTimeout      time.Duration
	HAMaxGapNotInSync int64
	SlaveReadEnable   bool
	// FileReservedTime (fileReservedTime, in hours in the file): commit-log
	// retention. Default 72 h.
	FileReservedTime time.Duration
	// DeleteWhen (deleteWhen): hours of the day expired segments are deleted
	// at, ";"-separated. Default "04".
	DeleteWhen string
	// DiskMaxUsedSpaceRatio (diskMaxUsedSpaceRatio), percent: above it expired
	// segments are deleted at any hour. 10..95, default 75.
	DiskMaxUsedSpaceRatio int
	// DiskSpaceCleanForciblyRatio (diskSpaceCleanForciblyRatio), percent:
	// above it the oldest segments are deleted even if not expired, until
	// use drops below it; never a record not yet dispatched to its consume
	// queue. 10..100, default 85.
	DiskSpaceCleanForciblyRatio int
	// DiskSpaceWarningLevelRatio (diskSpaceWarningLevelRatio), percent:
	// above it sends are refused (disk full) until use drops below it.
	// 10..100, default 90.
	DiskSpaceWarningLevelRatio int
	// MaxHashSlotNum (maxHashSlotNum) and MaxIndexNum (maxIndexNum): the
	// hash slots and entries of each new index file, which takes 40 +
	// 4*MaxHashSlotNum + 20*MaxIndexNum bytes, allocated whole (420 MB with
	// the defaults, 5,000,000 and 20,000,000). Open refuses a store whose
	// filesystem cannot hold an index file and two commit-log segments.
	MaxHashSlotNum, MaxIndexNum int
	// SkipCorrupt (skipCorrupt): at start, keep the valid records after a
	// damaged range in the middle of the commit log (the range is copied
	// to corrupt/ and reported) instead of refusing to start. Default
	// false.
	SkipCorrupt bool
	// AutoCreateTopicEnable (autoCreateTopicEnable): a Send to an unknown
	// topic creates it. Default false (`gantry dev` sets it).
	AutoCreateTopicEnable bool
	// DefaultTopicQueueNums (defaultTopicQueueNums): queues of an
	// auto-created topic. Default 8.
	DefaultTopicQueueNums int32
	// AutoCreateSubscriptionGroup (autoCreateSubscriptionGroup): an unknown
	// group committing offsets or heartbeating is created. Default (nil) true.
	AutoCreateSubscriptionGroup *bool
	// MaxMessageSize (maxMessageSize): largest body in bytes, and with a
	// record's overhead the most a batch may carry in total (the records of
	// one request: message.BatchLimit). Default and most 4 MiB
	// (message.MaxBodyBytes), which clients' receive limits are sized for.
	MaxMessageSize int
	// MaxPropertiesSize (maxPropertiesSize, Gantry's key): largest encoded
	// properties of a message in bytes. Default 32 KiB. The record format
	// caps them lower anyway (message.MaxPropertiesLen, with the UNIQ_KEY and
	// CRC the store adds).
	MaxPropertiesSize int
	// LongPollingMaxHold (longPollingMaxHold, Gantry's key, ms in the file):
	// the longest a Pull is held. Default 15 s.
	LongPollingMaxHold time.Duration
	// FlushConsumerOffsetInterval (flushConsumerOffsetInterval, ms): how
	// often changed offsets and metadata are saved. Default 5 s.
	FlushConsumerOffsetInterval time.Duration
	// RegisterNameServerPeriod (registerNameServerPeriod, ms): how often the
	// broker registers with the nameservers. Default 30 s.
	RegisterNameServerPeriod time.Duration
	// ChannelExpiredTimeout (channelExpiredTimeout, ms): a consumer client
	// silent this long is dropped from its group. Default 120 s.
	ChannelExpiredTimeout time.Duration
	// MessageDelayLevel (messageDelayLevel, "1s 5s 10s ..." in the file:
	// a count and a unit s, m, h or d per level, space-separated): the delay
	// of each level of the DELAY property, level L being element L-1; a
	// DELAY above the last level means the last. 1..1024 levels, each > 0.
	// Default RocketMQ's 18 levels, DefaultMessageDelayLevel (1s to 2h).
	MessageDelayLevel []time.Duration
	// TimerMaxDelay (timerMaxDelay, Gantry's key; RocketMQ's
	// timerMaxDelaySec; seconds or a Go duration like 72h in the file): how
	// far ahead of now a TIMER_DELIVER_MS or TIMER_DELAY_SEC may ask for
	// delivery; a send asking for later is refused. Default 72 h.
	TimerMaxDelay time.Duration
	// DLQRetention (dlqRetentionHours, Gantry's key, hours or a Go duration
	// in the file): how long a dead letter lives from the time it was
	// dead-lettered (its store time), whatever fileReservedTime says: the
	// log keeps the segments holding unexpired dead letters, and expired
	// ones are never pulled nor listed and are swept from their queue.
	// Default 72 h.
	DLQRetention time.Duration
	// DuplicationWindow (duplicationWindow, Gantry's key; ms or a Go
	// duration like 5m in the file, 0 for off): how long after storing a
	// message of a user send the broker answers a repeat of its key (its
	// IDEMPOTENCY_KEY, else its UNIQ_KEY, within its topic) with the
	// original's result, marked duplicate, storing nothing. The store's key
	// index remembers the keys, so memory does not grow with the window,
	// and a restart keeps them. Default 5 min (DefaultDuplicationWindow);
	// DuplicationOff (or any negative value) turns it off. See
	// docs/BROKER.md.
	DuplicationWindow time.Duration
	// MaxGroupsPerHeartbeat (maxGroupsPerHeartbeat, Gantry's key): the
	// most consumer groups one heartbeat may list (a RocketMQ HEART_BEAT
	// lists every consumer of the client process; a real one, a handful).
	// A heartbeat listing more is refused whole with ErrTooManyGroups,
	// before anything is created. Default 1,000.
	MaxGroupsPerHeartbeat int
	// MaxConsumerGroups (maxConsumerGroups, Gantry's key): the most
	// subscription groups the broker creates by itself: once this many
	// exist, a heartbeat or offset commit of an unknown group is refused
	// with ErrTooManyGroups instead of creating it (with its retry topic,
	// registered with the nameservers). Groups an administrator creates
	// count, but are not refused. Default 10,000.
	MaxConsumerGroups int
	// MemoryLimit (memoryLimit, Gantry's key): the Go runtime's soft
	// memory limit for the broker process, in bytes (broker.conf takes
	// sizes like 2GiB, or off). 0, the default: half of the cgroup's
	// memory limit if one is set, else of the physical memory
	// (internal/memlimit); MemoryLimitOff: none. The GOMEMLIMIT
	// environment variable, when set, wins. `gantry broker` applies it;
	// the Broker itself does not (a library does not set process-wide
	// settings). docs/BROKER.md, "Memory".
	MemoryLimit int64

	// Not in broker.conf.

	// QueueLockTTL is how long a queue lock (LockQueues) lasts after it was
	// granted or last renewed. Default 60 s (RocketMQ's
	// rocketmq.broker.rebalance.lockMaxLiveTime); must be > 0.
	QueueLockTTL time.Duration
	// Now is the clock (store times, heartbeat and queue lock expiry,
	// uptime). Default time.Now.
	Now func() time.Time
	// Logger receives lifecycle and anomaly logs. Default: discard.
	Logger *slog.Logger
	// StoreOverride, if set, adjusts the store.Config derived from this one
	// (tests use small files). Its OnDispatch, if set, runs before the
	// broker's own.
	StoreOverride func(*store.Config)
	// OnTopicsChanged, if set, is called after a topic is created, updated or
	// deleted, so registration can run at once. It must not block.
	OnTopicsChanged func()
	// SyncTopicRoutes, if set, is called after OnTopicsChanged when an
	// administrator creates, updates or deletes a topic, and waits (until
	// ctx ends: at most a second) for the nameservers to have the change,
	// so the topic's route is there when the call is answered.
	SyncTopicRoutes func(ctx context.Context)
	// OnConsumersChanged, if set, is called after a client joins or leaves a
	// group (unregistered, its last watch ended, or expired): after a change
	// of the group's set of client ids, not after every heartbeat. It must
	// not block.
	OnConsumersChanged func(group string)

	// scheduleTick is how often (in real time) the delay-level scheduler
	// and the timer look for due messages; they decide with Now. Default
	// 100 ms; tests shorten it through export_test.go.
	scheduleTick time.Duration
	// dlqSweepInterval is how often (in real time) expired and purged dead
	// letters are swept from their queues; expiry itself is decided with
	// Now at every read. Default 1 min; tests shorten it.
	dlqSweepInterval time.Duration
	// rocketmq holds what ParseConfig made of RocketMQ keys without a
	// setting here (config_rocketmq.go): Open logs the ignored ones,
	// Validate checks the store paths.
	rocketmq rocketmqKeys
}

func (c Config) withDefaults() Config {
	setDefault(&c.BrokerClusterName, DefaultClusterName)
	setDefault(&c.BrokerName, DefaultBrokerName)
	setDefault(&c.ListenPort, DefaultListenPort)
	setDefault(&c.GRPCListenAddr, net.JoinHostPort(c.BindAddress, defaultGRPCPort))
	setDefault(&c.HTTPListenAddr, net.JoinHostPort(c.BindAddress, defaultHTTPPort))
	if ip, err := netip.ParseAddr(c.BindAddress); err == nil && !ip.IsUnspecified() {
		setDefault(&c.BrokerIP1, c.BindAddress)
	}
	setDefault(&c.BrokerIP1, DefaultBrokerIP1)
	setDefault(&c.StorePathRootDir, DefaultStorePathRootDir)
	setDefault(&c.MappedFileSizeCommitLog, DefaultCommitLogSegmentBytes)
	setDefault(&c.FileReservedTime, DefaultFileReservedTime)
	setDefault(&c.DeleteWhen, DefaultDeleteWhen)
	setDefault(&c.DiskMaxUsedSpaceRatio, DefaultDiskMaxUsedSpaceRatio)
	setDefault(&c.DiskSpaceCleanForciblyRatio, DefaultDiskSpaceCleanForciblyRatio)
	setDefault(&c.DiskSpaceWarningLevelRatio, DefaultDiskSpaceWarningLevelRatio)
	setDefault(&c.MaxHashSlotNum, DefaultMaxHashSlotNum)
	setDefault(&c.MaxIndexNum, DefaultMaxIndexNum)
	setDefault(&c.DefaultTopicQueueNums, DefaultTopicQueueNums)
	setDefault(&c.MaxMessageSize, DefaultMaxMessageSize)
	setDefault(&c.MaxPropertiesSize, DefaultMaxPropertiesSize)
	setDefault(&c.LongPollingMaxHold, DefaultLongPollingMaxHold)
	setDefault(&c.FlushConsumerOffsetInterval, DefaultFlushOffsetInterval)
	setDefault(&c.RegisterNameServerPeriod, DefaultRegisterPeriod)
	setDefault(&c.ChannelExpiredTimeout, DefaultChannelExpiredTimeout)
	setDefault(&c.QueueLockTTL, DefaultQueueLockTTL)
	setDefault(&c.TimerMaxDelay, DefaultTimerMaxDelay)
	setDefault(&c.DLQRetention, DefaultDLQRetention)
	setDefault(&c.DuplicationWindow, DefaultDuplicationWindow)
	setDefault(&c.MaxGroupsPerHeartbeat, DefaultMaxGroupsPerHeartbeat)
	setDefault(&c.MaxConsumerGroups, DefaultMaxConsumerGroups)
	setDefault(&c.InSyncReplicas, DefaultInSyncReplicas)
	setDefault(&c.SlaveTimeout, DefaultSlaveTimeout)
	setDefault(&c.HAMaxGapNotInSync, DefaultHAMaxGapNotInSync)
	c.HAConfig.setDefaults()
	c.AuthConfig.setDefaults(c.StorePathRootDir)
	setDefault(&c.scheduleTick, defaultScheduleTick)
	setDefault(&c.dlqSweepInterval, defaultDLQSweepInterval)
	if len(c.MessageDelayLevel) == 0 {
		c.MessageDelayLevel = slices.Clone(defaultDelayLevels)
	}
	if c.AutoCreateSubscriptionGroup == nil {
		t := true
		c.AutoCreateSubscriptionGroup = &t
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports every problem with c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	c.validateIdentity(bad)
	c.validateAddrs(bad)
	c.validateStore(bad)
	c.validateLimits(bad)
	c.validateDelays(bad)
	c.validateAuth(bad)
	c.rocketmq.validate(c, bad)
	if c.DuplicationWindow > 0 && c.DuplicationWindow < time.Millisecond {
		bad("duplicationWindow %s: want at least 1ms (or 0: off)", c.DuplicationWindow)
	}
	return errors.Join(errs...)
}

type badFunc func(format string, args ...any)

func (c Config) validateIdentity(bad badFunc) {
	for _, n := range []struct{ key, v string }{{"brokerClusterName", c.BrokerClusterName}, {"brokerName", c.BrokerName}} {
		if metadata.ValidTopicName(n.v) != nil || strings.Contains(n.v, "%") {
			bad("%s %q: want 1 to 127 characters from [a-zA-Z0-9_-]", n.key, n.v)
		}
	}
	switch {
	case c.BrokerRole < AsyncMaster || c.BrokerRole > Slave:
		bad("brokerRole %d: want ASYNC_MASTER, SYNC_MASTER or SLAVE", int(c.BrokerRole))
	case c.EnableControllerMode: // validateReplication checks brokerId and brokerRole
	case c.BrokerRole == Slave && c.BrokerID <= 0:
		bad("brokerId %d: a SLAVE's brokerId is above 0 (0 is the master's)", c.BrokerID)
	case c.BrokerRole != Slave && c.BrokerID != 0:
		bad("brokerId %d: a master's (%s) brokerId is 0", c.BrokerID, c.BrokerRole)
	}
	c.validateReplication(bad)
}

func (c Config) validateAddrs(bad badFunc) {
	for _, a := range c.NamesrvAddr {
		if err := checkHostPort(a, false); err != nil {
			bad("namesrvAddr %q: %v", a, err)
		}
	}
	checkRanges(bad, intRange{"listenPort", c.ListenPort, 1, 65535, ""})
	if _, err := netip.ParseAddr(c.BindAddress); err != nil && c.BindAddress != "" {
		bad("bindAddress %q: want an IP address (0.0.0.0: every interface)", c.BindAddress)
	}
	if err := checkHostPort(c.GRPCListenAddr, true); err != nil {
		bad("grpcListenAddr %q: %v", c.GRPCListenAddr, err)
	}
	if err := checkHostPort(c.HTTPListenAddr, true); err != nil {
		bad("httpListenAddr %q: %v", c.HTTPListenAddr, err)
	}
	if _, err := netip.ParseAddr(c.BrokerIP1); err != nil {
		bad("brokerIP1 %q: want an IP address", c.BrokerIP1)
	}
}

// checkHostPort checks a "host:port" address; a listen address may omit
// the host and use port 0.
func checkHostPort(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	p, err := strconv.Atoi(port)
	lo := 1
	if listen {
		lo = 0
	}
	if err != nil || p < lo || p > 65535 {
		return fmt.Errorf("want a port %d..65535", lo)
	}
	if host == "" && !listen {
		return errors.New("want a host")
	}
	return nil
}

func (c Config) validateStore(bad badFunc) {
	if c.MappedFileSizeCommitLog < 0 {
		bad("mappedFileSizeCommitLog %d: want > 0", c.MappedFileSizeCommitLog)
	}
	if c.FlushDiskType != commitlog.AsyncFlush && c.FlushDiskType != commitlog.SyncFlush {
		bad("flushDiskType %d: want ASYNC_FLUSH or SYNC_FLUSH", int(c.FlushDiskType))
	}
	if c.FileReservedTime < 0 {
		bad("fileReservedTime %s: want > 0", c.FileReservedTime)
	}
	if err := checkHours(c.DeleteWhen); err != nil {
		bad("deleteWhen %q: %v", c.DeleteWhen, err)
	}
	checkRanges(bad,
		intRange{"diskMaxUsedSpaceRatio", c.DiskMaxUsedSpaceRatio, 10, 95, " (percent)"},
		intRange{"diskSpaceCleanForciblyRatio", c.DiskSpaceCleanForciblyRatio, 10, 100, " (percent)"},
		intRange{"diskSpaceWarningLevelRatio", c.DiskSpaceWarningLevelRatio, 10, 100, " (percent)"},
		intRange{"maxHashSlotNum", c.MaxHashSlotNum, 1, math.MaxInt32, ""},
		intRange{"maxIndexNum", c.MaxIndexNum, 2, math.MaxInt32, ""})
}

// intRange is an integer key's value and the range Validate accepts.
type intRange struct {
	key    string
	v      int
	lo, hi int
	note   string // said after the range: " (percent)"
}

// checkRanges reports each value outside its range.
func checkRanges(bad badFunc, rs ...intRange) {
	for _, r := range rs {
		if r.v < r.lo || r.v > r.hi {
			bad("%s %d: want %d..%d%s", r.key, r.v, r.lo, r.hi, r.note)
		}
	}
}

// checkHours checks deleteWhen: ";"-separated hours 0..23.
func checkHours(s string) error {
	for h := range strings.SplitSeq(s, ";") {
		n, err := strconv.Atoi(strings.TrimSpace(h))
		if err != nil || n < 0 || n > 23 {
			return errors.New(`want hours 00..23 separated by ";"`)
		}
	}
	return nil
}

func (c Config) validateLimits(bad badFunc) {
	checkRanges(bad,
		intRange{"defaultTopicQueueNums", int(c.DefaultTopicQueueNums), 1, metadata.MaxQueueNums, ""},
		intRange{"maxMessageSize", c.MaxMessageSize, 1, message.MaxBodyBytes, " (Gantry's clients read messages up to that size)"})
	for _, n := range []struct {
		key string
		v   int
	}{
		{"maxPropertiesSize", c.MaxPropertiesSize},
		{"maxGroupsPerHeartbeat", c.MaxGroupsPerHeartbeat},
		{"maxConsumerGroups", c.MaxConsumerGroups},
	} {
		if n.v < 0 {
			bad("%s %d: want > 0", n.key, n.v)
		}
	}
	if c.MemoryLimit < MemoryLimitOff {
		bad("memoryLimit %d: want bytes, 0 (sized from the machine) or off", c.MemoryLimit)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"longPollingMaxHold", c.LongPollingMaxHold},
		{"flushConsumerOffsetInterval", c.FlushConsumerOffsetInterval},
		{"registerNameServerPeriod", c.RegisterNameServerPeriod},
		{"channelExpiredTimeout", c.ChannelExpiredTimeout},
		{"QueueLockTTL", c.QueueLockTTL},
	} {
		if d.v < 0 {
			bad("%s %s: want > 0", d.key, d.v)
		}
	}
}

// StoreAddr returns the address stored in records and offset message ids:
// brokerIP1:listenPort.
func (c Config) StoreAddr() netip.AddrPort {
	c = c.withDefaults()
	ip, err := netip.ParseAddr(c.BrokerIP1)
	if err != nil {
		ip = netip.MustParseAddr(DefaultBrokerIP1) // Validate reports it
	}
	return netip.AddrPortFrom(ip, uint16(c.ListenPort))
}

// ListenAddrs returns the addresses the broker listens on: gRPC, HTTP and
// remoting (bindAddress:listenPort), defaults applied.
func (c Config) ListenAddrs() (grpc, http, remoting string) {
	c = c.withDefaults()
	return c.GRPCListenAddr, c.HTTPListenAddr, net.JoinHostPort(c.BindAddress, strconv.Itoa(c.ListenPort))
}

// StoreConfig returns the store configuration c implies: root, store host,
// segment size, flush mode, retention and the metadata save period, then
// StoreOverride applied. Open adds the dispatch hook.
func (c Config) StoreConfig() store.Config {
	c = c.withDefaults()
	sc := store.Config{
		Root:      c.StorePathRootDir,
		StoreHost: c.StoreAddr(),
		Log: commitlog.Config{
			SegmentBytes:     c.MappedFileSizeCommitLog,
			FlushMode:        c.FlushDiskType,
			FileReservedTime: c.FileReservedTime,
			DeleteWhen:       c.DeleteWhen,
			DiskMaxUsedRatio: float64(c.DiskMaxUsedSpaceRatio) / 100,

			DiskForceCleanRatio: float64(c.DiskSpaceCleanForciblyRatio) / 100,
			DiskFullRatio:       float64(c.DiskSpaceWarningLevelRatio) / 100,
			SkipCorrupt:         c.SkipCorrupt,
		},
		IndexSlots:       c.MaxHashSlotNum,
		IndexEntries:     c.MaxIndexNum,
		MetadataInterval: c.FlushConsumerOffsetInterval,
		Now:              c.Now,
		Logger:           c.Logger,
	}
	if c.StoreOverride != nil {
		c.StoreOverride(&sc)
	}
	return sc
}

// ConfigKeys lists the keys ParseConfig accepts, in the order of Config.
var ConfigKeys = []string{
	"brokerClusterName", "brokerName", "brokerId", "namesrvAddr", "listenPort", "bindAddress", "grpcListenAddr",
	"httpListenAddr", "pprofEnable", "brokerIP1", "storePathRootDir", "mappedFileSizeCommitLog", "flushDiskType",
	"pageCacheWrites", "brokerRole", "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio",
	"diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio", "maxHashSlotNum", "maxIndexNum", "skipCorrupt",
	"autoCreateTopicEnable", "defaultTopicQueueNums", "autoCreateSubscriptionGroup", "maxMessageSize", "maxPropertiesSize",
	"longPollingMaxHold", "flushConsumerOffsetInterval", "registerNameServerPeriod", "channelExpiredTimeout",
	"messageDelayLevel", "timerMaxDelay", "dlqRetentionHours", "duplicationWindow", "maxGroupsPerHeartbeat",
	"maxConsumerGroups", "memoryLimit", "enableControllerMode", "controllerAddr", "brokerHeartbeatInterval",
	"masterLeaseMillis", "haListenPort", "haMasterAddress", "inSyncReplicas", "slaveTimeout", "haMaxGapNotInSync",
	"slaveReadEnable", "accessMessageInMemoryMaxRatio", "haMaxTimeSlaveNotCatchup",
}

// setters maps each key to the function that parses its value into a Config.
var setters = map[string]func(c *Config, v string) error{
	"brokerClusterName":           func(c *Config, v string) error { c.BrokerClusterName = v; return nil },
	"brokerName":                  func(c *Config, v string) error { c.BrokerName = v; return nil },
	"brokerId":                    func(c *Config, v string) error { return parseInt(v, &c.BrokerID) },
	"namesrvAddr":                 func(c *Config, v string) error { c.NamesrvAddr = splitList(v); return nil },
	"listenPort":                  func(c *Config, v string) error { return parseInt(v, &c.ListenPort) },
	"bindAddress":                 func(c *Config, v string) error { c.BindAddress = v; return nil },
	"grpcListenAddr":              func(c *Config, v string) error { c.GRPCListenAddr = v; return nil },
	"httpListenAddr":              func(c *Config, v string) error { c.HTTPListenAddr = v; return nil },
	"pprofEnable":                 func(c *Config, v string) error { return parseBool(v, &c.PprofEnable) },
	"brokerIP1":                   func(c *Config, v string) error { c.BrokerIP1 = v; return nil },
	"storePathRootDir":            func(c *Config, v string) error { c.StorePathRootDir = v; return nil },
	"mappedFileSizeCommitLog":     func(c *Config, v string) error { return parseInt(v, &c.MappedFileSizeCommitLog) },
	"flushDiskType":               parseFlushDiskType,
	"pageCacheWrites":             func(c *Config, v string) error { return parseBool(v, &c.PageCacheWrites) },
	"brokerRole":                  parseRole,
	"fileReservedTime":            func(c *Config, v string) error { return parseDuration(v, time.Hour, &c.FileReservedTime) },
	"deleteWhen":                  func(c *Config, v string) error { c.DeleteWhen = v; return checkHours(v) },
	"diskMaxUsedSpaceRatio":       func(c *Config, v string) error { return parseInt(v, &c.DiskMaxUsedSpaceRatio) },
	"diskSpaceCleanForciblyRatio": func(c *Config, v string) error { return parseInt(v, &c.DiskSpaceCleanForciblyRatio) },
	"diskSpaceWarningLevelRatio":  func(c *Config, v string) error { return parseInt(v, &c.DiskSpaceWarningLevelRatio) },
	"maxHashSlotNum":              func(c *Config, v string) error { return parseInt(v, &c.MaxHashSlotNum) },
	"maxIndexNum":                 func(c *Config, v string) error { return parseInt(v, &c.MaxIndexNum) },
	"skipCorrupt":                 func(c *Config, v string) error { return parseBool(v, &c.SkipCorrupt) },
	"autoCreateTopicEnable":       func(c *Config, v string) error { return parseBool(v, &c.AutoCreateTopicEnable) },
	"defaultTopicQueueNums":       func(c *Config, v string) error { return parseInt(v, &c.DefaultTopicQueueNums) },
	"autoCreateSubscriptionGroup": parseAutoCreateGroup,
	"maxMessageSize":              func(c *Config, v string) error { return parseInt(v, &c.MaxMessageSize) },
	"maxPropertiesSize":           func(c *Config, v string) error { return parseInt(v, &c.MaxPropertiesSize) },
	"longPollingMaxHold":          func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.LongPollingMaxHold) },
	"flushConsumerOffsetInterval": func(c *Config, v string) error {
		return parseDuration(v, time.Millisecond, &c.FlushConsumerOffsetInterval)
	},
	"registerNameServerPeriod": func(c *Config, v string) error {
		return parseDuration(v, time.Millisecond, &c.RegisterNameServerPeriod)
	},
	"channelExpiredTimeout": func(c *Config, v string) error {
		return parseDuration(v, time.Millisecond, &c.ChannelExpiredTimeout)
	},
	"messageDelayLevel": func(c *Config, v string) (err error) {
		c.MessageDelayLevel, err = ParseDelayLevels(v)
		return err
	},
	"timerMaxDelay":         func(c *Config, v string) error { return parseDuration(v, time.Second, &c.TimerMaxDelay) },
	"dlqRetentionHours":     func(c *Config, v string) error { return parseDuration(v, time.Hour, &c.DLQRetention) },
	"duplicationWindow":     parseDuplicationWindow,
	"maxGroupsPerHeartbeat": func(c *Config, v string) error { return parseInt(v, &c.MaxGroupsPerHeartbeat) },
	"maxConsumerGroups":     func(c *Config, v string) error { return parseInt(v, &c.MaxConsumerGroups) },
	"memoryLimit": func(c *Config, v string) (err error) {
		c.MemoryLimit, err = memlimit.Parse(v)
		return err
	},
}

// ParseConfig reads a RocketMQ-style broker.conf into into, overriding the
// fields whose keys it sets: key=value lines, whitespace around both
// trimmed, blank lines and lines starting with '#' or '!' ignored; a
// repeated key's last value wins. Unknown keys, lines without '=' and
// unparsable values are errors naming the line (all of them are reported,
// joined). RocketMQ's keys without a Gantry setting are accepted where
// Gantry can honour what they say (config_rocketmq.go; Open logs those
// that have no effect). Range checks are Validate's.
func ParseConfig(r io.Reader, into *Config) error { return parseConfig(r, "broker.conf", into) }

// ParseConfigFile reads the broker.conf at path as ParseConfig does; its
// errors name the file.
func ParseConfigFile(path string, into *Config) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	defer f.Close()
	return parseConfig(f, path, into)
}

func parseConfig(r io.Reader, name string, into *Config) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var errs []error
	for n := 1; sc.Scan(); n++ {
		where := fmt.Sprintf("%s line %d", name, n)
		if err := parseLine(sc.Text(), where, into); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, where, err))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("broker: read %s: %w", name, err))
	}
	return errors.Join(errs...)
}

// parseLine parses one line, found where (file and line, for notes).
func parseLine(line, where string, c *Config) error {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' || line[0] == '!' {
		return nil
	}
	k, v, ok := strings.Cut(line, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", line)
	}
	set, ok := setters[k]
	if !ok {
		if rk, known := rocketmqOnly[k]; known {
			return c.rocketmq.parse(c, where, k, v, rk)
		}
		return fmt.Errorf("unknown key %q", k)
	}
	if err := set(c, v); err != nil {
		return fmt.Errorf("%s: bad value %q: %w", k, v, err)
	}
	return nil
}

type integer interface{ ~int | ~int32 | ~int64 }

func parseInt[T integer](v string, into *T) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || int64(T(n)) != n {
		return errors.New("want an integer")
	}
	*into = T(n)
	return nil
}

// parseBool accepts true and false (any case), stricter than Java's
// Boolean.parseBoolean, which reads every typo as false.
func parseBool(v string, into *bool) error {
	switch strings.ToLower(v) {
	case "true":
		*into = true
	case "false":
		*into = false
	default:
		return errors.New("want true or false")
	}
	return nil
}

// parseDuration reads an integer count of unit, as RocketMQ's keys are, or
// a Go duration ("15s").
func parseDuration(v string, unit time.Duration, into *time.Duration) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		*into = time.Duration(n) * unit
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want an integer (%s) or a duration like 15s", unitName(unit))
	}
	*into = d
	return nil
}

func unitName(u time.Duration) string {
	switch u {
	case time.Hour:
		return "hours"
	case time.Second:
		return "seconds"
	}
	return "milliseconds"
}

// parseDuplicationWindow reads duplicationWindow: 0 turns it off.
func parseDuplicationWindow(c *Config, v string) error {
	var d time.Duration
	if err := parseDuration(v, time.Millisecond, &d); err != nil {
		return err
	}
	switch {
	case d < 0:
		return errors.New("want 0 (off) or a positive duration like 5m")
	case d == 0:
		d = DuplicationOff
	}
	c.DuplicationWindow = d
	return nil
}

func parseFlushDiskType(c *Config, v string) error {
	m, err := commitlog.ParseFlushMode(v)
	if err != nil {
		return errors.New("want ASYNC_FLUSH or SYNC_FLUSH")
	}
	c.FlushDiskType = m
	return nil
}

func parseRole(c *Config, v string) error {
	r, err := ParseBrokerRole(v)
	c.BrokerRole = r
	return err
}

func parseAutoCreateGroup(c *Config, v string) error {
	var b bool
	if err := parseBool(v, &b); err != nil {
		return err
	}
	c.AutoCreateSubscriptionGroup = &b
	return nil
}

// splitList splits a ";"-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
