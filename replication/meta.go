package replication

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// Metadata (topics, groups, consumer offsets, delay progress, dead-letter
// state: whatever the broker puts in a snapshot) reaches slaves on the
// same connection as the log: the master sends a whole snapshot when a
// stream starts and again whenever the snapshot's version changed, looked
// at every MetaInterval. A snapshot is opaque here; it goes in chunks of
// at most a frame each, the first at offset 0, and the slave hands it to
// SlaveConfig.OnMeta once it has every byte. A newer snapshot simply
// replaces an older one, so nothing is lost when a stream restarts.

// metaLenSize is the snapshot-length prefix of a metadata frame's body.
const metaLenSize = 4

// DefaultMaxMetaBytes bounds a metadata snapshot a slave takes.
const DefaultMaxMetaBytes = 64 << 20

// MetaSource is the master's metadata as slaves copy it.
type MetaSource interface {
	// MetaVersion changes whenever the metadata changes; it is cheap.
	MetaVersion() uint64
	// MetaSnapshot returns the metadata and the version it holds.
	MetaSnapshot() (version uint64, snapshot []byte, err error)
}

// metaSender is one stream's metadata state: the version last sent.
type metaSender struct {
	src      MetaSource
	every    time.Duration
	kicks    *atomic.Uint64 // Master.NotifyMeta's count
	seen     uint64         // the count at the last look
	sent     uint64
	sentAny  bool
	lastLook time.Time
}

// due reports whether the snapshot should be sent now: never sent on this
// stream, or changed since, looked at no more often than every interval
// unless NotifyMeta was called since the last look.
func (ms *metaSender) due(now time.Time) bool {
	if ms.src == nil {
		return false
	}
	k := ms.kicks.Load()
	if ms.sentAny && k == ms.seen && now.Sub(ms.lastLook) < ms.every {
		return false
	}
	ms.seen, ms.lastLook = k, now
	return !ms.sentAny || ms.src.MetaVersion() != ms.sent
}

// send writes the current snapshot in chunks of at most chunk bytes.
func (m *Master) sendMeta(conn net.Conn, hdr []byte, ms *metaSender, chunk int) error {
	version, snap, err := ms.src.MetaSnapshot()
	if err != nil {
		m.log.Warn("metadata snapshot for a replica failed; the log keeps streaming", "err", err)
		ms.sent, ms.sentAny = version, true // try again when it changes
		return nil
	}
	if len(snap) == 0 || int64(len(snap)) > int64(^uint32(0)) {
		m.log.Warn("metadata snapshot not sent: its size is out of range", "bytes", len(snap))
		ms.sent, ms.sentAny = version, true
		return nil
	}
	chunk = max(chunk-metaLenSize, 1)
	body := make([]byte, metaLenSize, metaLenSize+min(chunk, len(snap)))
	binary.BigEndian.PutUint32(body, uint32(len(snap)))
	for off := 0; off < len(snap); off += chunk {
		part := snap[off:min(off+chunk, len(snap))]
		body = append(body[:metaLenSize], part...)
		if err := m.send(conn, hdr, FrameHeader{Type: FrameMeta, Epoch: m.cfg.Epoch, Offset: int64(off), BodyLen: uint32(len(body))}, body); err != nil {
			return err
		}
	}
	ms.sent, ms.sentAny = version, true
	return nil
}

// metaReceiver assembles a snapshot from its chunks.
type metaReceiver struct {
	max   int
	total int
	buf   []byte
}

// add takes a metadata frame's body at offset off and returns the whole
// snapshot once it has every byte. A chunk out of place, or a snapshot
// announced larger than max, is a protocol error: the buffer only grows as
// chunks arrive, so a forged length allocates nothing.
func (r *metaReceiver) add(off int64, body []byte) ([]byte, error) {
	total := int64(binary.BigEndian.Uint32(body))
	chunk := body[metaLenSize:]
	if off == 0 {
		r.buf, r.total = r.buf[:0], 0
		if total == 0 {
			return nil, fmt.Errorf("%w: metadata snapshot of 0 bytes", ErrProtocol)
		}
		if total > int64(r.max) {
			return nil, fmt.Errorf("%w: metadata snapshot of %d bytes, at most %d taken (SlaveConfig.MaxMetaBytes)", ErrProtocol, total, r.max)
		}
		r.total = int(total)
	}
	switch {
	case r.total == 0:
		return nil, fmt.Errorf("%w: metadata chunk at %d without the snapshot's first chunk", ErrProtocol, off)
	case total != int64(r.total):
		return nil, fmt.Errorf("%w: metadata chunk at %d says the snapshot has %d bytes, its first chunk %d", ErrProtocol, off, total, r.total)
	case off != int64(len(r.buf)):
		return nil, fmt.Errorf("%w: metadata chunk at %d, %d bytes of the snapshot received", ErrProtocol, off, len(r.buf))
	case len(r.buf)+len(chunk) > r.total:
		return nil, fmt.Errorf("%w: metadata chunk at %d of %d bytes runs past the snapshot's %d", ErrProtocol, off, len(chunk), r.total)
	}
	r.buf = append(r.buf, chunk...)
	if len(r.buf) < r.total {
		return nil, nil
	}
	snap := r.buf
	r.buf, r.total = nil, 0 // the callee may keep snap
	return snap, nil
}
