package replication_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/replication"
)

// BenchmarkCatchUp measures a fresh slave copying a master's 64 MiB of
// 1 KiB records over loopback, both logs under async flush with 64 MiB
// segments (MB/s is the copy's rate):
//
//	go test -run=^$ -bench=CatchUp -benchtime=5x ./replication
func BenchmarkCatchUp(b *testing.B) {
	const seg = 64 << 20
	master, err := commitlog.Open(b.Context(), commitlog.Config{Dir: testutil.BenchDir(b), SegmentBytes: seg})
	require.NoError(b, err)
	defer master.Close()
	var batch []byte
	for i := range 64 {
		batch = append(batch, record(b, i, 900)...)
	}
	for master.MaxOffset() < 64<<20 {
		_, err := master.Append(b.Context(), batch, nil)
		require.NoError(b, err)
	}
	m, err := replication.NewMaster(replication.MasterConfig{Addr: "127.0.0.1:0"}, master)
	require.NoError(b, err)
	defer m.Close()
	end := master.MaxOffset()
	b.SetBytes(end)
	for b.Loop() {
		b.StopTimer()
		dir := testutil.BenchDir(b)
		replica, err := commitlog.Open(b.Context(), commitlog.Config{Dir: dir, SegmentBytes: seg})
		require.NoError(b, err)
		b.StartTimer()
		s, err := replication.StartSlave(replication.SlaveConfig{MasterAddr: m.Addr().String()}, replica)
		require.NoError(b, err)
		for replica.MaxOffset() < end {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		require.NoError(b, s.Close())
		require.NoError(b, replica.Close())
		require.NoError(b, os.RemoveAll(dir))
		b.StartTimer()
	}
}
