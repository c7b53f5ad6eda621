package broker_test

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/commitlog"
)

const fullConf = `# a broker.conf with every key
brokerClusterName = ClusterX
brokerName=broker-b
brokerId=0

! Java-style comment
namesrvAddr=10.0.0.1:9876; 10.0.0.2:9876
listenPort=20911
bindAddress=0.0.0.0
grpcListenAddr=127.0.0.1:18081
httpListenAddr=:15557
pprofEnable=true
brokerIP1=192.168.1.5
storePathRootDir=/data/store
mappedFileSizeCommitLog=65536
flushDiskType=SYNC_FLUSH
pageCacheWrites=true
brokerRole=ASYNC_MASTER
fileReservedTime=48
deleteWhen=03;04
diskMaxUsedSpaceRatio=80
diskSpaceCleanForciblyRatio=88
diskSpaceWarningLevelRatio=95
maxHashSlotNum=500000
maxIndexNum=2000000
skipCorrupt=true
autoCreateTopicEnable=true
defaultTopicQueueNums=4
autoCreateSubscriptionGroup=false
maxMessageSize=1048576
maxPropertiesSize=16384
longPollingMaxHold=20000
flushConsumerOffsetInterval=2500
registerNameServerPeriod=10s
	channelExpiredTimeout = 60000   
messageDelayLevel=1s 30s  2m 1h 1d
timerMaxDelay=3600
dlqRetentionHours=24
duplicationWindow=2m
maxGroupsPerHeartbeat=50
maxConsumerGroups=2000
memoryLimit=2GiB
haListenPort=20912
haMasterAddress=10.0.0.9:10912
inSyncReplicas=3
slaveTimeout=5000
haMaxGapNotInSync=1048576
slaveReadEnable=true
enableControllerMode=false
controllerAddr=10.0.0.7:9878;10.0.0.8:9878
brokerHeartbeatInterval=2000
masterLeaseMillis=6000
accessMessageInMemoryMaxRatio=30
haMaxTimeSlaveNotCatchup=5000
authenticationEnabled=true
authorizationEnabled=false
aclFile=/etc/gantry/acl.json
innerClientAuthenticationCredentials={"accessKey":"broker-b","secretKey":"clustersecret"}
authWindowMillis=30000
allowRemoteWithoutAuth=true
tls.server.mode=disabled
tls.server.certPath=/etc/gantry/server.pem
tls.server.keyPath=/etc/gantry/server-key.pem
tls.server.trustCertPath=/etc/gantry/clients-ca.pem
tls.server.need.client.auth=optional
tls.enable=false
tls.client.certPath=/etc/gantry/client.pem
tls.client.keyPath=/etc/gantry/client-key.pem
tls.client.trustCertPath=/etc/gantry/ca.pem
tls.client.authServer=false
`

func TestParseConfigEveryKey(t *testing.T) {
	for _, k := range broker.ConfigKeys {
		assert.Regexp(t, `(?m)^\s*`+k+`\s*=`, fullConf, "fullConf must set %s", k)
	}
	var c broker.Config
	require.NoError(t, broker.ParseConfig(strings.NewReader(fullConf), &c))
	f := false
	want := broker.Config{
		BrokerClusterName: "ClusterX", BrokerName: "broker-b", BrokerID: 0,
		NamesrvAddr: []string{"10.0.0.1:9876", "10.0.0.2:9876"}, ListenPort: 20911,
		BindAddress: "0.0.0.0", GRPCListenAddr: "127.0.0.1:18081", HTTPListenAddr: ":15557", PprofEnable: true, BrokerIP1: "192.168.1.5",
		StorePathRootDir: "/data/store", MappedFileSizeCommitLog: 65536, FlushDiskType: commitlog.SyncFlush,
		PageCacheWrites: true, BrokerRole: broker.AsyncMaster, FileReservedTime: 48 * time.Hour, DeleteWhen: "03;04",
		DiskMaxUsedSpaceRatio: 80, DiskSpaceCleanForciblyRatio: 88, DiskSpaceWarningLevelRatio: 95,
		MaxHashSlotNum: 500_000, MaxIndexNum: 2_000_000, SkipCorrupt: true,
		AutoCreateTopicEnable: true, DefaultTopicQueueNums: 4,
		AutoCreateSubscriptionGroup: &f, MaxMessageSize: 1 << 20, MaxPropertiesSize: 16 << 10,
		LongPollingMaxHold: 20 * time.Second, FlushConsumerOffsetInterval: 2500 * time.Millisecond,
		RegisterNameServerPeriod: 10 * time.Second, ChannelExpiredTimeout: time.Minute,
		MessageDelayLevel: []time.Duration{time.Second, 30 * time.Second, 2 * time.Minute, time.Hour, 24 * time.Hour},
		TimerMaxDelay:     time.Hour, DLQRetention: 24 * time.Hour,
		DuplicationWindow: 2 * time.Minute, MaxGroupsPerHeartbeat: 50, MaxConsumerGroups: 2000,
		MemoryLimit:  2 << 30,
		HAListenPort: 20912, HAMasterAddress: "10.0.0.9:10912", InSyncReplicas: 3, SlaveTimeout: 5 * time.Second,
		HAMaxGapNotInSync: 1 << 20, SlaveReadEnable: true,
		HAConfig: broker.HAConfig{ControllerAddr: []string{"10.0.0.7:9878", "10.0.0.8:9878"}, BrokerHeartbeatInterval: 2 * time.Second,
			MasterLease: 6 * time.Second, AccessMessageInMemoryMaxRatio: 30, HAMaxTimeSlaveNotCatchup: 5 * time.Second},
		AuthConfig: broker.AuthConfig{AuthenticationEnabled: true, SkipAuthorization: true, ACLFile: "/etc/gantry/acl.json",
			InnerAccessKey: "broker-b", InnerSecretKey: "clustersecret", AuthWindow: 30 * time.Second, AllowRemoteWithoutAuth: true},
		TLSConfig: broker.TLSConfig{TLSServerCertPath: "/etc/gantry/server.pem", TLSServerKeyPath: "/etc/gantry/server-key.pem",
			TLSServerTrustCertPath: "/etc/gantry/clients-ca.pem", TLSServerNeedClientAuth: broker.TLSClientAuthOptional,
			TLSClientCertPath: "/etc/gantry/client.pem", TLSClientKeyPath: "/etc/gantry/client-key.pem",
			TLSClientTrustCertPath: "/etc/gantry/ca.pem", TLSClientSkipVerify: true},
	}
	assert.Equal(t, want, c)
	assert.NoError(t, c.Validate())
}

func TestParseConfigKeepsUnsetFields(t *testing.T) {
	c := broker.Config{BrokerName: "from-flags", ListenPort: 1234}
	require.NoError(t, broker.ParseConfig(strings.NewReader("listenPort=4321\nlistenPort=5555\n"), &c))
	assert.Equal(t, "from-flags", c.BrokerName)
	assert.Equal(t, 5555, c.ListenPort, "the last value of a repeated key wins")
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, conf string
		want       []string
	}{
		{"unknown key", "brokerName=a\n\n# c\n\n\n\nflushDiskTyp=SYNC_FLUSH\n", []string{`broker.conf line 7: unknown key "flushDiskTyp"`}},
		{"no equals", "brokerName\n", []string{`broker.conf line 1: want key=value, got "brokerName"`}},
		{"empty key", "=x\n", []string{"broker.conf line 1: want key=value"}},
		{"bad int", "listenPort=abc\n", []string{`broker.conf line 1: listenPort: bad value "abc": want an integer`}},
		{"int32 overflow", "defaultTopicQueueNums=99999999999\n", []string{`defaultTopicQueueNums: bad value "99999999999"`}},
		{"bad bool", "autoCreateTopicEnable=yes\n", []string{`autoCreateTopicEnable: bad value "yes": want true or false`}},
		{"bad flush type", "flushDiskType=SOMETIMES\n", []string{`flushDiskType: bad value "SOMETIMES": want ASYNC_FLUSH or SYNC_FLUSH`}},
		{"bad role", "brokerRole=LEADER\n", []string{`brokerRole: bad value "LEADER"`}},
		{"bad duration", "longPollingMaxHold=soon\n", []string{`longPollingMaxHold: bad value "soon": want an integer (milliseconds)`}},
		{"bad hours", "fileReservedTime=3d\n", []string{`fileReservedTime: bad value "3d": want an integer (hours)`}},
		{"bad deleteWhen", "deleteWhen=25\n", []string{`deleteWhen: bad value "25"`}},
		{"every bad line", "listenPort=x\nbrokerId=y\nnope=1\n", []string{"line 1: listenPort", "line 2: brokerId", `line 3: unknown key "nope"`}},
		{"empty delay levels", "messageDelayLevel=\n", []string{`messageDelayLevel: bad value "": want at least one level`}},
		{"delay level without unit", "messageDelayLevel=1s 5\n", []string{`messageDelayLevel: bad value "1s 5": level 2 "5": want a positive count and a unit s, m, h or d`}},
		{"delay level bad unit", "messageDelayLevel=1s 5ms\n", []string{`level 2 "5ms"`}},
		{"delay level zero", "messageDelayLevel=0s\n", []string{`level 1 "0s"`}},
		{"delay level negative", "messageDelayLevel=1s -5m\n", []string{`level 2 "-5m"`}},
		{"delay level overflow", "messageDelayLevel=99999999999999d\n", []string{`level 1 "99999999999999d"`}},
		{"too many delay levels", "messageDelayLevel=" + strings.Repeat("1s ", 1025) + "\n", []string{"1025 levels, at most 1024"}},
		{"bad timerMaxDelay", "timerMaxDelay=3days\n", []string{`timerMaxDelay: bad value "3days": want an integer (seconds) or a duration like 15s`}},
		{"bad dlqRetentionHours", "dlqRetentionHours=3d\n", []string{`dlqRetentionHours: bad value "3d": want an integer (hours)`}},
		{"bad memoryLimit", "memoryLimit=2 lots\n", []string{`memoryLimit: bad value "2 lots": memory limit "2 lots": want bytes, a size like 2GiB`}},
		{"negative memoryLimit", "memoryLimit=-5\n", []string{`memoryLimit: bad value "-5"`}},
		{"bad inner credentials", "innerClientAuthenticationCredentials=broker:secret\n", []string{`innerClientAuthenticationCredentials: bad value "broker:secret": want {"accessKey"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c broker.Config
			err := broker.ParseConfig(strings.NewReader(tt.conf), &c)
			require.ErrorIs(t, err, broker.ErrInvalidConfig)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := broker.Config{}.WithDefaults()
	assert.Equal(t, "DefaultCluster", c.BrokerClusterName)
	assert.Equal(t, "broker-a", c.BrokerName)
	assert.Equal(t, int64(0), c.BrokerID)
	assert.Empty(t, c.NamesrvAddr)
	assert.Equal(t, 10911, c.ListenPort)
	assert.Equal(t, ":8081", c.GRPCListenAddr)
	assert.Equal(t, ":5557", c.HTTPListenAddr)
	assert.Equal(t, "127.0.0.1", c.BrokerIP1)
	assert.Equal(t, "./gantry-data/store", c.StorePathRootDir)
	assert.Equal(t, int64(1<<30), c.MappedFileSizeCommitLog)
	assert.Equal(t, commitlog.AsyncFlush, c.FlushDiskType)
	assert.Equal(t, broker.AsyncMaster, c.BrokerRole)
	assert.Equal(t, 72*time.Hour, c.FileReservedTime)
	assert.Equal(t, "04", c.DeleteWhen)
	assert.Equal(t, 75, c.DiskMaxUsedSpaceRatio)
	assert.Equal(t, 85, c.DiskSpaceCleanForciblyRatio)
	assert.Equal(t, 90, c.DiskSpaceWarningLevelRatio)
	assert.Equal(t, 5_000_000, c.MaxHashSlotNum)
	assert.Equal(t, 20_000_000, c.MaxIndexNum)
	assert.False(t, c.SkipCorrupt)
	assert.False(t, c.AutoCreateTopicEnable)
	assert.Equal(t, int32(8), c.DefaultTopicQueueNums)
	require.NotNil(t, c.AutoCreateSubscriptionGroup)
	assert.True(t, *c.AutoCreateSubscriptionGroup)
	assert.Equal(t, 4<<20, c.MaxMessageSize)
	assert.Equal(t, 32<<10, c.MaxPropertiesSize)
	assert.Equal(t, 15*time.Second, c.LongPollingMaxHold)
	assert.Equal(t, 5*time.Second, c.FlushConsumerOffsetInterval)
	assert.Equal(t, 30*time.Second, c.RegisterNameServerPeriod)
	assert.Equal(t, 120*time.Second, c.ChannelExpiredTimeout)
	assert.Equal(t, 60*time.Second, c.QueueLockTTL)
	assert.Equal(t, []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
		7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour}, c.MessageDelayLevel)
	assert.Equal(t, 72*time.Hour, c.TimerMaxDelay)
	assert.Equal(t, 72*time.Hour, c.DLQRetention)
	assert.Equal(t, 5*time.Minute, c.DuplicationWindow)
	assert.Equal(t, 1000, c.MaxGroupsPerHeartbeat)
	assert.Equal(t, 10000, c.MaxConsumerGroups)
	assert.Equal(t, 0, c.HAListenPort, "0: listenPort+1")
	assert.Equal(t, ":10912", c.HAListenAddr())
	assert.Empty(t, c.HAMasterAddress)
	assert.Equal(t, 2, c.InSyncReplicas)
	assert.Equal(t, 3*time.Second, c.SlaveTimeout)
	assert.Equal(t, int64(256<<20), c.HAMaxGapNotInSync)
	assert.False(t, c.SlaveReadEnable)
	assert.NotNil(t, c.Now)
	assert.NotNil(t, c.Logger)
	assert.NoError(t, broker.Config{}.Validate())
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := broker.Config{
		BrokerClusterName: "bad name", BrokerName: "b%", BrokerID: 2, NamesrvAddr: []string{"nohost", ":9876"},
		ListenPort: 70000, GRPCListenAddr: "8081", HTTPListenAddr: ":99999", BrokerIP1: "my-host",
		MappedFileSizeCommitLog: -1, DeleteWhen: "4am", DiskMaxUsedSpaceRatio: 99, DefaultTopicQueueNums: 2000,
		MaxMessageSize: -1, MaxPropertiesSize: -1, LongPollingMaxHold: -1, FlushConsumerOffsetInterval: -1,
		RegisterNameServerPeriod: -1, ChannelExpiredTimeout: -1, FileReservedTime: -time.Hour, QueueLockTTL: -1,
		MessageDelayLevel: []time.Duration{time.Second, 0, -time.Minute}, TimerMaxDelay: -1,
		DLQRetention: -time.Hour, MaxGroupsPerHeartbeat: -1, MaxConsumerGroups: -1,
		DiskSpaceCleanForciblyRatio: 5, DiskSpaceWarningLevelRatio: 101, MaxHashSlotNum: -1, MaxIndexNum: 1,
	}
	err := c.Validate()
	require.ErrorIs(t, err, broker.ErrInvalidConfig)
	for _, w := range []string{"brokerClusterName", "brokerName", "brokerId 2", `namesrvAddr "nohost"`, `namesrvAddr ":9876"`,
		"listenPort 70000", "grpcListenAddr", "httpListenAddr", "brokerIP1", "mappedFileSizeCommitLog", "deleteWhen",
		"diskMaxUsedSpaceRatio 99", "defaultTopicQueueNums 2000", "maxMessageSize", "maxPropertiesSize",
		"longPollingMaxHold", "flushConsumerOffsetInterval", "registerNameServerPeriod", "channelExpiredTimeout",
		"fileReservedTime", "QueueLockTTL", "messageDelayLevel: level 2 is 0s", "messageDelayLevel: level 3 is -1m0s",
		"timerMaxDelay -1ns", "dlqRetentionHours -1h0m0s", "maxGroupsPerHeartbeat -1", "maxConsumerGroups -1",
		"diskSpaceCleanForciblyRatio 5: want 10..100", "diskSpaceWarningLevelRatio 101: want 10..100",
		"maxHashSlotNum -1", "maxIndexNum 1: want 2.."} {
		assert.ErrorContains(t, err, w)
	}
	// Clients' receive limits are sized for message.MaxBodyBytes: a larger
	// body would be stored but unreadable.
	assert.ErrorContains(t, broker.Config{MaxMessageSize: 4<<20 + 1}.Validate(), "maxMessageSize 4194305: want 1..4194304")
	assert.NoError(t, broker.Config{MaxMessageSize: 4 << 20}.Validate())
	assert.ErrorContains(t, broker.Config{MessageDelayLevel: make([]time.Duration, 1025)}.Validate(), "messageDelayLevel: 1025 levels, want 1..1024")
}

func TestStoreConfig(t *testing.T) {
	c := broker.Config{
		StorePathRootDir: "/r", BrokerIP1: "10.1.2.3", ListenPort: 20911, MappedFileSizeCommitLog: 1 << 20,
		FlushDiskType: commitlog.SyncFlush, FileReservedTime: time.Hour, DeleteWhen: "01;02",
		DiskMaxUsedSpaceRatio: 60, FlushConsumerOffsetInterval: time.Second,
		DiskSpaceCleanForciblyRatio: 70, DiskSpaceWarningLevelRatio: 80, MaxHashSlotNum: 1000, MaxIndexNum: 4000,
		SkipCorrupt: true,
	}
	sc := c.StoreConfig()
	assert.Equal(t, "/r", sc.Root)
	assert.Equal(t, netip.MustParseAddrPort("10.1.2.3:20911"), sc.StoreHost)
	assert.Equal(t, int64(1<<20), sc.Log.SegmentBytes)
	assert.Equal(t, commitlog.SyncFlush, sc.Log.FlushMode)
	assert.Equal(t, time.Hour, sc.Log.FileReservedTime)
	assert.Equal(t, "01;02", sc.Log.DeleteWhen)
	assert.InDelta(t, 0.60, sc.Log.DiskMaxUsedRatio, 1e-9)
	assert.InDelta(t, 0.70, sc.Log.DiskForceCleanRatio, 1e-9)
	assert.InDelta(t, 0.80, sc.Log.DiskFullRatio, 1e-9)
	assert.True(t, sc.Log.SkipCorrupt)
	assert.Equal(t, 1000, sc.IndexSlots)
	assert.Equal(t, 4000, sc.IndexEntries)
	assert.Equal(t, time.Second, sc.MetadataInterval)

	c.StoreOverride = smallStore
	assert.Equal(t, int64(64<<10), c.StoreConfig().Log.SegmentBytes, "StoreOverride applies last")
}

func TestParseDelayLevels(t *testing.T) {
	got, err := broker.ParseDelayLevels(broker.DefaultMessageDelayLevel)
	require.NoError(t, err)
	assert.Len(t, got, 18)
	assert.Equal(t, broker.Config{}.WithDefaults().MessageDelayLevel, got)
	got, err = broker.ParseDelayLevels("  7d\t90s ")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{7 * 24 * time.Hour, 90 * time.Second}, got, "any count of levels, any order")

	var c broker.Config
	require.NoError(t, broker.ParseConfig(strings.NewReader("timerMaxDelay=90m\n"), &c))
	assert.Equal(t, 90*time.Minute, c.TimerMaxDelay, "a Go duration")
}

// pageCacheWrites is still accepted, has no effect on how the commit log
// writes, and Open says so.
func TestPageCacheWritesIsDeprecated(t *testing.T) {
	var logs strings.Builder
	cfg := testConfig(t)
	cfg.PageCacheWrites = true
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	assert.Equal(t, testConfig(t).StoreConfig().Log, cfg.StoreConfig().Log, "no effect on the commit log's configuration")
	b, err := broker.Open(t.Context(), cfg)
	require.NoError(t, err)
	require.NoError(t, b.Close(t.Context()))
	assert.Contains(t, logs.String(), "pageCacheWrites is deprecated and has no effect")
}

func TestConfigReplication(t *testing.T) {
	tests := []struct {
		name string
		c    broker.Config
		want string // "" valid, else a fragment of the error
	}{
		{"async master", broker.Config{BrokerRole: broker.AsyncMaster}, ""},
		{"sync master", broker.Config{BrokerRole: broker.SyncMaster, InSyncReplicas: 3}, ""},
		{"slave", broker.Config{BrokerRole: broker.Slave, BrokerID: 1, HAMasterAddress: "10.0.0.1:10912"}, ""},
		{"slave without an id", broker.Config{BrokerRole: broker.Slave}, "brokerId 0: a SLAVE's brokerId is above 0"},
		{"master with an id", broker.Config{BrokerRole: broker.SyncMaster, BrokerID: 2}, "brokerId 2: a master's (SYNC_MASTER) brokerId is 0"},
		{"unknown role", broker.Config{BrokerRole: 7}, "brokerRole 7: want ASYNC_MASTER, SYNC_MASTER or SLAVE"},
		{"haListenPort out of range", broker.Config{HAListenPort: 70000}, "haListenPort 70000: want 0..65535"},
		{"haListenPort is listenPort", broker.Config{ListenPort: 20911, HAListenPort: 20911}, "haListenPort 20911: it is listenPort too"},
		{"haMasterAddress without a port", broker.Config{BrokerRole: broker.Slave, BrokerID: 1, HAMasterAddress: "10.0.0.1"}, `haMasterAddress "10.0.0.1"`},
		{"inSyncReplicas negative", broker.Config{InSyncReplicas: -1}, "inSyncReplicas -1: want 1..17"},
		{"inSyncReplicas too many", broker.Config{InSyncReplicas: 18}, "inSyncReplicas 18: want 1..17"},
		{"slaveTimeout negative", broker.Config{SlaveTimeout: -time.Second}, "slaveTimeout -1s: want at least 1ms"},
		{"haMaxGapNotInSync negative", broker.Config{HAMaxGapNotInSync: -1}, "haMaxGapNotInSync -1: want > 0"},
		{"controller mode", ctlMode(broker.SyncMaster, 2, "10.0.0.7:9878"), ""},
		{"controller mode without controllers", ctlMode(broker.SyncMaster, 2), "controllerAddr is empty"},
		{"controller mode with a bad controller", ctlMode(broker.SyncMaster, 2, "10.0.0.7"), `controllerAddr "10.0.0.7"`},
		{"controller mode with brokerId 0", ctlMode(broker.AsyncMaster, 0, "10.0.0.7:9878"), "brokerId 0: with enableControllerMode"},
		{"controller mode as SLAVE", ctlMode(broker.Slave, 1, "10.0.0.7:9878"), "brokerRole SLAVE: with enableControllerMode"},
		{"controller mode with a short lease", func() broker.Config {
			c := ctlMode(broker.SyncMaster, 1, "10.0.0.7:9878")
			c.MasterLease = time.Second
			return c
		}(), "masterLeaseMillis 1s: want at least twice brokerHeartbeatInterval (1s)"},
		{"accessMessageInMemoryMaxRatio out of range", broker.Config{HAConfig: broker.HAConfig{AccessMessageInMemoryMaxRatio: 101}},
			"accessMessageInMemoryMaxRatio 101: want 1..100"},
		{"haMaxTimeSlaveNotCatchup too short", broker.Config{HAConfig: broker.HAConfig{HAMaxTimeSlaveNotCatchup: time.Second}},
			"haMaxTimeSlaveNotCatchup 1s: want at least 2s"},
		{"half inner credentials", broker.Config{AuthConfig: broker.AuthConfig{InnerAccessKey: "broker"}},
			"innerClientAuthenticationCredentials: want both accessKey and secretKey"},
		{"weak inner credentials", broker.Config{AuthConfig: broker.AuthConfig{InnerAccessKey: "broker", InnerSecretKey: "x"}},
			"innerClientAuthenticationCredentials: user \"broker\": secretKey: want 6 to 128 characters"},
		{"short auth window", broker.Config{AuthConfig: broker.AuthConfig{AuthWindow: time.Millisecond}},
			"authWindowMillis 1ms: want at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, broker.ErrInvalidConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	assert.Equal(t, "10.1.1.1:20912", broker.Config{BindAddress: "10.1.1.1", ListenPort: 20911}.HAListenAddr())
	assert.Equal(t, ":30000", broker.Config{HAListenPort: 30000}.HAListenAddr())
}

func TestParseConfigReplicationKeys(t *testing.T) {
	tests := []struct{ line, want string }{
		{"brokerRole=MASTER", `brokerRole: bad value "MASTER": want ASYNC_MASTER, SYNC_MASTER or SLAVE`},
		{"haListenPort=x", `haListenPort: bad value "x": want an integer`},
		{"inSyncReplicas=two", `inSyncReplicas: bad value "two"`},
		{"slaveTimeout=soon", `slaveTimeout: bad value "soon"`},
		{"haMaxGapNotInSync=1GiB", `haMaxGapNotInSync: bad value "1GiB"`},
		{"slaveReadEnable=yes", `slaveReadEnable: bad value "yes": want true or false`},
	}
	for _, tt := range tests {
		var c broker.Config
		err := broker.ParseConfig(strings.NewReader(tt.line+"\n"), &c)
		require.ErrorIs(t, err, broker.ErrInvalidConfig, tt.line)
		assert.ErrorContains(t, err, tt.want)
	}
	var c broker.Config
	require.NoError(t, broker.ParseConfig(strings.NewReader("brokerRole=SLAVE\nbrokerId=2\nslaveTimeout=250\n"), &c))
	assert.Equal(t, broker.Slave, c.BrokerRole)
	assert.Equal(t, 250*time.Millisecond, c.SlaveTimeout)
	require.NoError(t, c.Validate())
}

// ctlMode is a controller-mode configuration.
func ctlMode(role broker.BrokerRole, id int64, controllers ...string) broker.Config {
	return broker.Config{BrokerRole: role, BrokerID: id, HAConfig: broker.HAConfig{EnableControllerMode: true, ControllerAddr: controllers}}
}
