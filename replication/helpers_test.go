package replication_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/replication"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds every wait for the other side: generous, for a busy
// machine; the tests never assert speed.
const patience = 30 * time.Second

const segBytes = 8 << 10

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// openLog opens a log in dir, closed when the test ends.
func openLog(t *testing.T, dir string, seg int64, mode commitlog.FlushMode) *commitlog.Log {
	t.Helper()
	l, err := commitlog.Open(t.Context(), commitlog.Config{Dir: dir, SegmentBytes: seg, FlushMode: mode, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// record encodes message i with a body of bodySize bytes.
func record(tb testing.TB, i, bodySize int) []byte {
	tb.Helper()
	rec, err := message.Append(nil, &message.Message{
		Topic: "T", QueueID: int32(i % 4), BornTimestamp: 1_700_000_000_000 + int64(i),
		BornHost: netip.MustParseAddrPort("10.0.0.5:53211"), StoreHost: netip.MustParseAddrPort("10.0.0.6:10911"),
		Body: bytes.Repeat([]byte{byte(i)}, bodySize), Properties: message.Properties{{Key: message.PropUniqKey, Value: fmt.Sprintf("ID%08d", i)}},
	}, true)
	require.NoError(tb, err)
	return rec
}

// appendN appends n records of bodySize bytes, numbered from from, one
// per Append, and returns the log's end.
func appendN(t *testing.T, l *commitlog.Log, from, n, bodySize int) int64 {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := l.Append(t.Context(), record(t, i, bodySize), nil)
		require.NoError(t, err)
	}
	return l.MaxOffset()
}

func masterConfig(t *testing.T) replication.MasterConfig {
	return replication.MasterConfig{
		Addr:              "127.0.0.1:0",
		HeartbeatInterval: 50 * time.Millisecond,
		Logger:            testLogger(t),
	}
}

func slaveConfig(t *testing.T, addr string) replication.SlaveConfig {
	return replication.SlaveConfig{
		MasterAddr:  addr,
		AckInterval: 50 * time.Millisecond,
		RetryMin:    10 * time.Millisecond,
		RetryMax:    200 * time.Millisecond,
		Logger:      testLogger(t),
	}
}

func startMaster(t *testing.T, cfg replication.MasterConfig, src replication.Source) *replication.Master {
	t.Helper()
	m, err := replication.NewMaster(cfg, src)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func startSlave(t *testing.T, cfg replication.SlaveConfig, dst replication.Sink) *replication.Slave {
	t.Helper()
	s, err := replication.StartSlave(cfg, dst)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitCaughtUp waits until the replica's end is the master's.
func waitCaughtUp(t *testing.T, master, replica *commitlog.Log) {
	t.Helper()
	require.Eventually(t, func() bool { return replica.MaxOffset() == master.MaxOffset() }, patience, 2*time.Millisecond,
		"replica end %d, master end %d", replica.MaxOffset(), master.MaxOffset())
}

// requireSameBytes compares the two logs' bytes over [0, MaxOffset),
// segment by segment, fillers and the zeros after them included.
func requireSameBytes(t *testing.T, want, got *commitlog.Log) {
	t.Helper()
	require.Equal(t, want.MaxOffset(), got.MaxOffset())
	seg := want.SegmentBytes()
	for base := want.MinOffset(); base < want.MaxOffset(); base += seg {
		n := int(min(seg, want.MaxOffset()-base))
		a, err := want.Read(base, n)
		require.NoError(t, err)
		b, err := got.Read(base, n)
		require.NoError(t, err)
		if !bytes.Equal(a.B, b.B) {
			i := 0
			for i < n && a.B[i] == b.B[i] {
				i++
			}
			t.Fatalf("segment %d differs at log offset %d", base, base+int64(i))
		}
		a.Release()
		b.Release()
	}
}

// fakeMaster accepts slaves on loopback and runs serve on each connection,
// for tests of what a slave does with a master's bad bytes.
type fakeMaster struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func startFakeMaster(t *testing.T, serve func(net.Conn)) *fakeMaster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeMaster{ln: ln}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			if f.closed {
				_ = c.Close()
			}
			f.mu.Unlock()
			f.wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(f.close)
	return f
}

func (f *fakeMaster) addr() string { return f.ln.Addr().String() }

func (f *fakeMaster) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
