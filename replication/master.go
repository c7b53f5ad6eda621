package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication/epoch"
)

// Source is the master's log as a Master reads it.
type Source interface {
	// CopyReplica copies whole entries from off into buf (a larger buffer
	// of its own for a first entry of at most maxBytes) and returns them
	// and the offset after them; commitlog.ErrOffsetTooBig at the end.
	CopyReplica(off int64, buf []byte, maxBytes int) (data []byte, next int64, err error)
	MinOffset() int64
	MaxOffset() int64
	SegmentBytes() int64
}

var _ Source = (*commitlog.Log)(nil)

// Master serves its log to slaves on the HA port: each connection gets a
// goroutine that streams the log from the slave's end and one that reads
// its acks. Its methods are safe for concurrent use.
type Master struct {
	cfg MasterConfig
	src Source
	log *slog.Logger
	ln  net.Listener

	ctx       context.Context // cancelled by Close
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu     sync.Mutex
	slaves map[int64]*slaveState // by replica id
	// metaKicks counts NotifyMeta calls: a stream whose count is behind
	// sends the snapshot at once.
	metaKicks atomic.Uint64
	changed   chan struct{} // closed and replaced when an ack moves
	wake      chan struct{} // closed and replaced by Notify while streams wait on it
	waiting   bool          // a stream waits on wake
	nextSes   uint64
	// nonces are the signed hellos' nonces admitted within twice
	// ReplayWindow, with when: a hello seen again is a replay.
	nonces map[[NonceSize]byte]time.Time
}

// slaveState is what the master knows of one replica id. Guarded by
// Master.mu.
type slaveState struct {
	id      int64
	addr    string
	acked   int64
	session uint64   // the connection that owns it
	conn    net.Conn // nil while disconnected
	// caughtUp is when an ack last reached sampled, the log end the
	// master had at the ack before (RocketMQ's lastCatchUpTimeMs).
	caughtUp time.Time
	sampled  int64
}

// noteAck records an ack of end (keep-alives too) at now, the log's end
// being top. m.mu is held.
func (s *slaveState) noteAck(end, top int64, now time.Time) {
	if end >= s.sampled {
		s.caughtUp = now
	}
	s.sampled = top
}

// SlaveInfo describes a replica the master has served.
type SlaveInfo struct {
	ID        int64
	Addr      string // its last connection's remote address
	Connected bool
	Acked     int64 // the log end it acknowledged last
	// CaughtUpAt is when its ack last reached the log end the master had
	// at its ack before (or when it connected): a slave that keeps up
	// renews it with every ack, one that lags or stalls does not.
	CaughtUpAt time.Time
}

// NewMaster listens on cfg.Addr and serves src to the slaves that connect,
// until Close.
func NewMaster(cfg MasterConfig, src Source) (*Master, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n := len(cfg.Epochs); n > 0 {
		cfg.Epochs = slices.Clone(cfg.Epochs)
		cfg.Epoch = cfg.Epochs[n-1].Epoch
		if last, end := cfg.Epochs[n-1], src.MaxOffset(); last.StartOffset > end {
			return nil, fmt.Errorf("replication: the master's current epoch (%v) starts beyond its log's end %d", last, end)
		}
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("replication: listen on %s: %w", cfg.Addr, err)
		}
	}
	m := &Master{
		cfg:     cfg,
		src:     src,
		log:     cfg.Logger.With("component", "replication", "role", "master"),
		ln:      ln,
		slaves:  make(map[int64]*slaveState),
		nonces:  make(map[[NonceSize]byte]time.Time),
		changed: make(chan struct{}),
		wake:    make(chan struct{}),
	}
	m.ctx, m.stop = context.WithCancel(context.Background())
	m.wg.Go(m.acceptLoop)
	m.log.Info("listening for slaves", "addr", ln.Addr().String(), "epoch", cfg.Epoch)
	return m, nil
}

// Addr returns the address the master listens on.
func (m *Master) Addr() net.Addr { return m.ln.Addr() }

// Close stops accepting, closes every connection and returns once all the
// master's goroutines are done. Later calls return ErrClosed.
func (m *Master) Close() error {
	err := ErrClosed
	m.closeOnce.Do(func() {
		m.stop()
		err = m.ln.Close()
		m.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

// Notify wakes the streams waiting for log bytes: call it after an append
// so that slaves get the bytes without waiting for PollInterval.
func (m *Master) Notify() {
	m.mu.Lock()
	if m.waiting {
		close(m.wake)
		m.wake, m.waiting = make(chan struct{}), false
	}
	m.mu.Unlock()
}

// NotifyMeta tells the streams that the metadata changed in a way the
// slaves should see at once (a topic or a group): each sends the snapshot
// at its next turn instead of within MetaInterval.
func (m *Master) NotifyMeta() {
	m.metaKicks.Add(1)
	m.Notify()
}

// waitChan returns the channel Notify closes.
func (m *Master) waitChan() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waiting = true
	return m.wake
}

// WaitAcked returns nil once n replicas have acknowledged log bytes up to
// offset (a replica's last ack counts while it is disconnected: it holds
// those bytes), or an error when ctx ends (wrapping ctx.Err()) or the
// master closes (ErrClosed).
func (m *Master) WaitAcked(ctx context.Context, offset int64, n int) error {
	for {
		m.mu.Lock()
		k := 0
		for _, s := range m.slaves {
			if s.acked >= offset {
				k++
			}
		}
		changed := m.changed
		m.mu.Unlock()
		if k >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("replication: wait for %d replicas to ack %d (%d have): %w", n, offset, k, ctx.Err())
		case <-m.ctx.Done():
			return ErrClosed
		}
	}
}

// WaitAckedBy returns once every replica of ids has acknowledged the log
// up to offset (a replica that never connected has acknowledged nothing),
// or with ctx's error, or ErrClosed.
func (m *Master) WaitAckedBy(ctx context.Context, offset int64, ids []int64) error {
	behind := func(id int64) bool { s := m.slaves[id]; return s == nil || s.acked < offset }
	for {
		m.mu.Lock()
		done := !slices.ContainsFunc(ids, behind)
		changed := m.changed
		m.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			m.mu.Lock()
			missing := slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !behind(id) })
			m.mu.Unlock()
			return fmt.Errorf("replication: wait for replicas %v to ack %d (%v have not): %w", ids, offset, missing, ctx.Err())
		case <-m.ctx.Done():
			return ErrClosed
		}
	}
}

// MinAcked returns the lowest log end the replicas of ids acknowledged (0
// for one that never connected), math.MaxInt64 for no ids.
func (m *Master) MinAcked(ids []int64) int64 {
	low := int64(math.MaxInt64)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		s := m.slaves[id]
		if s == nil {
			return 0
		}
		low = min(low, s.acked)
	}
	return low
}

// ackChan returns a channel closed when an ack next moves.
func (m *Master) ackChan() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Slaves returns what the master knows of each replica, by id.
func (m *Master) Slaves() []SlaveInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SlaveInfo, 0, len(m.slaves))
	for _, s := range m.slaves {
		out = append(out, SlaveInfo{ID: s.id, Addr: s.addr, Connected: s.conn != nil, Acked: s.acked, CaughtUpAt: s.caughtUp})
	}
	return out
}

func (m *Master) acceptLoop() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("accept failed", "err", err)
			if !sleepCtx(m.ctx, 50*time.Millisecond) { // e.g. out of file descriptors: do not spin
				return
			}
			continue
		}
		m.wg.Go(func() { m.serve(conn) })
	}
}

// serve runs one slave's connection: the handshake, then the stream and
// the ack reader until either fails or the master closes.
func (m *Master) serve(conn net.Conn) {
	ctx, cancel := context.WithCancel(m.ctx)
	var closer sync.WaitGroup
	defer closer.Wait()
	defer cancel()
	closer.Go(func() { <-ctx.Done(); conn.Close() }) // unblocks reads and writes
	addr := conn.RemoteAddr().String()
	log := m.log.With("peer", addr)

	s, err := m.handshake(conn, addr)
	if err != nil {
		log.Warn("slave not served", "err", err)
		return
	}
	defer m.unregister(s.state, s.session)
	log = log.With("replica", s.state.id)
	log.Info("slave connected", "from", s.from, "max_frame", s.maxFrame)

	var (
		sent     atomic.Int64 // the end of what was sent: acks above it are forged
		firstErr error
		once     sync.Once
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err })
		cancel()
	}
	sent.Store(s.from)
	var readers sync.WaitGroup
	readers.Go(func() { fail(m.readAcks(conn, s, &sent)) })
	fail(m.stream(ctx, conn, s, &sent))
	readers.Wait()
	if m.ctx.Err() == nil {
		level := slog.LevelWarn
		if errors.Is(firstErr, io.EOF) { // the slave hung up: it stopped or restarts
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, "slave disconnected", "err", firstErr, "acked", m.acked(s.state))
	}
}

// session is one accepted slave connection after its handshake.
type session struct {
	state      *slaveState
	session    uint64
	from       int64  // the slave's end at the handshake
	maxFrame   int    // the largest body to send
	first      []byte // the first data frame's body, read to check from; may be empty
	next       int64  // the offset after first
	acked      int64  // the replica's ack when the session started (register)
	firstEpoch int32  // first's epoch
	buf        []byte // the stream's read buffer
}

// handshake reads the slave's hello and answers it: a refusal with the
// reason, or the welcome after which frames follow. It checks the first
// read from the slave's end before accepting it.
func (m *Master) handshake(conn net.Conn, addr string) (*session, error) {
	if err := conn.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout)); err != nil {
		return nil, err
	}
	h, err := ReadHello(conn)
	if err != nil {
		return nil, err
	}
	if reason := m.authenticate(h, addr); reason != "" {
		// Version 0 and zeros: a peer not admitted learns nothing of the
		// log, and a slave reads the refusal without an epoch list.
		if _, err := conn.Write(AppendWelcome(nil, Welcome{Reason: reason})); err != nil {
			return nil, fmt.Errorf("replication: write refusal: %w", err)
		}
		return nil, &RefusedError{By: "master", Reason: reason}
	}
	w := Welcome{Version: Version, SegmentBytes: m.src.SegmentBytes(), End: m.src.MaxOffset(), Epoch: m.cfg.Epoch, Epochs: m.cfg.Epochs,
		Start: m.src.MinOffset()}
	s := &session{from: h.End, next: h.End}
	reason := m.admit(h, w.End)
	if reason == "" {
		s.maxFrame = min(m.cfg.MaxFrameBytes, int(h.MaxFrameBytes))
		s.buf = make([]byte, min(m.cfg.BatchBytes, s.maxFrame))
		reason = m.readFirst(s)
	}
	if reason == "" {
		if s.state, s.session, reason = m.register(h, addr, conn); reason != "" {
			s.state = nil
		} else {
			s.acked = m.acked(s.state)
		}
	}
	w.Reason = reason
	if _, err := conn.Write(AppendWelcome(nil, w)); err != nil {
		if s.state != nil {
			m.unregister(s.state, s.session)
		}
		return nil, fmt.Errorf("replication: write welcome: %w", err)
	}
	if reason != "" {
		return nil, &RefusedError{By: "master", Reason: reason}
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		m.unregister(s.state, s.session)
		return nil, err
	}
	return s, nil
}

// maxNonces bounds the nonces a master remembers: a handshake a second
// for two minutes, far more than a group's slaves reconnect.
const maxNonces = 4096

// authenticate returns why MasterConfig.Authenticate refuses the hello's
// sender, or "" (docs/SECURITY.md, "Cluster").
func (m *Master) authenticate(h Hello, from string) string {
	if m.cfg.Authenticate == nil {
		return ""
	}
	var sh SignedHello
	if p := h.Proof; p != nil {
		sh = SignedHello{Content: h.SignedContent(p.Nonce), Date: p.Date, Authorization: p.Authorization}
	}
	if err := m.cfg.Authenticate(sh, from); err != nil {
		return "authentication: " + err.Error()
	}
	if h.Proof == nil {
		return ""
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, seen := m.nonces[h.Proof.Nonce]; seen {
		return "authentication: the hello's nonce was seen before: a replayed hello"
	}
	for n, at := range m.nonces {
		if now.Sub(at) > 2*m.cfg.ReplayWindow {
			delete(m.nonces, n)
		}
	}
	if len(m.nonces) >= maxNonces {
		return fmt.Sprintf("authentication: %d hellos within twice the replay window (%s) already: try again later", maxNonces, m.cfg.ReplayWindow)
	}
	m.nonces[h.Proof.Nonce] = now
	return ""
}

// admit returns why the master refuses a slave's hello, or "".
func (m *Master) admit(h Hello, end int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch seg := m.src.SegmentBytes(); {
	case h.Version != Version:
		return fmt.Sprintf("the replica speaks protocol version %d, the master %d", h.Version, Version)
	case h.SegmentBytes != seg:
		return fmt.Sprintf("the replica's segment size is %d bytes, the master's %d: a replica's log must have the master's segment size", h.SegmentBytes, seg)
	case h.MaxFrameBytes == 0:
		return "the replica takes frames of at most 0 bytes"
	case h.End < 0 || h.End > end:
		// The welcome's epoch list tells a slave with an epoch file where to truncate.
		return fmt.Sprintf("the replica's log ends at %d, beyond the master's end %d: it holds bytes the master lacks and must be truncated first", h.End, end)
	case h.End < m.src.MinOffset():
		return fmt.Sprintf("the replica's log ends at %d, below the master's first offset %d (deleted by retention)", h.End, m.src.MinOffset())
	}
	return m.room(h.ReplicaID) // before the stream's buffer is allocated; register checks again
}

// room returns why the master has no room for replica id, or "". m.mu is
// held.
func (m *Master) room(id int64) string {
	if _, ok := m.slaves[id]; ok || len(m.slaves) < m.cfg.MaxSlaves {
		return ""
	}
	return fmt.Sprintf("the master serves %d replica ids already (MaxSlaves)", len(m.slaves))
}

// readFirst reads the first batch from the slave's end, which must be
// where an entry starts; it returns why not, or "".
func (m *Master) readFirst(s *session) string {
	if _, _, err := m.label(s.from); err != nil {
		return err.Error()
	}
	data, next, ep, err := m.read(s.from, s.buf, s.maxFrame)
	switch {
	case errors.Is(err, commitlog.ErrOffsetTooBig):
		return ""
	case err != nil:
		return fmt.Sprintf("the master cannot read its log from the replica's end %d: %v", s.from, err)
	}
	s.first, s.next, s.firstEpoch = data, next, ep
	return ""
}

// label returns the epoch of the master's data at off (epoch.IndexAt over
// its list) and where that epoch's data ends (math.MaxInt64 for the
// current epoch). Without a list every offset is cfg.Epoch's.
func (m *Master) label(off int64) (ep int32, end int64, err error) {
	list := m.cfg.Epochs
	if len(list) == 0 {
		return m.cfg.Epoch, math.MaxInt64, nil
	}
	i, ok := epoch.IndexAt(list, off)
	if !ok {
		return 0, 0, fmt.Errorf("the master's epoch list starts at offset %d, above the replica's end %d: the master cannot say which epoch its log there belongs to", list[0].StartOffset, off)
	}
	return list[i].Epoch, epoch.EndOf(list, i, math.MaxInt64), nil
}

// read copies whole entries from off, as CopyReplica does, but never past
// the end of the epoch off belongs to, so that a frame never spans two
// epochs; it returns them with their epoch. An epoch starts where an entry
// does (a new master's log end), so the cut falls between entries.
func (m *Master) read(off int64, buf []byte, maxFrame int) (data []byte, next int64, ep int32, err error) {
	ep, end, err := m.label(off)
	if err != nil {
		return nil, off, 0, err
	}
	if room := end - off; room < int64(len(buf)) {
		buf = buf[:room]
	}
	data, next, err = m.src.CopyReplica(off, buf, maxFrame)
	return data, next, ep, err
}

// register makes conn the connection of the hello's replica id, closing
// the one it replaces. It returns why it refuses, or "".
func (m *Master) register(h Hello, addr string, conn net.Conn) (*slaveState, uint64, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if reason := m.room(h.ReplicaID); reason != "" {
		return nil, 0, reason
	}
	s := m.slaves[h.ReplicaID]
	if s == nil {
		s = &slaveState{id: h.ReplicaID}
		m.slaves[h.ReplicaID] = s
	}
	if s.conn != nil {
		m.log.Warn("replica reconnected: closing its previous connection", "replica", s.id, "previous", s.addr, "peer", addr)
		s.conn.Close()
	}
	m.nextSes++
	s.addr, s.conn, s.session = addr, conn, m.nextSes
	s.caughtUp, s.sampled = time.Now(), 0 // a new connection has its time to catch up
	// What it holds now, if less than before (a crash). Bytes beyond its
	// last ack count once it acks them on this connection: a slave with an
	// epoch file appends, and acks, only after it checked that its log is
	// a prefix of the master's; a hello's end is not such a check.
	m.setAckedLocked(s, min(s.acked, h.End))
	return s, s.session, ""
}

func (m *Master) unregister(s *slaveState, session uint64) {
	m.mu.Lock()
	if s.session == session {
		s.conn = nil
	}
	m.mu.Unlock()
}

func (m *Master) acked(s *slaveState) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.acked
}

// setAckedLocked records a replica's ack and wakes WaitAcked. m.mu is held.
func (m *Master) setAckedLocked(s *slaveState, end int64) {
	if end != s.acked {
		s.acked = end
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// readAcks reads the slave's acks until the connection fails. An ack must
// not go back, nor beyond what was sent.
func (m *Master) readAcks(conn net.Conn, s *session, sent *atomic.Int64) error {
	var b [AckSize]byte
	last := s.acked
	for {
		if err := conn.SetReadDeadline(time.Now().Add(m.cfg.ReadTimeout)); err != nil {
			return err
		}
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			return fmt.Errorf("replication: read ack: %w", err)
		}
		end, err := DecodeAck(b[:])
		if err != nil {
			return err
		}
		switch top := sent.Load(); {
		case end > top:
			return fmt.Errorf("%w: ack of %d, beyond the %d sent", ErrProtocol, end, top)
		case end < last:
			return fmt.Errorf("%w: ack of %d after an ack of %d", ErrProtocol, end, last)
		}
		moved := end != last // else a keep-alive
		last = end
		m.mu.Lock()
		if s.state.session == s.session {
			if moved {
				m.setAckedLocked(s.state, end)
			}
			s.state.noteAck(end, m.src.MaxOffset(), time.Now())
		}
		m.mu.Unlock()
		if moved && m.cfg.OnAck != nil {
			m.cfg.OnAck()
		}
	}
}

// stream sends the log from the slave's end as data frames, and a
// heartbeat after HeartbeatInterval without one, until ctx ends or a write
// fails.
func (m *Master) stream(ctx context.Context, conn net.Conn, s *session, sent *atomic.Int64) error {
	hb := time.NewTimer(m.cfg.HeartbeatInterval)
	defer hb.Stop()
	poll := time.NewTicker(m.cfg.PollInterval)
	defer poll.Stop()
	hdr := make([]byte, 0, FrameHeaderSize)
	off, data, next, ep := s.from, s.first, s.next, s.firstEpoch
	ms := &metaSender{src: m.cfg.Meta, every: m.cfg.MetaInterval, kicks: &m.metaKicks}
	rechecked := false
	var confirmed int64 // the last confirm frame's offset
	for {
		if c := m.confirmed(off); c > confirmed {
			if err := m.send(conn, hdr, FrameHeader{Type: FrameConfirm, Epoch: m.cfg.Epoch, Offset: c}, nil); err != nil {
				return err
			}
			confirmed = c
		}
		if ms.due(time.Now()) {
			if err := m.sendMeta(conn, hdr, ms, s.maxFrame); err != nil {
				return err
			}
			hb.Reset(m.cfg.HeartbeatInterval)
		}
		if len(data) > 0 {
			sent.Store(next) // before the write: the ack may come before it returns
			if err := m.send(conn, hdr, FrameHeader{Type: FrameData, Epoch: ep, Offset: off, BodyLen: uint32(len(data))}, data); err != nil {
				return err
			}
			off = next
			hb.Reset(m.cfg.HeartbeatInterval)
		}
		var err error
		data, next, ep, err = m.read(off, s.buf, s.maxFrame)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, commitlog.ErrOffsetTooBig):
			return fmt.Errorf("replication: read the log at %d for the replica: %w", off, err)
		}
		data = nil
		wake := m.waitChan()
		if !rechecked && m.src.MaxOffset() > off { // appended (and notified) since the read
			rechecked = true
			continue
		}
		rechecked = false
		var acked <-chan struct{} // a confirm to send may follow an ack
		if m.cfg.Confirmed != nil && confirmed < off {
			acked = m.ackChan()
			if m.confirmed(off) > confirmed {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-acked:
		case <-poll.C:
		case <-hb.C:
			if err := m.send(conn, hdr, FrameHeader{Type: FrameHeartbeat, Epoch: m.cfg.Epoch, Offset: m.src.MaxOffset()}, nil); err != nil {
				return err
			}
			hb.Reset(m.cfg.HeartbeatInterval)
		}
	}
}

// confirmed is the confirmed offset a stream that has sent up to sent
// tells its slave: 0 without MasterConfig.Confirmed.
func (m *Master) confirmed(sent int64) int64 {
	if m.cfg.Confirmed == nil {
		return 0
	}
	return min(m.cfg.Confirmed(), sent)
}

// send writes a frame: its header and body in one write.
func (m *Master) send(conn net.Conn, hdr []byte, h FrameHeader, body []byte) error {
	if err := conn.SetWriteDeadline(time.Now().Add(m.cfg.WriteTimeout)); err != nil {
		return err
	}
	bufs := net.Buffers{AppendFrameHeader(hdr[:0], h), body}
	if _, err := bufs.WriteTo(conn); err != nil {
		return fmt.Errorf("replication: send %s frame at %d: %w", h.Type, h.Offset, err)
	}
	return nil
}

// sleepCtx waits d, or less if ctx ends first; it reports whether ctx is
// still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
