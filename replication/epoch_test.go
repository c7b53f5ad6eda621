package replication_test

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/epoch"
)

// node is a broker's replication state on disk: its log and epoch file.
type node struct {
	dir    string
	seg    int64
	log    *commitlog.Log
	epochs *epoch.File
}

func newNode(t *testing.T, seg int64) *node {
	t.Helper()
	n := &node{dir: t.TempDir(), seg: seg}
	n.open(t)
	return n
}

func (n *node) logConfig(t *testing.T) commitlog.Config {
	return commitlog.Config{Dir: filepath.Join(n.dir, "commitlog"), StateDir: n.dir, SegmentBytes: n.seg, Logger: testLogger(t)}
}

// open opens the node's log and epoch file (again), as a broker's start does.
func (n *node) open(t *testing.T) {
	t.Helper()
	n.log = openLogConfig(t, n.logConfig(t))
	f, err := epoch.Open(nil, filepath.Join(n.dir, "epochs"))
	require.NoError(t, err)
	require.NoError(t, f.TruncateAfter(n.log.MaxOffset()), "the package's rule at start")
	n.epochs = f
}

func (n *node) close(t *testing.T) {
	t.Helper()
	require.NoError(t, n.log.Close())
}

// becomeMaster records epoch e at the log's end and serves the log.
func (n *node) becomeMaster(t *testing.T, e int32, addr string) *replication.Master {
	t.Helper()
	require.NoError(t, n.epochs.Append(e, n.log.MaxOffset()))
	cfg := masterConfig(t)
	if addr != "" {
		cfg.Addr = addr
	}
	cfg.Epochs = n.epochs.Entries()
	return startMaster(t, cfg, n.log)
}

func (n *node) follow(t *testing.T, m interface{ Addr() net.Addr }) *replication.Slave {
	t.Helper()
	cfg := slaveConfig(t, m.Addr().String())
	cfg.Epochs = n.epochs
	return startSlave(t, cfg, n.log)
}

func openLogConfig(t *testing.T, cfg commitlog.Config) *commitlog.Log {
	t.Helper()
	l, err := commitlog.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func waitStopped(t *testing.T, s *replication.Slave) replication.SlaveStatus {
	t.Helper()
	require.Eventually(t, func() bool { return s.Status().Stopped }, patience, 2*time.Millisecond)
	return s.Status()
}

// TestEqualHistoriesStream: a slave whose history is the master's follows
// it across a failover of the master to a new epoch, recording each epoch
// where the master's frames start it.
func TestEqualHistoriesStream(t *testing.T) {
	a, b := newNode(t, segBytes), newNode(t, segBytes)
	m := a.becomeMaster(t, 1, "")
	s := b.follow(t, m)
	appendN(t, a.log, 0, 40, 300)
	m.Notify()
	waitCaughtUp(t, a.log, b.log)
	requireSameBytes(t, a.log, b.log)
	assert.Equal(t, a.epochs.Entries(), b.epochs.Entries())

	// The master restarts in epoch 2 on the same port: the slave shares
	// its whole log with it and goes on from its end.
	addr := m.Addr().String()
	require.NoError(t, m.Close())
	sink := &firstAppend{Log: b.log}
	sink.first.Store(-1)
	require.NoError(t, s.Close())
	x := a.log.MaxOffset()
	m = a.becomeMaster(t, 2, addr)
	cfg := slaveConfig(t, addr)
	cfg.Epochs = b.epochs
	s = startSlave(t, cfg, sink)
	appendN(t, a.log, 40, 30, 300)
	m.Notify()
	waitCaughtUp(t, a.log, b.log)
	requireSameBytes(t, a.log, b.log)
	assert.Equal(t, x, sink.first.Load(), "the stream starts at the slave's end")
	assert.Equal(t, []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: x}}, b.epochs.Entries())
	assert.Equal(t, a.epochs.Entries(), b.epochs.Entries())
	assert.False(t, s.Status().Stopped)
	assert.Equal(t, int32(2), s.Status().Epoch)
}

// TestRejoinTruncatesDivergedTail: A was master in epoch 1 and wrote a
// tail B never got; B became master in epoch 2 and wrote other bytes
// there. A rejoins as B's slave: it stops with TruncateNeededError at the
// end of their common history, appends nothing and does not reconnect;
// after commitlog.Truncate and a restart it follows B and ends
// byte-identical, with B's epoch list.
func TestRejoinTruncatesDivergedTail(t *testing.T) {
	a, b := newNode(t, segBytes), newNode(t, segBytes)
	ma := a.becomeMaster(t, 1, "")
	sb := b.follow(t, ma)
	appendN(t, a.log, 0, 30, 300)
	ma.Notify()
	waitCaughtUp(t, a.log, b.log)
	require.NoError(t, sb.Close())
	common := b.log.MaxOffset()

	appendN(t, a.log, 1000, 12, 500) // acknowledged by A alone (ASYNC): B never gets it
	require.NoError(t, ma.Close())
	aEnd := a.log.MaxOffset()

	// B is elected in epoch 2: a broker restarts its log in its new role.
	b.close(t)
	b.open(t)
	mb := b.becomeMaster(t, 2, "")
	appendN(t, b.log, 2000, 25, 200)
	mb.Notify()

	// A rejoins as B's slave.
	a.close(t)
	a.open(t)
	sa := a.follow(t, mb)
	st := waitStopped(t, sa)
	require.ErrorIs(t, st.LastErr, replication.ErrTruncateNeeded)
	var tn *replication.TruncateNeededError
	require.ErrorAs(t, st.LastErr, &tn)
	assert.Equal(t, replication.TruncateNeededError{To: common, Cut: aEnd - common}, *tn)
	assert.False(t, st.Connected)
	assert.Zero(t, st.Sessions)
	time.Sleep(3 * slaveConfig(t, "").RetryMax) // no reconnection: nothing changes
	assert.Equal(t, aEnd, a.log.MaxOffset(), "the stopped slave appended nothing")
	assert.Equal(t, st, sa.Status())
	assert.Equal(t, []epoch.Entry{{Epoch: 1, StartOffset: 0}}, a.epochs.Entries())
	require.NoError(t, sa.Close())

	// Its owner truncates and restarts it.
	a.close(t)
	rep, err := commitlog.Truncate(t.Context(), a.logConfig(t), tn.To, "rejoin epoch 2")
	require.NoError(t, err)
	assert.Equal(t, tn.Cut, rep.Bytes)
	assert.Equal(t, 12, rep.Records)
	record, err := os.ReadFile(filepath.Join(a.dir, commitlog.TruncationsFile))
	require.NoError(t, err)
	t.Logf("truncation record: %s", record)
	var onFile commitlog.TruncateReport
	require.NoError(t, json.Unmarshal(record, &onFile))
	assert.Equal(t, rep.Offset, onFile.Offset)
	assert.Equal(t, rep.Bytes, onFile.Bytes)
	require.NoError(t, a.epochs.TruncateAfter(tn.To))
	a.open(t)
	require.Equal(t, common, a.log.MaxOffset())
	sa = a.follow(t, mb)
	appendN(t, b.log, 3000, 10, 200)
	mb.Notify()
	waitCaughtUp(t, b.log, a.log)
	requireSameBytes(t, b.log, a.log)
	assert.Equal(t, b.epochs.Entries(), a.epochs.Entries())
	assert.Equal(t, []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: common}}, a.epochs.Entries())
	assert.False(t, sa.Status().Stopped)
	require.Eventually(t, func() bool {
		for _, sl := range mb.Slaves() {
			if sl.Acked == b.log.MaxOffset() {
				return true
			}
		}
		return false
	}, patience, 2*time.Millisecond)
}

// TestRejoinWithNothingInCommon: a replica whose epochs share none with
// the master's (or that has data but no epochs) must cut its whole log.
func TestRejoinWithNothingInCommon(t *testing.T) {
	for _, tc := range []struct {
		name    string
		epochs  []epoch.Entry
		records int // the replica's; the master has 10 of the same size
	}{
		{"another group's epochs", []epoch.Entry{{Epoch: 5, StartOffset: 0}}, 8},
		{"another group's epochs, a longer log", []epoch.Entry{{Epoch: 5, StartOffset: 0}}, 30},
		{"the master's epoch at another start", []epoch.Entry{{Epoch: 1, StartOffset: 100}}, 8},
		{"no epoch file entries", nil, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, replica := newNode(t, segBytes), newNode(t, segBytes)
			appendN(t, master.log, 0, 5, 300)
			require.NoError(t, master.epochs.Append(1, 0))
			m := master.becomeMaster(t, 2, "")
			appendN(t, master.log, 5, 5, 300)
			end := appendN(t, replica.log, 100, tc.records, 300)
			for _, e := range tc.epochs {
				require.NoError(t, replica.epochs.Append(e.Epoch, e.StartOffset))
			}
			s := replica.follow(t, m)
			st := waitStopped(t, s)
			var tn *replication.TruncateNeededError
			require.ErrorAs(t, st.LastErr, &tn)
			assert.Equal(t, replication.TruncateNeededError{To: 0, Cut: end}, *tn)
			assert.Equal(t, end, replica.log.MaxOffset())
			for _, sl := range m.Slaves() { // its records lie where the master's do: the hello may have been accepted
				assert.Zero(t, sl.Acked, "a diverged replica's end is not counted as acked")
			}
		})
	}
}

// TestFramesNeverSpanEpochs: on a log of three epochs, in one segment and
// smaller than a frame, each data frame holds one epoch's bytes and is
// labelled with it; a slave records the three epochs where they start.
func TestFramesNeverSpanEpochs(t *testing.T) {
	const seg = 1 << 20
	master := newNode(t, seg)
	for e := int32(1); e <= 3; e++ {
		require.NoError(t, master.epochs.Append(e, master.log.MaxOffset()))
		appendN(t, master.log, int(e)*100, 10, 300)
	}
	list := master.epochs.Entries()
	cfg := masterConfig(t)
	cfg.Epochs = list
	m := startMaster(t, cfg, master.log)
	end := master.log.MaxOffset()

	c, err := net.Dial("tcp", m.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(patience)))
	_, err = c.Write(replication.AppendHello(nil, replication.Hello{Version: replication.Version, ReplicaID: 9, SegmentBytes: seg, MaxFrameBytes: 1 << 20}))
	require.NoError(t, err)
	w, err := replication.ReadWelcome(c)
	require.NoError(t, err)
	require.Empty(t, w.Reason)
	assert.Equal(t, list, w.Epochs)
	assert.Equal(t, int32(3), w.Epoch)
	var frames int
	for off := int64(0); off < end; {
		h, body, err := replication.ReadFrame(c, nil, 1<<20)
		require.NoError(t, err)
		if h.Type != replication.FrameData {
			assert.Equal(t, int32(3), h.Epoch, "%s frames carry the master's epoch", h.Type)
			continue
		}
		frames++
		require.Equal(t, off, h.Offset)
		i, ok := epoch.IndexAt(list, off)
		require.True(t, ok)
		assert.Equal(t, list[i].Epoch, h.Epoch, "frame at %d", off)
		assert.LessOrEqual(t, off+int64(len(body)), epoch.EndOf(list, i, end), "frame at %d of %d bytes spans epochs %v", off, len(body), list)
		off += int64(len(body))
	}
	assert.Equal(t, 3, frames, "one frame per epoch: the log is smaller than a frame")
	_ = c.Close()

	replica := newNode(t, seg)
	replica.follow(t, m)
	waitCaughtUp(t, master.log, replica.log)
	requireSameBytes(t, master.log, replica.log)
	assert.Equal(t, list, replica.epochs.Entries())
}

// TestSlaveRefusesStaleEpochs: a data frame from an epoch older than the
// replica's last entry, or newer than the master's, is refused before its
// bytes are looked at; the replica's log and epoch file are untouched.
func TestSlaveRefusesStaleEpochs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch int32
		is    error
		says  string
	}{
		{"older than the replica's last", 1, replication.ErrStaleEpoch, "of epoch 1, after data of epoch 2"},
		{"newer than the master's", 4, replication.ErrProtocol, "of epoch 4, but the master is in epoch 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica := newNode(t, segBytes)
			end := appendN(t, replica.log, 0, 3, 300)
			require.NoError(t, replica.epochs.Append(2, 0))
			f := startFakeMaster(t, func(c net.Conn) {
				if _, err := replication.ReadHello(c); err != nil {
					return
				}
				w := replication.Welcome{Version: replication.Version, SegmentBytes: segBytes, End: end + 1000, Epoch: 3,
					Epochs: []epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 3, StartOffset: end}}}
				b := replication.AppendWelcome(nil, w)
				b = replication.AppendFrameHeader(b, replication.FrameHeader{Type: replication.FrameData, Epoch: tc.epoch, Offset: end, BodyLen: 4})
				_, _ = c.Write(append(b, 1, 2, 3, 4))
				_, _ = io.Copy(io.Discard, c)
			})
			s := replica.follow(t, &fakeAddr{f})
			require.Eventually(t, func() bool { return s.Status().Sessions > 0 && s.Status().LastErr != nil }, patience, 2*time.Millisecond)
			err := s.Status().LastErr
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.says)
			require.NoError(t, s.Close())
			assert.Equal(t, end, replica.log.MaxOffset())
			assert.Equal(t, []epoch.Entry{{Epoch: 2, StartOffset: 0}}, replica.epochs.Entries())
		})
	}
}

// TestVersionOneIsRefused: a version 1 hello gets a refusal naming both
// versions, and a slave refuses a version 1 master's welcome.
func TestVersionOneIsRefused(t *testing.T) {
	master := newNode(t, segBytes)
	m := master.becomeMaster(t, 1, "")
	c, err := net.Dial("tcp", m.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(patience)))
	_, err = c.Write(replication.AppendHello(nil, replication.Hello{Version: 1, ReplicaID: 2, SegmentBytes: segBytes, MaxFrameBytes: 1 << 20}))
	require.NoError(t, err)
	// A version 1 slave reads the header and the reason, as version 1 laid them out.
	var hdr [replication.WelcomeHeaderSize]byte
	_, err = io.ReadFull(c, hdr[:])
	require.NoError(t, err)
	n := int(hdr[28])<<8 | int(hdr[29])
	reason := make([]byte, n)
	_, err = io.ReadFull(c, reason)
	require.NoError(t, err)
	assert.Equal(t, "the replica speaks protocol version 1, the master 3", string(reason))
	assert.Empty(t, m.Slaves())

	for _, tc := range []struct {
		name string
		w    replication.Welcome
		by   string
		says string
	}{
		{"a version 1 master's refusal", replication.Welcome{Version: 1, Reason: "the replica speaks protocol version 3, the master 1"}, "master", "protocol version 3, the master 1"},
		{"a version 1 master's welcome", replication.Welcome{Version: 1, SegmentBytes: segBytes}, "slave", "the master speaks protocol version 1, the replica 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeMaster(t, func(c net.Conn) {
				if _, err := replication.ReadHello(c); err != nil {
					return
				}
				_, _ = c.Write(replication.AppendWelcome(nil, tc.w))
				_, _ = io.Copy(io.Discard, c)
			})
			replica := newNode(t, segBytes)
			s := replica.follow(t, &fakeAddr{f})
			require.Eventually(t, func() bool { return s.Status().LastErr != nil }, patience, 2*time.Millisecond)
			var re *replication.RefusedError
			require.ErrorAs(t, s.Status().LastErr, &re)
			assert.Equal(t, tc.by, re.By)
			assert.Contains(t, re.Reason, tc.says)
		})
	}
}

// fakeAddr lets node.follow dial a fake master.
type fakeAddr struct{ f *fakeMaster }

func (a *fakeAddr) Addr() net.Addr { return a.f.ln.Addr() }

func TestMasterEpochsChecked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   replication.MasterConfig
		says  string
		valid bool
	}{
		{"out of order", replication.MasterConfig{Epochs: []epoch.Entry{{Epoch: 2}, {Epoch: 1, StartOffset: 5}}}, "epoch 1 is not greater than the previous entry's 2", false},
		{"Epoch is not the last", replication.MasterConfig{Epoch: 1, Epochs: []epoch.Entry{{Epoch: 1}, {Epoch: 2}}}, "Epoch 1 is not the last of Epochs (epoch 2 at offset 0)", false},
		{"the current epoch beyond the log", replication.MasterConfig{Epochs: []epoch.Entry{{Epoch: 1}, {Epoch: 2, StartOffset: 1 << 20}}}, "the master's current epoch (epoch 2 at offset 1048576) starts beyond its log's end 0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.valid {
				require.NoError(t, tc.cfg.Validate())
			} else {
				require.ErrorContains(t, tc.cfg.Validate(), tc.says)
			}
			cfg := tc.cfg
			cfg.Addr = "127.0.0.1:0"
			_, err := replication.NewMaster(cfg, openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush))
			require.ErrorContains(t, err, tc.says)
		})
	}
}
