package commitlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/gantrymq/gantry/internal/failpoint"
)

// The checkpoint records a lower bound of the durable end of the log, so
// that recovery after a crash scans from there instead of from the first
// segment. It has two 64-byte slots written alternately; each holds
// [magic u32][seq u64][flushed i64][storeTs i64][segBytes i64][crc32 u32], and the valid
// slot with the highest seq wins, so a torn write never loses both.
const (
	checkpointFile  = "commitlog.checkpoint"
	checkpointMagic = 0x47434B50 // "GCKP"
	checkpointSlot  = 64
)

type checkpoint struct {
	seq      uint64
	flushed  int64
	storeTs  int64
	segBytes int64
	written  int64 // flushed value last written
}

func (l *Log) checkpointPath() string { return filepath.Join(l.cfg.StateDir, checkpointFile) }

func encodeCheckpoint(seq uint64, flushed, ts, segBytes int64) []byte {
	b := make([]byte, checkpointSlot)
	binary.BigEndian.PutUint32(b[0:], checkpointMagic)
	binary.BigEndian.PutUint64(b[4:], seq)
	binary.BigEndian.PutUint64(b[12:], uint64(flushed))
	binary.BigEndian.PutUint64(b[20:], uint64(ts))
	binary.BigEndian.PutUint64(b[28:], uint64(segBytes))
	binary.BigEndian.PutUint32(b[36:], crc32.ChecksumIEEE(b[:36]))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, bool) {
	if len(b) < 40 || binary.BigEndian.Uint32(b) != checkpointMagic ||
		binary.BigEndian.Uint32(b[36:]) != crc32.ChecksumIEEE(b[:36]) {
		return checkpoint{}, false
	}
	return checkpoint{
		seq:      binary.BigEndian.Uint64(b[4:]),
		flushed:  int64(binary.BigEndian.Uint64(b[12:])),
		storeTs:  int64(binary.BigEndian.Uint64(b[20:])),
		segBytes: int64(binary.BigEndian.Uint64(b[28:])),
	}, true
}

// readCheckpoint loads the newest valid slot.
func (l *Log) readCheckpoint() (checkpoint, bool) {
	f, err := l.fs.OpenFile(l.checkpointPath(), os.O_RDONLY, 0)
	if err != nil {
		return checkpoint{}, false
	}
	defer f.Close()
	b := make([]byte, 2*checkpointSlot)
	n, _ := f.ReadAt(b, 0)
	var best checkpoint
	found := false
	for slot := 0; slot < 2; slot++ {
		lo := slot * checkpointSlot
		if n < lo+checkpointSlot {
			continue
		}
		c, ok := decodeCheckpoint(b[lo : lo+checkpointSlot])
		if ok && (!found || c.seq > best.seq) {
			best, found = c, true
		}
	}
	return best, found
}

// writeCheckpoint persists the flushed offset if it changed.
func (l *Log) writeCheckpoint() error {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	flushed := l.flushed.Load()
	if flushed == l.cp.written && l.cp.seq > 0 {
		return nil
	}
	ts := l.lastTs.Load()
	if failpoint.Enabled {
		if err := failpoint.Inject("commitlog/checkpoint-write"); err != nil {
			return fmt.Errorf("commitlog: write checkpoint: %w", err)
		}
	}
	f, err := l.fs.OpenFile(l.checkpointPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: open checkpoint: %w", err)
	}
	defer f.Close()
	seq := l.cp.seq + 1
	if _, err := f.WriteAt(encodeCheckpoint(seq, flushed, ts, l.cfg.SegmentBytes), int64(seq%2)*checkpointSlot); err != nil {
		return fmt.Errorf("commitlog: write checkpoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync checkpoint: %w", err)
	}
	if l.cp.seq == 0 {
		if err := l.fs.SyncDir(l.cfg.StateDir); err != nil {
			return fmt.Errorf("commitlog: sync checkpoint dir: %w", err)
		}
	}
	l.cp.seq, l.cp.written = seq, flushed
	return nil
}
