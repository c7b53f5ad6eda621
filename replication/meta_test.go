package replication_test

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication"
)

// fakeMeta is a MetaSource whose snapshot the test sets.
type fakeMeta struct {
	mu      sync.Mutex
	version uint64
	snap    []byte
	err     error
	taken   int // MetaSnapshot calls
}

func (f *fakeMeta) set(snap []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	f.snap = snap
}

func (f *fakeMeta) MetaVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

func (f *fakeMeta) MetaSnapshot() (uint64, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.taken++
	return f.version, f.snap, f.err
}

// metaSink records the snapshots a slave takes.
type metaSink struct {
	mu    sync.Mutex
	snaps [][]byte
	fail  error
}

func (s *metaSink) take(snap []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps = append(s.snaps, bytes.Clone(snap))
	return s.fail
}

func (s *metaSink) last() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snaps) == 0 {
		return nil
	}
	return s.snaps[len(s.snaps)-1]
}

// A slave gets the master's metadata when it connects and again after
// each change, in chunks when a snapshot is larger than a frame, while the
// log streams beside it.
func TestMetadataReachesTheSlave(t *testing.T) {
	src := &fakeMeta{}
	src.set([]byte(`{"topics":1}`))
	mcfg := masterConfig(t)
	mcfg.Meta, mcfg.MetaInterval = src, 20*time.Millisecond
	mlog := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	master := startMaster(t, mcfg, mlog)

	sink := &metaSink{}
	scfg := slaveConfig(t, master.Addr().String())
	scfg.OnMeta = sink.take
	scfg.MaxFrameBytes = 4 << 10 // a snapshot larger than this goes in chunks
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	slave := startSlave(t, scfg, replica)

	require.Eventually(t, func() bool { return bytes.Equal(sink.last(), []byte(`{"topics":1}`)) }, patience, 5*time.Millisecond)

	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16,000 bytes: 4 chunks
	src.set(big)
	appendN(t, mlog, 0, 20, 100)
	require.Eventually(t, func() bool { return bytes.Equal(sink.last(), big) }, patience, 5*time.Millisecond)
	waitCaughtUp(t, mlog, replica)
	requireSameBytes(t, mlog, replica)
	assert.GreaterOrEqual(t, slave.Status().MetaSnapshots, 2)

	// An unchanged version sends nothing more.
	sink.mu.Lock()
	n := len(sink.snaps)
	sink.mu.Unlock()
	appendN(t, mlog, 20, 5, 100)
	waitCaughtUp(t, mlog, replica)
	time.Sleep(5 * mcfg.MetaInterval) // several looks at the version
	sink.mu.Lock()
	assert.Equal(t, n, len(sink.snaps), "snapshots sent without a change")
	sink.mu.Unlock()
}

// NotifyMeta has a change sent at once, without waiting for
// MetaInterval; a change without it waits for the interval.
func TestNotifyMetaSendsAtOnce(t *testing.T) {
	src := &fakeMeta{}
	src.set([]byte(`{"topics":1}`))
	mcfg := masterConfig(t)
	mcfg.Meta, mcfg.MetaInterval = src, time.Hour
	mlog := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	master := startMaster(t, mcfg, mlog)
	sink := &metaSink{}
	scfg := slaveConfig(t, master.Addr().String())
	scfg.OnMeta = sink.take
	startSlave(t, scfg, openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush))
	require.Eventually(t, func() bool { return bytes.Equal(sink.last(), []byte(`{"topics":1}`)) }, patience, 5*time.Millisecond)

	src.set([]byte(`{"topics":2}`))
	time.Sleep(100 * time.Millisecond) // the streams look again only within the hour
	assert.Equal(t, []byte(`{"topics":1}`), sink.last(), "a change without NotifyMeta waits for MetaInterval")
	master.NotifyMeta()
	require.Eventually(t, func() bool { return bytes.Equal(sink.last(), []byte(`{"topics":2}`)) }, patience, 5*time.Millisecond)
}

// A snapshot the slave's OnMeta refuses does not stop the log, and a
// failing MetaSnapshot on the master neither.
func TestMetadataFailuresDoNotStopTheLog(t *testing.T) {
	src := &fakeMeta{err: errors.New("disk on fire")}
	src.set([]byte("x"))
	mcfg := masterConfig(t)
	mcfg.Meta, mcfg.MetaInterval = src, 20*time.Millisecond
	mlog := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	master := startMaster(t, mcfg, mlog)

	sink := &metaSink{fail: errors.New("refused")}
	scfg := slaveConfig(t, master.Addr().String())
	scfg.OnMeta = sink.take
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	slave := startSlave(t, scfg, replica)

	appendN(t, mlog, 0, 10, 100)
	waitCaughtUp(t, mlog, replica)
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	src.set([]byte("y"))
	require.Eventually(t, func() bool { return bytes.Equal(sink.last(), []byte("y")) }, patience, 5*time.Millisecond)
	appendN(t, mlog, 10, 10, 100)
	waitCaughtUp(t, mlog, replica)
	assert.Zero(t, slave.Status().MetaSnapshots, "refused snapshots are not counted")
	assert.True(t, slave.Status().Connected)
}

// Forged metadata frames are refused: a snapshot larger than the slave's
// limit (before anything is allocated for it), a chunk out of place, a
// chunk without the first one, and a body too short for its length.
func TestSlaveRefusesBadMetadataFrames(t *testing.T) {
	meta := func(off int64, total uint32, chunk []byte) []byte {
		body := append([]byte{byte(total >> 24), byte(total >> 16), byte(total >> 8), byte(total)}, chunk...)
		return append(replication.AppendFrameHeader(nil, replication.FrameHeader{Type: replication.FrameMeta, Offset: off, BodyLen: uint32(len(body))}), body...)
	}
	cases := []struct {
		name   string
		frames [][]byte
		want   string
	}{
		{"too large", [][]byte{meta(0, 1<<30, []byte("a"))}, "at most 1024 taken"},
		{"out of place", [][]byte{meta(0, 10, []byte("abc")), meta(5, 10, []byte("fgh"))}, "3 bytes of the snapshot received"},
		{"no first chunk", [][]byte{meta(3, 10, []byte("abc"))}, "without the snapshot's first chunk"},
		{"length changes", [][]byte{meta(0, 10, []byte("abc")), meta(3, 11, []byte("def"))}, "its first chunk 10"},
		{"past the end", [][]byte{meta(0, 4, []byte("abc")), meta(3, 4, []byte("def"))}, "runs past the snapshot's 4"},
		{"empty chunk", [][]byte{replication.AppendFrameHeader(nil, replication.FrameHeader{Type: replication.FrameMeta, BodyLen: 4})}, "want more than 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fm := startFakeMaster(t, func(conn net.Conn) {
				_, _ = replication.ReadHello(conn)
				_, _ = conn.Write(replication.AppendWelcome(nil, replication.Welcome{Version: replication.Version, SegmentBytes: segBytes}))
				for _, f := range tc.frames {
					if _, err := conn.Write(f); err != nil {
						return
					}
				}
				_, _ = conn.Read(make([]byte, 64)) // until the slave hangs up
			})
			sink := &metaSink{}
			scfg := slaveConfig(t, fm.addr())
			scfg.OnMeta, scfg.MaxMetaBytes = sink.take, 1024
			slave := startSlave(t, scfg, openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush))
			require.Eventually(t, func() bool {
				err := slave.Status().LastErr
				return err != nil && errors.Is(err, replication.ErrProtocol)
			}, patience, 5*time.Millisecond)
			assert.Contains(t, slave.Status().LastErr.Error(), tc.want)
			sink.mu.Lock()
			assert.Empty(t, sink.snaps)
			sink.mu.Unlock()
		})
	}
}
