package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/commitlog"
)

// rocketmqConf is a broker.conf as RocketMQ's deployment guide writes
// one: the nameserver at RocketMQ's port, its old spelling of the segment
// size, store paths, and tuning keys Gantry has no use for.
const rocketmqConf = `namesrvAddr=127.0.0.1:9876
brokerClusterName=rocketmq-cluster
brokerName=broker-a
brokerId=0
deleteWhen=04
fileReservedTime=48
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
listenPort=10911
bindAddress=0.0.0.0
storePathRootDir=/app/rocketmq/store-a
storePathCommitLog=/app/rocketmq/store-a/commitlog
storePathConsumeQueue=/app/rocketmq/store-a/consumequeue/
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
mapedFileSizeCommitLog=1073741824
mapedFileSizeConsumeQueue=300000
destroyMapedFileIntervalForcibly=120000
redeleteHangedFileInterval=120000
diskMaxUsedSpaceRatio=88
maxMessageSize=65536
sendMessageThreadPoolNums=128
useReentrantLockWhenPutMessage=true
waitTimeMillsInSendQueue=300
aclEnable=false
`

func TestParseRocketMQBrokerConf(t *testing.T) {
	var c broker.Config
	require.NoError(t, broker.ParseConfig(strings.NewReader(rocketmqConf), &c))
	require.NoError(t, c.Validate())
	assert.Equal(t, []string{"127.0.0.1:9876"}, c.NamesrvAddr)
	assert.Equal(t, "rocketmq-cluster", c.BrokerClusterName)
	assert.Equal(t, int64(1<<30), c.MappedFileSizeCommitLog, "mapedFileSizeCommitLog is mappedFileSizeCommitLog")
	assert.Equal(t, commitlog.AsyncFlush, c.FlushDiskType)
	assert.Equal(t, 88, c.DiskMaxUsedSpaceRatio)
	assert.Equal(t, []string{
		"broker.conf line 17: mapedFileSizeConsumeQueue", "broker.conf line 18: destroyMapedFileIntervalForcibly",
		"broker.conf line 19: redeleteHangedFileInterval", "broker.conf line 22: sendMessageThreadPoolNums",
		"broker.conf line 23: useReentrantLockWhenPutMessage", "broker.conf line 24: waitTimeMillsInSendQueue",
	}, broker.IgnoredRocketMQKeys(c))
}

// What Gantry cannot honour is refused, naming the key and the fix; a
// key nobody knows is still an error.
func TestRocketMQKeysRefused(t *testing.T) {
	for _, tt := range []struct{ name, conf, want string }{
		{"ACL on", "aclEnable=true\n", "broker.conf line 1: aclEnable=true: Gantry has no access control (ACL) yet; remove the key or set it to false"},
		{"DLedger on", "enableDLegerCommitLog=true\n", "enableDLegerCommitLog=true: Gantry has no DLedger replication"},
		{"bad bool", "aclEnable=yes\n", `aclEnable: bad value "yes": want true or false`},
		{"bad alias value", "mapedFileSizeCommitLog=1G\n", `mapedFileSizeCommitLog (RocketMQ's spelling of mappedFileSizeCommitLog): bad value "1G"`},
		{"typo", "sendMessageThreadPoolNum=8\n", `unknown key "sendMessageThreadPoolNum"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c broker.Config
			err := broker.ParseConfig(strings.NewReader(tt.conf), &c)
			require.ErrorIs(t, err, broker.ErrInvalidConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	var c broker.Config
	require.NoError(t, broker.ParseConfig(strings.NewReader("storePathRootDir=/data/store\nstorePathCommitLog=/data/commitlog\n"), &c))
	assert.ErrorContains(t, c.Validate(), `storePathCommitLog "/data/commitlog": Gantry keeps it in storePathRootDir/commitlog (/data/store/commitlog): remove the key or move storePathRootDir`)
}

// ParseConfigFile's errors name the file it read.
func TestParseConfigFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b1.properties")
	require.NoError(t, os.WriteFile(path, []byte("brokerName=b\nlistenPort=x\n"), 0o644))
	var c broker.Config
	err := broker.ParseConfigFile(path, &c)
	require.ErrorIs(t, err, broker.ErrInvalidConfig)
	assert.ErrorContains(t, err, path+` line 2: listenPort: bad value "x"`)
	err = broker.ParseConfigFile(filepath.Join(t.TempDir(), "missing.conf"), &c)
	require.ErrorIs(t, err, broker.ErrInvalidConfig)
	assert.ErrorContains(t, err, "missing.conf: no such file or directory")
}

// bindAddress is where the remoting port listens and the host of the
// other listeners' defaults (and brokerIP1's).
func TestBindAddress(t *testing.T) {
	g, h, r := broker.Config{}.ListenAddrs()
	assert.Equal(t, [3]string{":8081", ":5557", ":10911"}, [3]string{g, h, r}, "every interface by default")
	c := broker.Config{BindAddress: "127.0.0.2", ListenPort: 20911}
	g, h, r = c.ListenAddrs()
	assert.Equal(t, [3]string{"127.0.0.2:8081", "127.0.0.2:5557", "127.0.0.2:20911"}, [3]string{g, h, r})
	assert.Equal(t, "127.0.0.2", c.WithDefaults().BrokerIP1)
	c = broker.Config{BindAddress: "127.0.0.2", GRPCListenAddr: ":18081", BrokerIP1: "10.0.0.1"}
	g, _, _ = c.ListenAddrs()
	assert.Equal(t, ":18081", g, "grpcListenAddr wins")
	assert.Equal(t, "10.0.0.1", c.WithDefaults().BrokerIP1)
	assert.Equal(t, "127.0.0.1", broker.Config{BindAddress: "0.0.0.0"}.WithDefaults().BrokerIP1)
	assert.ErrorContains(t, broker.Config{BindAddress: "localhost"}.Validate(), `bindAddress "localhost": want an IP address (0.0.0.0: every interface)`)
}
