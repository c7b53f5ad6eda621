package broker

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// RocketMQ's broker.conf keys that have no Gantry setting of their own,
// accepted so that a RocketMQ broker.conf works as written
// (docs/BROKER.md, "broker.conf"): an old spelling of a Gantry key, tuning
// of threads and buffers Gantry does not have (logged as ignored at
// start), store paths that must agree with storePathRootDir, and switches
// Gantry cannot honour, accepted only when off. Any other unknown key is
// still an error: a typo must not pass unnoticed.

// rocketmqKey says what Gantry does with one RocketMQ key.
type rocketmqKey struct {
	// alias, if set, is the Gantry key this one is another spelling of.
	alias string
	// storeDir, if set, is the directory under storePathRootDir the key
	// must name (storePathCommitLog: "commitlog").
	storeDir string
	// offOnly: only false is accepted; true names what is missing.
	offOnly string
	// ignored: accepted and logged as having no effect.
	ignored bool
}

var rocketmqOnly = map[string]rocketmqKey{
	"mapedFileSizeCommitLog": {alias: "mappedFileSizeCommitLog"}, // RocketMQ 4's spelling

	"storePathCommitLog":    {storeDir: "commitlog"},
	"storePathConsumeQueue": {storeDir: "consumequeue"},
	"storePathIndex":        {storeDir: "index"},

	"aclEnable":             {offOnly: "Gantry has no access control (ACL) yet"},
	"enableDLegerCommitLog": {offOnly: "Gantry has no DLedger replication"},
	"transientStorePoolEnable": {
		offOnly: "Gantry writes the commit log directly and chooses how itself"},
}

// Tuning keys of RocketMQ's thread pools, queues, Netty and flushing,
// which Gantry has no equivalent of.
func init() {
	for _, k := range []string{
		"sendMessageThreadPoolNums", "pullMessageThreadPoolNums", "queryMessageThreadPoolNums",
		"adminBrokerThreadPoolNums", "clientManageThreadPoolNums", "consumerManageThreadPoolNums",
		"heartbeatThreadPoolNums", "endTransactionThreadPoolNums", "processReplyMessageThreadPoolNums",
		"sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity",
		"clientManagerThreadPoolQueueCapacity", "consumerManagerThreadPoolQueueCapacity",
		"heartbeatThreadPoolQueueCapacity", "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue",
		"waitTimeMillsInHeartbeatQueue", "osPageCacheBusyTimeOutMills", "useReentrantLockWhenPutMessage",
		"serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
		"serverSocketSndBufSize", "serverSocketRcvBufSize", "serverPooledByteBufAllocatorEnable",
		"useEpollNativeSelector", "clientWorkerThreads", "clientCallbackExecutorThreads",
		"flushIntervalCommitLog", "flushCommitLogLeastPages", "flushCommitLogThoroughInterval",
		"flushIntervalConsumeQueue", "flushConsumeQueueLeastPages", "flushConsumeQueueThoroughInterval",
		"commitIntervalCommitLog", "commitCommitLogLeastPages", "commitCommitLogThoroughInterval",
		"transientStorePoolSize", "warmMapedFileEnable", "mapedFileSizeConsumeQueue",
		"mappedFileSizeConsumeQueue", "destroyMapedFileIntervalForcibly", "redeleteHangedFileInterval",
		"cleanFileForciblyEnable", "cleanResourceInterval", "deleteCommitLogFilesInterval",
		"deleteConsumeQueueFilesInterval", "maxTransferBytesOnMessageInMemory",
		"maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInDisk",
		"maxTransferCountOnMessageInDisk", "accessMessageInMemoryMaxRatio", "messageIndexEnable",
		"brokerIP2", "enablePropertyFilter", "filterServerNums",
		"traceTopicEnable", "msgTraceTopicName",
	} {
		rocketmqOnly[k] = rocketmqKey{ignored: true}
	}
}

// rocketmqKeys is what a broker.conf's RocketMQ-only keys left to do.
type rocketmqKeys struct {
	ignored    []string          // "broker.conf line 12: sendMessageThreadPoolNums"
	storePaths map[string]string // key: where and value, checked by Validate
}

func (r *rocketmqKeys) parse(c *Config, where, k, v string, rk rocketmqKey) error {
	switch {
	case rk.alias != "":
		if err := setters[rk.alias](c, v); err != nil {
			return fmt.Errorf("%s (RocketMQ's spelling of %s): bad value %q: %w", k, rk.alias, v, err)
		}
	case rk.storeDir != "":
		if r.storePaths == nil {
			r.storePaths = map[string]string{}
		}
		r.storePaths[k] = v
	case rk.offOnly != "":
		var on bool
		if err := parseBool(v, &on); err != nil {
			return fmt.Errorf("%s: bad value %q: %w", k, v, err)
		}
		if on {
			return fmt.Errorf("%s=true: %s; remove the key or set it to false", k, rk.offOnly)
		}
	default:
		r.ignored = append(r.ignored, where+": "+k)
	}
	return nil
}

// validate checks that the RocketMQ store paths name the directories
// Gantry keeps under storePathRootDir.
func (r rocketmqKeys) validate(c Config, bad badFunc) {
	for _, k := range slices.Sorted(maps.Keys(r.storePaths)) {
		want := filepath.Join(c.StorePathRootDir, rocketmqOnly[k].storeDir)
		if filepath.Clean(r.storePaths[k]) != want {
			bad("%s %q: Gantry keeps it in storePathRootDir/%s (%s): remove the key or move storePathRootDir",
				k, r.storePaths[k], rocketmqOnly[k].storeDir, want)
		}
	}
}

// logIgnored logs the RocketMQ keys that have no effect here, once.
func (r rocketmqKeys) logIgnored(c Config) {
	if c.PageCacheWrites {
		c.Logger.Warn("pageCacheWrites is deprecated and has no effect: the commit log chooses how it writes; remove the key (docs/STORAGE.md)")
	}
	if len(r.ignored) > 0 {
		c.Logger.Warn("broker.conf: RocketMQ keys without an effect in Gantry, ignored", "keys", strings.Join(r.ignored, "; "))
	}
}
