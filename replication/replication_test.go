package replication_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/epoch"
)

func TestSlaveMirrorsMaster(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     commitlog.FlushMode
		maxFrame int // the slave's limit: frames of a record or two
	}{
		{"async", commitlog.AsyncFlush, 0},
		{"sync", commitlog.SyncFlush, 0},
		{"small frames", commitlog.AsyncFlush, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master := openLog(t, t.TempDir(), segBytes, tc.mode)
			replica := openLog(t, t.TempDir(), segBytes, tc.mode)
			appendN(t, master, 0, 30, 300) // ~400 B records: the log already spans segments
			m := startMaster(t, masterConfig(t), master)
			scfg := slaveConfig(t, m.Addr().String())
			scfg.MaxFrameBytes = tc.maxFrame
			s := startSlave(t, scfg, replica)

			// Appends while the slave streams: it crosses segment boundaries live.
			for i := 30; i < 150; i += 10 {
				appendN(t, master, i, 10, 300)
				m.Notify()
			}
			waitCaughtUp(t, master, replica)
			require.Greater(t, master.MaxOffset(), 4*int64(segBytes))
			requireSameBytes(t, master, replica)

			require.Eventually(t, func() bool {
				sl := m.Slaves()
				return len(sl) == 1 && sl[0].Acked == master.MaxOffset()
			}, patience, 2*time.Millisecond)
			sl := m.Slaves()[0]
			assert.Equal(t, int64(1), sl.ID)
			assert.True(t, sl.Connected)
			st := s.Status()
			assert.True(t, st.Connected)
			assert.Equal(t, 1, st.Sessions)
			assert.Equal(t, master.MaxOffset(), st.End)
		})
	}
}

func TestSlaveRestartResumesFromItsEnd(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	m := startMaster(t, masterConfig(t), master)
	rdir := t.TempDir()
	replica, err := commitlog.Open(t.Context(), commitlog.Config{Dir: rdir, SegmentBytes: segBytes, Logger: testLogger(t)})
	require.NoError(t, err)
	s, err := replication.StartSlave(slaveConfig(t, m.Addr().String()), replica)
	require.NoError(t, err)
	appendN(t, master, 0, 40, 300)
	m.Notify()
	waitCaughtUp(t, master, replica)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), replication.ErrClosed)
	end := replica.MaxOffset()
	require.NoError(t, replica.Close())

	appendN(t, master, 40, 40, 300) // while the slave is down
	m.Notify()
	replica = openLog(t, rdir, segBytes, commitlog.AsyncFlush)
	require.Equal(t, end, replica.MaxOffset(), "the replica kept what it appended")
	sink := &firstAppend{Log: replica}
	sink.first.Store(-1)
	startSlave(t, slaveConfig(t, m.Addr().String()), sink)
	waitCaughtUp(t, master, replica)
	requireSameBytes(t, master, replica)
	assert.Equal(t, end, sink.first.Load(), "the stream starts at the replica's end")
}

// firstAppend records the offset of the first AppendReplica.
type firstAppend struct {
	*commitlog.Log
	first atomic.Int64
}

func (f *firstAppend) AppendReplica(ctx context.Context, off int64, data []byte) (int64, error) {
	f.first.CompareAndSwap(-1, off)
	return f.Log.AppendReplica(ctx, off, data)
}

func TestSlaveReconnectsAfterMasterRestart(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	m1, err := replication.NewMaster(masterConfig(t), master)
	require.NoError(t, err)
	addr := m1.Addr().String()
	s := startSlave(t, slaveConfig(t, addr), replica)
	appendN(t, master, 0, 20, 300)
	m1.Notify()
	waitCaughtUp(t, master, replica)
	require.NoError(t, m1.Close())

	appendN(t, master, 20, 40, 300)
	cfg := masterConfig(t)
	cfg.Addr = addr // the same port: the slave dials it again
	cfg.Epoch = 1
	startMaster(t, cfg, master)
	waitCaughtUp(t, master, replica)
	requireSameBytes(t, master, replica)
	require.Eventually(t, func() bool { return s.Status().Epoch == 1 }, patience, 2*time.Millisecond)
	assert.GreaterOrEqual(t, s.Status().Sessions, 2)
}

func TestSegmentSizeMismatchIsRefused(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	replica := openLog(t, t.TempDir(), 2*segBytes, commitlog.AsyncFlush)
	appendN(t, master, 0, 10, 300)
	m := startMaster(t, masterConfig(t), master)
	s := startSlave(t, slaveConfig(t, m.Addr().String()), replica)

	require.Eventually(t, func() bool { return s.Status().LastErr != nil }, patience, 2*time.Millisecond)
	err := s.Status().LastErr
	require.ErrorIs(t, err, replication.ErrRefused)
	var re *replication.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "master", re.By)
	assert.Contains(t, re.Reason, "segment size is 16384 bytes, the master's 8192")
	assert.False(t, s.Status().Connected)
	assert.Zero(t, s.Status().Sessions)
	assert.Empty(t, m.Slaves())
	assert.Zero(t, replica.MaxOffset())
}

// TestSlaveRefusesBadFrames feeds a slave a master's welcome and then one
// bad frame: the slave drops the connection with an error naming the
// problem, and its log is untouched.
func TestSlaveRefusesBadFrames(t *testing.T) {
	header := func(typ replication.FrameType, off int64, n uint32) []byte {
		return replication.AppendFrameHeader(nil, replication.FrameHeader{Type: typ, Offset: off, BodyLen: n})
	}
	garbage := make([]byte, 500)
	for i := range garbage {
		garbage[i] = byte(i)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		is    error
		says  string
	}{
		{"a body beyond the limit", header(replication.FrameData, 0, 1<<31), replication.ErrFrameTooLarge, "2147483648 bytes, more than the limit"},
		{"not at the replica's end", append(header(replication.FrameData, 4096, 500), garbage...), replication.ErrOffset, "offset 4096, but the replica's log ends at 0"},
		{"not a record", append(header(replication.FrameData, 0, 500), garbage...), commitlog.ErrInvalidBatch, "replica batch at 0"},
		{"an unknown type", header(9, 0, 0), replication.ErrProtocol, "unknown frame type 9"},
		{"a heartbeat with a body", header(replication.FrameHeartbeat, 0, 8), replication.ErrProtocol, "heartbeat frame with a body"},
		{"a confirm with a body", header(replication.FrameConfirm, 0, 8), replication.ErrProtocol, "confirm frame with a body"},
		{"a confirm beyond the replica's end", header(replication.FrameConfirm, 4096, 0), replication.ErrProtocol, "confirms 4096, beyond the replica's end 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
			f := startFakeMaster(t, func(c net.Conn) {
				if _, err := replication.ReadHello(c); err != nil {
					return
				}
				w := replication.Welcome{Version: replication.Version, SegmentBytes: segBytes, End: 1 << 20}
				_, _ = c.Write(append(replication.AppendWelcome(nil, w), tc.frame...))
				_, _ = io.Copy(io.Discard, c) // until the slave hangs up
			})
			s := startSlave(t, slaveConfig(t, f.addr()), replica)
			require.Eventually(t, func() bool { return s.Status().Sessions > 0 && s.Status().LastErr != nil }, patience, 2*time.Millisecond)
			err := s.Status().LastErr
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.says)
			require.NoError(t, s.Close())
			assert.Zero(t, replica.MaxOffset())
		})
	}
}

func TestMasterRefusesBadSlaves(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	end := appendN(t, master, 0, 10, 300)
	cfg := masterConfig(t)
	cfg.MaxSlaves = 1
	m := startMaster(t, cfg, master)
	hello := replication.Hello{Version: replication.Version, ReplicaID: 7, SegmentBytes: segBytes, MaxFrameBytes: 1 << 20}

	// dial sends the hello and returns the welcome (or the read error).
	dial := func(t *testing.T, h []byte) (net.Conn, replication.Welcome, error) {
		t.Helper()
		c, err := net.Dial("tcp", m.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(patience)))
		_, err = c.Write(h)
		require.NoError(t, err)
		w, err := replication.ReadWelcome(c)
		return c, w, err
	}
	for _, tc := range []struct {
		name string
		edit func(*replication.Hello)
		says string
	}{
		{"another version", func(h *replication.Hello) { h.Version = 9 }, "protocol version 9"},
		{"beyond the master's end", func(h *replication.Hello) { h.End = end + 1 }, "beyond the master's end"},
		{"not where an entry starts", func(h *replication.Hello) { h.End = 100 }, "cannot read its log from the replica's end 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hello
			tc.edit(&h)
			_, w, err := dial(t, replication.AppendHello(nil, h))
			require.NoError(t, err)
			assert.Contains(t, w.Reason, tc.says)
		})
	}
	t.Run("not a hello", func(t *testing.T) {
		_, _, err := dial(t, make([]byte, replication.HelloSize))
		require.ErrorIs(t, err, io.EOF, "closed without a welcome")
	})
	t.Run("an ack beyond what was sent", func(t *testing.T) {
		h := hello
		h.End = end
		c, w, err := dial(t, replication.AppendHello(nil, h))
		require.NoError(t, err)
		require.Empty(t, w.Reason)
		require.Eventually(t, func() bool { return len(m.Slaves()) == 1 }, patience, 2*time.Millisecond)
		assert.Zero(t, m.Slaves()[0].Acked, "a hello's end is not an ack")
		_, err = c.Write(replication.AppendAck(nil, end))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return m.Slaves()[0].Acked == end }, patience, 2*time.Millisecond)
		_, err = c.Write(replication.AppendAck(nil, end+1))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, c) // heartbeats, until the master hangs up
		require.NoError(t, err)
		sl := m.Slaves()
		require.Len(t, sl, 1)
		assert.Equal(t, end, sl[0].Acked, "the forged ack is not counted")
		require.Eventually(t, func() bool { return !m.Slaves()[0].Connected }, patience, 2*time.Millisecond)
	})
	t.Run("more replica ids than MaxSlaves", func(t *testing.T) {
		h := hello
		h.ReplicaID = 8
		_, w, err := dial(t, replication.AppendHello(nil, h))
		require.NoError(t, err)
		assert.Equal(t, "the master serves 1 replica ids already (MaxSlaves)", w.Reason)
	})
}

func TestWaitAcked(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.SyncFlush)
	replica := openLog(t, t.TempDir(), segBytes, commitlog.SyncFlush)
	m := startMaster(t, masterConfig(t), master)
	require.NoError(t, m.WaitAcked(t.Context(), 1<<40, 0), "no replica asked for")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := m.WaitAcked(ctx, 1, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no replica connected")
	assert.Contains(t, err.Error(), "wait for 1 replicas to ack 1 (0 have)")

	end := appendN(t, master, 0, 30, 300)
	done := make(chan error, 1)
	go func() { done <- m.WaitAcked(t.Context(), end, 1) }()
	startSlave(t, slaveConfig(t, m.Addr().String()), replica)
	m.Notify()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(patience):
		t.Fatal("WaitAcked did not return after the slave caught up")
	}
	assert.GreaterOrEqual(t, replica.MaxOffset(), end, "an ack means the replica has the bytes")
	requireSameBytes(t, master, replica)

	go func() { done <- m.WaitAcked(t.Context(), end, 2) }() // one replica only
	require.NoError(t, m.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, replication.ErrClosed)
	case <-time.After(patience):
		t.Fatal("WaitAcked did not return on Close")
	}
	require.ErrorIs(t, m.Close(), replication.ErrClosed)
	require.ErrorIs(t, m.WaitAcked(t.Context(), end+1, 1), replication.ErrClosed)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, replication.MasterConfig{}.Validate())
	require.NoError(t, replication.SlaveConfig{MasterAddr: "m:10912"}.Validate())
	for _, tc := range []struct {
		name string
		err  error
		says []string
	}{
		{"master", replication.MasterConfig{Epoch: -1, BatchBytes: 2 << 20, MaxFrameBytes: 1 << 20, MaxSlaves: -1, PollInterval: -time.Second, HeartbeatInterval: time.Minute}.Validate(),
			[]string{"Epoch must not be negative", "BatchBytes 2097152 exceeds MaxFrameBytes", "MaxSlaves", "PollInterval must be positive", "HeartbeatInterval 1m0s must be shorter than ReadTimeout"}},
		{"slave", replication.SlaveConfig{ReplicaID: -2, MaxFrameBytes: -1, RetryMin: time.Minute, AckInterval: time.Minute}.Validate(),
			[]string{"MasterAddr is required", "ReplicaID must not be negative", "MaxFrameBytes -1 out of range", "RetryMin 1m0s exceeds RetryMax", "AckInterval 1m0s must be shorter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			for _, s := range tc.says {
				assert.Contains(t, tc.err.Error(), s)
			}
		})
	}
	_, err := replication.NewMaster(replication.MasterConfig{Epoch: -1}, nil)
	require.Error(t, err)
	_, err = replication.StartSlave(replication.SlaveConfig{}, nil)
	require.ErrorContains(t, err, "MasterAddr is required")
}

func TestRefusedErrorMessage(t *testing.T) {
	err := error(&replication.RefusedError{By: "master", Reason: "why"})
	assert.Equal(t, "replication: master refused the replica: why", err.Error())
	assert.True(t, errors.Is(err, replication.ErrRefused))
}

// TestIdleConnections: an idle master heartbeats with its end; a master
// drops a slave that sends no ack for ReadTimeout, and a slave drops a
// master that sends nothing for its ReadTimeout.
func TestIdleConnections(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	end := appendN(t, master, 0, 5, 300)
	cfg := masterConfig(t)
	cfg.Epoch, cfg.ReadTimeout = 3, 300*time.Millisecond
	m := startMaster(t, cfg, master)

	c, err := net.Dial("tcp", m.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(patience)))
	_, err = c.Write(replication.AppendHello(nil, replication.Hello{Version: replication.Version, ReplicaID: 2, SegmentBytes: segBytes, End: end, MaxFrameBytes: 1 << 20}))
	require.NoError(t, err)
	w, err := replication.ReadWelcome(c)
	require.NoError(t, err)
	assert.Equal(t, replication.Welcome{Version: replication.Version, SegmentBytes: segBytes, End: end, Epoch: 3}, w)
	h, body, err := replication.ReadFrame(c, nil, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, replication.FrameHeader{Type: replication.FrameHeartbeat, Epoch: 3, Offset: end}, h)
	assert.Empty(t, body)
	_, err = io.Copy(io.Discard, c) // more heartbeats, until the master hangs up: no ack came
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !m.Slaves()[0].Connected }, patience, 2*time.Millisecond)

	silent := startFakeMaster(t, func(c net.Conn) {
		if _, err := replication.ReadHello(c); err != nil {
			return
		}
		_, _ = c.Write(replication.AppendWelcome(nil, replication.Welcome{Version: replication.Version, SegmentBytes: segBytes}))
		_, _ = io.Copy(io.Discard, c)
	})
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	scfg := slaveConfig(t, silent.addr())
	scfg.ReadTimeout = 300 * time.Millisecond
	s := startSlave(t, scfg, replica)
	require.Eventually(t, func() bool { return s.Status().LastErr != nil }, patience, 2*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, s.Status().LastErr, &ne)
	assert.True(t, ne.Timeout(), "%v", s.Status().LastErr)
}

// TestSlaveMirrorsPaddedFlushes: large batches are flushed with direct
// writes that pad the master's log to a block boundary; the pads reach
// the slave where the master put them.
func TestSlaveMirrorsPaddedFlushes(t *testing.T) {
	const seg = 1 << 20
	master := openLog(t, t.TempDir(), seg, commitlog.AsyncFlush)
	replica := openLog(t, t.TempDir(), seg, commitlog.AsyncFlush)
	m := startMaster(t, masterConfig(t), master)
	startSlave(t, slaveConfig(t, m.Addr().String()), replica)
	var batch []byte
	for i := range 90 {
		batch = append(batch, record(t, i, 900)...) // ~90 KiB: flushed directly where the disk takes it
	}
	for range 30 {
		_, err := master.Append(t.Context(), batch, nil)
		require.NoError(t, err)
		_, err = master.Append(t.Context(), record(t, 0, 100), nil) // leaves the end off a block boundary
		require.NoError(t, err)
		m.Notify()
	}
	waitCaughtUp(t, master, replica)
	require.Greater(t, master.MaxOffset(), 2*int64(seg))
	requireSameBytes(t, master, replica)
	t.Logf("fillers between records in the master's log: %d", countFillers(t, master))
}

// countFillers counts the entries that are neither records nor a
// segment's end filler (pads and skipped ranges).
func countFillers(t *testing.T, l *commitlog.Log) int {
	t.Helper()
	n := 0
	buf := make([]byte, 1<<20)
	for off := l.MinOffset(); ; {
		data, next, err := l.CopyReplica(off, buf, 1<<20)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			return n
		}
		require.NoError(t, err)
		for p := 0; p < len(data); {
			size, magic, _ := message.RecordSize(data[p:])
			if magic != message.MagicV1 && magic != message.MagicBlank {
				n++
			}
			if magic == message.MagicBlank {
				break
			}
			p += int(size)
		}
		off = next
	}
}

// TestAppendersWaitForTheSlave: appenders that each wait for the slave's
// ack of their records, as a SYNC_MASTER send does.
func TestAppendersWaitForTheSlave(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.SyncFlush)
	replica := openLog(t, t.TempDir(), segBytes, commitlog.SyncFlush)
	m := startMaster(t, masterConfig(t), master)
	startSlave(t, slaveConfig(t, m.Addr().String()), replica)

	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	recs := make([][][]byte, 4) // built here: require must not run on other goroutines
	for g := range recs {
		for i := range 40 {
			recs[g] = append(recs[g], record(t, g*1000+i, 200))
		}
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for _, rec := range recs[g] {
				res, err := master.Append(ctx, rec, nil)
				if err == nil {
					m.Notify()
					err = m.WaitAcked(ctx, res.End, 1)
				}
				if err == nil && replica.MaxOffset() < res.End {
					err = errors.New("acked before the replica had the bytes")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.Greater(t, master.MaxOffset(), 2*int64(segBytes))
	waitCaughtUp(t, master, replica)
	requireSameBytes(t, master, replica)
}

// A replica whose log ends below the master's first offset (retention
// deleted what would follow) stops with a *ResyncNeededError naming that
// offset and the master's epochs; emptied to start there, it copies the
// master's log from it.
func TestSlaveBelowTheMastersFirstOffsetResyncs(t *testing.T) {
	const seg = 64 << 10
	mdir := t.TempDir()
	_, err := commitlog.ResetTo(t.Context(), commitlog.Config{Dir: mdir, SegmentBytes: seg, Logger: testLogger(t)}, 3*seg, "test")
	require.NoError(t, err)
	ml := openLog(t, mdir, seg, commitlog.AsyncFlush)
	second := appendN(t, ml, 0, 50, 700) // epoch 2 starts after 50 records
	appendN(t, ml, 50, 150, 700)
	require.Equal(t, int64(3*seg), ml.MinOffset())
	mc := masterConfig(t)
	mc.Epochs = []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: second}}
	m := startMaster(t, mc, ml)

	rdir := t.TempDir()
	rl := openLog(t, rdir, seg, commitlog.AsyncFlush)
	appendN(t, rl, 0, 10, 700) // a replica long gone: its log ends in the master's first segment's past
	ef, err := epoch.Open(nil, filepath.Join(t.TempDir(), "epochs"))
	require.NoError(t, err)
	sc := slaveConfig(t, m.Addr().String())
	sc.Epochs = ef
	s := startSlave(t, sc, rl)
	require.Eventually(t, func() bool { return s.Status().Stopped }, patience, 2*time.Millisecond)
	var re *replication.ResyncNeededError
	require.ErrorAs(t, s.Status().LastErr, &re)
	assert.Equal(t, int64(3*seg), re.From)
	assert.Equal(t, rl.MaxOffset(), re.End)
	assert.Equal(t, mc.Epochs, re.Epochs)
	require.ErrorIs(t, s.Status().LastErr, replication.ErrResyncNeeded)
	assert.Equal(t, re.End, rl.MaxOffset(), "the replica appended nothing")
	require.NoError(t, s.Close())
	require.NoError(t, rl.Close())

	_, err = commitlog.ResetTo(t.Context(), commitlog.Config{Dir: rdir, SegmentBytes: seg, Logger: testLogger(t)}, re.From, "resync")
	require.NoError(t, err)
	require.NoError(t, ef.TruncateAfter(0))
	require.NoError(t, ef.Append(1, 0)) // the master's entries up to From
	rl = openLog(t, rdir, seg, commitlog.AsyncFlush)
	startSlave(t, sc, rl)
	waitCaughtUp(t, ml, rl)
	requireSameBytes(t, ml, rl)
	assert.Equal(t, mc.Epochs, ef.Entries(), "the replica recorded epoch 2 from its frames")
}
