package replication

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication/epoch"
)

// Sink is the replica's log as a Slave writes it.
type Sink interface {
	// AppendReplica appends the master's bytes at off, which must be the
	// log's end, and returns the new end.
	AppendReplica(ctx context.Context, off int64, data []byte) (end int64, err error)
	MaxOffset() int64
	SegmentBytes() int64
}

var _ Sink = (*commitlog.Log)(nil)

// Epochs is the replica's epoch file as a Slave uses it.
type Epochs interface {
	Entries() []epoch.Entry
	Last() (epoch.Entry, bool)
	Append(epoch int32, start int64) error
	TruncateAfter(offset int64) error
}

var _ Epochs = (*epoch.File)(nil)

// Slave keeps a replica's log a copy of the master's: one goroutine
// connects to the master (again after a failure, with back-off), appends
// the frames it receives and, beside it, another acks the log's end. Its
// methods are safe for concurrent use.
type Slave struct {
	cfg SlaveConfig
	dst Sink
	log *slog.Logger

	ctx       context.Context // cancelled by Close
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu     sync.Mutex
	status SlaveStatus
}

// SlaveStatus is what a Slave knows of its replication.
type SlaveStatus struct {
	Connected bool  // a handshake succeeded and the connection is up
	Sessions  int   // handshakes that succeeded
	End       int64 // the replica's log end
	MasterEnd int64 // the master's log end, as last heard
	Epoch     int32 // the master's epoch, as last heard
	Confirmed int64 // the master's confirmed offset, as last heard (FrameConfirm)
	// MetaSnapshots counts the metadata snapshots OnMeta took.
	MetaSnapshots int
	// LastErr is why the last connection attempt or connection ended: a
	// *RefusedError when a side refused the handshake, a
	// *TruncateNeededError when the slave stopped for it.
	LastErr error
	// Stopped says the slave stopped for good (LastErr says why) and does
	// not reconnect: its log must be truncated (*TruncateNeededError), or
	// its epoch file could not be written. Its owner restarts it.
	Stopped bool
}

// StartSlave starts replicating into dst from the master at
// cfg.MasterAddr, until Close. dst must take no other appends.
func StartSlave(cfg SlaveConfig, dst Sink) (*Slave, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Slave{
		cfg: cfg,
		dst: dst,
		log: cfg.Logger.With("component", "replication", "role", "slave", "master", cfg.MasterAddr),
	}
	s.status.End = dst.MaxOffset()
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.wg.Go(s.run)
	return s, nil
}

// Close disconnects and returns once the slave's goroutines are done; an
// append under way completes or fails first. It does not close the log.
// Later calls return ErrClosed.
func (s *Slave) Close() error {
	err := ErrClosed
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		err = nil
	})
	return err
}

// Status returns the slave's state.
func (s *Slave) Status() SlaveStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Slave) update(f func(*SlaveStatus)) {
	s.mu.Lock()
	f(&s.status)
	s.mu.Unlock()
}

// run connects until Close, pausing between attempts: RetryMin after a
// connection that did well (appended, or lasted RetryMax), else twice the
// last pause, up to RetryMax, so that a master that keeps refusing or
// sending bad frames is not hammered.
func (s *Slave) run() {
	pause := s.cfg.RetryMin
	for {
		start, from := time.Now(), s.dst.MaxOffset()
		served, err := s.connect()
		if s.ctx.Err() != nil {
			return
		}
		var fatal *stopError
		if errors.As(err, &fatal) {
			s.update(func(st *SlaveStatus) { st.Connected, st.LastErr, st.Stopped = false, fatal.err, true })
			s.log.Error("replication stopped until the slave is restarted", "err", fatal.err, "end", s.dst.MaxOffset())
			return
		}
		s.update(func(st *SlaveStatus) { st.Connected, st.LastErr = false, err })
		if served && (s.dst.MaxOffset() > from || time.Since(start) >= s.cfg.RetryMax) {
			pause = s.cfg.RetryMin
		}
		if served {
			s.log.Warn("disconnected from the master", "err", err, "end", s.dst.MaxOffset(), "retry_in", pause)
		} else {
			s.log.Warn("cannot replicate from the master", "err", err, "retry_in", pause)
		}
		if !sleepCtx(s.ctx, pause) {
			return
		}
		pause = min(2*pause, s.cfg.RetryMax)
	}
}

// connect runs one connection: the handshake, then frames until the
// connection fails. served says the handshake succeeded.
func (s *Slave) connect() (served bool, err error) {
	dial := s.cfg.Dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	dctx, cancel := context.WithTimeout(s.ctx, s.cfg.DialTimeout)
	conn, err := dial(dctx, s.cfg.MasterAddr)
	cancel()
	if err != nil {
		return false, fmt.Errorf("replication: dial the master: %w", err)
	}
	kick := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(s.ctx)
	var closer sync.WaitGroup
	defer closer.Wait()
	defer cancel()
	closer.Go(func() { <-ctx.Done(); conn.Close() }) // unblocks reads and writes

	end := s.dst.MaxOffset()
	w, err := s.handshake(conn, end)
	if err != nil {
		return false, err
	}
	kick <- struct{}{} // ack the end at once: the master counts the slave's bytes from its first ack
	s.update(func(st *SlaveStatus) {
		st.Connected, st.Sessions, st.End, st.MasterEnd, st.Epoch, st.LastErr = true, st.Sessions+1, end, w.End, w.Epoch, nil
	})
	s.log.Info("replicating from the master", "from", end, "master_end", w.End, "epoch", w.Epoch)

	var (
		firstErr error
		once     sync.Once
		acked    atomic.Int64
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err })
		cancel()
	}
	acked.Store(end)
	var ackers sync.WaitGroup
	ackers.Go(func() { fail(s.sendAcks(ctx, conn, &acked, kick)) })
	fail(s.receive(ctx, conn, end, w.Epoch, &acked, kick))
	ackers.Wait()
	return true, firstErr
}

// stopError wraps an error after which the slave must not reconnect.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// handshake sends the hello and checks the master's welcome: with an
// epoch file, it compares its list with the master's before anything else
// (a refusal included: the list says where to truncate), stops for good
// when its log extends past the common point, and else drops its entries
// from that point on (their epochs hold no data here; the frames record
// the epochs that follow).
func (s *Slave) handshake(conn net.Conn, end int64) (Welcome, error) {
	if err := conn.SetDeadline(time.Now().Add(s.cfg.DialTimeout)); err != nil {
		return Welcome{}, err
	}
	seg := s.dst.SegmentBytes()
	hello := Hello{Version: Version, ReplicaID: s.cfg.ReplicaID, SegmentBytes: seg, End: end, MaxFrameBytes: uint32(s.cfg.MaxFrameBytes)}
	if s.cfg.Signer != nil {
		p := &HelloProof{}
		if _, err := rand.Read(p.Nonce[:]); err != nil {
			return Welcome{}, fmt.Errorf("replication: hello's nonce: %w", err)
		}
		p.Date, p.Authorization = s.cfg.Signer.SignGRPC(hello.SignedContent(p.Nonce), time.Now())
		hello.Proof = p
	}
	if _, err := conn.Write(AppendHello(nil, hello)); err != nil {
		return Welcome{}, fmt.Errorf("replication: send hello: %w", err)
	}
	w, err := ReadWelcome(conn)
	if err != nil && hello.Proof != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		err = fmt.Errorf("%w (the master closed the connection after a signed hello: a master that predates signed hellos does so; upgrade it, docs/REPLICATION.md)", err)
	}
	if err == nil && w.Version == Version && end < w.Start { // nothing of the log is kept: no history to compare
		return Welcome{}, &stopError{&ResyncNeededError{From: w.Start, End: end, Epochs: w.Epochs}}
	}
	if err == nil && w.Version == Version && s.cfg.Epochs != nil {
		if err := s.checkHistory(w, end); err != nil {
			return Welcome{}, err
		}
	}
	switch {
	case err != nil:
		return Welcome{}, err
	case w.Reason != "":
		return Welcome{}, &RefusedError{By: "master", Reason: w.Reason}
	case w.Version != Version:
		return Welcome{}, &RefusedError{By: "slave", Reason: fmt.Sprintf("the master speaks protocol version %d, the replica %d", w.Version, Version)}
	case w.SegmentBytes != seg:
		return Welcome{}, &RefusedError{By: "slave", Reason: fmt.Sprintf("the master's segment size is %d bytes, the replica's %d", w.SegmentBytes, seg)}
	case w.End < end:
		return Welcome{}, &RefusedError{By: "slave", Reason: fmt.Sprintf("the master's log ends at %d, below the replica's end %d", w.End, end)}
	}
	return w, conn.SetDeadline(time.Time{})
}

// checkHistory compares the replica's epoch list with the master's
// (docs/REPLICATION.md, "Rejoining a master").
func (s *Slave) checkHistory(w Welcome, end int64) error {
	p, ok := epoch.LastCommonPoint(s.cfg.Epochs.Entries(), w.Epochs, end, w.End)
	if !ok {
		p = 0
	}
	if end > p {
		return &stopError{&TruncateNeededError{To: p, Cut: end - p}}
	}
	if err := s.cfg.Epochs.TruncateAfter(end); err != nil {
		return &stopError{fmt.Errorf("replication: drop the epochs without data from the epoch file: %w", err)}
	}
	return nil
}

// receive appends the data frames from the master, each at the log's end,
// and publishes the new end to the acker, until a frame is refused or the
// connection fails.
func (s *Slave) receive(ctx context.Context, conn net.Conn, end int64, masterEpoch int32, acked *atomic.Int64, kick chan<- struct{}) error {
	buf := make([]byte, 0, min(s.cfg.MaxFrameBytes, 256<<10))
	meta := metaReceiver{max: s.cfg.MaxMetaBytes}
	dataEpoch := int32(-1) // the last data frame's epoch, or the epoch file's last
	if s.cfg.Epochs != nil {
		if last, ok := s.cfg.Epochs.Last(); ok {
			dataEpoch = last.Epoch
		}
	}
	for {
		if err := conn.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout)); err != nil {
			return err
		}
		h, body, err := ReadFrame(conn, buf, s.cfg.MaxFrameBytes)
		if err != nil {
			return err
		}
		if cap(body) > cap(buf) {
			buf = body[:0] // keep the larger buffer
		}
		switch {
		case h.Type != FrameData && h.Epoch < masterEpoch:
			return fmt.Errorf("%w: %s frame of epoch %d after epoch %d", ErrProtocol, h.Type, h.Epoch, masterEpoch)
		case h.Type != FrameData:
			masterEpoch = h.Epoch
		case h.Epoch > masterEpoch: // data of an epoch newer than the master's own
			return fmt.Errorf("%w: data frame at %d of epoch %d, but the master is in epoch %d", ErrProtocol, h.Offset, h.Epoch, masterEpoch)
		case h.Epoch < dataEpoch:
			return fmt.Errorf("%w: %w: data frame at %d of epoch %d, after data of epoch %d", ErrProtocol, ErrStaleEpoch, h.Offset, h.Epoch, dataEpoch)
		}
		if h.Type == FrameMeta {
			snap, err := meta.add(h.Offset, body)
			if err != nil {
				return err
			}
			if snap != nil {
				s.takeMeta(snap)
			}
			continue
		}
		if h.Type == FrameConfirm {
			if h.Offset > end {
				return fmt.Errorf("%w: the master confirms %d, beyond the replica's end %d", ErrProtocol, h.Offset, end)
			}
			if s.cfg.OnConfirm != nil {
				s.cfg.OnConfirm(h.Offset)
			}
			s.update(func(st *SlaveStatus) { st.Confirmed = max(st.Confirmed, h.Offset) })
			continue
		}
		masterEnd := h.Offset + int64(len(body))
		if h.Type == FrameHeartbeat && h.Offset < end {
			return fmt.Errorf("%w: the master's log ends at %d, below the replica's end %d", ErrProtocol, h.Offset, end)
		}
		if h.Type == FrameData {
			if h.Offset != end {
				return &OffsetError{Frame: h.Offset, End: end}
			}
			if err := s.recordEpoch(h); err != nil {
				return err
			}
			dataEpoch = h.Epoch
			n, err := s.dst.AppendReplica(ctx, h.Offset, body)
			if err != nil { // the next hello reports what it stored all the same
				return fmt.Errorf("replication: append the master's %d bytes at %d: %w", len(body), h.Offset, err)
			}
			end = n
			acked.Store(end)
			select {
			case kick <- struct{}{}:
			default:
			}
		}
		s.update(func(st *SlaveStatus) {
			st.End, st.MasterEnd, st.Epoch = end, max(st.MasterEnd, masterEnd), masterEpoch
		})
	}
}

// recordEpoch appends {frame epoch, frame offset} to the epoch file when
// the frame's epoch is newer than its last entry, before the frame's bytes
// are appended: its log is a prefix of the master's, so the epoch's data
// starts here (replication/epoch's rules).
func (s *Slave) recordEpoch(h FrameHeader) error {
	if s.cfg.Epochs == nil {
		return nil
	}
	if last, ok := s.cfg.Epochs.Last(); ok && h.Epoch <= last.Epoch {
		return nil
	}
	if err := s.cfg.Epochs.Append(h.Epoch, h.Offset); err != nil {
		return &stopError{fmt.Errorf("replication: record epoch %d at %d in the epoch file: %w", h.Epoch, h.Offset, err)}
	}
	s.log.Info("the master's data of a new epoch starts", "epoch", h.Epoch, "offset", h.Offset)
	return nil
}

// takeMeta hands a metadata snapshot to OnMeta.
func (s *Slave) takeMeta(snap []byte) {
	if s.cfg.OnMeta == nil {
		return
	}
	if err := s.cfg.OnMeta(snap); err != nil {
		s.log.Warn("metadata snapshot from the master not applied; the next one replaces it", "bytes", len(snap), "err", err)
		return
	}
	s.update(func(st *SlaveStatus) { st.MetaSnapshots++ })
}

// sendAcks acks the log's end as it grows, and every AckInterval.
func (s *Slave) sendAcks(ctx context.Context, conn net.Conn, acked *atomic.Int64, kick <-chan struct{}) error {
	t := time.NewTicker(s.cfg.AckInterval)
	defer t.Stop()
	last := int64(-1) // the first ack goes at once, even of the hello's end
	var b [AckSize]byte
	for {
		force := false
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-t.C:
			force = true
		}
		end := acked.Load()
		if end == last && !force {
			continue
		}
		if err := conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
			return err
		}
		if _, err := conn.Write(AppendAck(b[:0], end)); err != nil {
			return fmt.Errorf("replication: send ack of %d: %w", end, err)
		}
		last = end
	}
}
