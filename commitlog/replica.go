package commitlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/message"
)

// Replication: a slave's log holds the master's bytes at the master's
// offsets. The master reads them with CopyReplica, entry by entry as they
// lie in its segments (records, the fillers and skipped ranges between
// them, a segment's end filler), and the slave writes them with
// AppendReplica, as they are: records are not re-stamped. Both logs must
// have the same segment size, so that every segment's end filler lies
// where the master put it (the replication handshake checks it).

// ErrReplicaOffset is the kind of every *ReplicaOffsetError.
var ErrReplicaOffset = errors.New("commitlog: replica append not at the log's end")

// ReplicaOffsetError reports an AppendReplica at an offset other than the
// log's end. It unwraps to ErrReplicaOffset.
type ReplicaOffsetError struct {
	Offset int64 // where the append was to go
	End    int64 // the log's end
}

func (e *ReplicaOffsetError) Error() string {
	return fmt.Sprintf("commitlog: replica append at offset %d, but the log ends at %d", e.Offset, e.End)
}

// Unwrap returns ErrReplicaOffset.
func (e *ReplicaOffsetError) Unwrap() error { return ErrReplicaOffset }

// AppendReplica appends data, bytes of a master's log that start at log
// offset off, as they are. off must be the log's end (else a
// *ReplicaOffsetError naming both, nothing written). data must be whole
// entries as CopyReplica returns them: records, each passing the checks
// recovery makes (size, magic, CRC, its own offset as PHYSICALOFFSET),
// pad fillers and skipped ranges, all leaving room for a segment's end
// filler after them; and, only as its last 8 bytes, the end filler of the
// segment, which must say exactly how many bytes the segment has left. A
// batch that fails a check is refused with ErrInvalidBatch before anything
// is written. The end filler rolls the log to its next segment, so the
// log's end is then that segment's start.
//
// It returns the log's end after the append. Under SyncFlush it returns
// once the bytes are durable, as Append does (ErrFlushTimeout: stored but
// not known durable). An error from the roll after the records were
// appended returns the end after those records: the log holds them, and
// recovery accepts them.
//
// A log that takes replica appends takes no others: its own writes must
// not put bytes where the master has others. The first call turns off for
// good the direct writes of the staging buffer, which pad the log to a
// block boundary as they flush (stage.go).
func (l *Log) AppendReplica(ctx context.Context, off int64, data []byte) (end int64, err error) {
	body, blank, nrec, lastTs, err := l.validateReplica(off, data)
	if err != nil {
		return l.MaxOffset(), err
	}
	if err := l.writable(); err != nil {
		return l.MaxOffset(), err
	}
	waitFlush := l.cfg.FlushMode == SyncFlush
	writeThrough := !waitFlush && l.cfg.writeMode == writeBuffered
	l.mu.Lock()
	if l.directOn.Swap(false) {
		l.log.Info("the log takes replica appends: direct writes (which pad the log at flush) are off")
	}
	end, err = l.appendReplicaLocked(ctx, off, body, blank, nrec, lastTs)
	var w *waiter
	if end > off && waitFlush {
		w = l.addWaiter(end)
	}
	l.mu.Unlock()
	if end == off {
		return end, err
	}
	l.stats.appends.Add(1)
	l.stats.records.Add(int64(nrec))
	l.stats.bytes.Add(end - off)
	var ferr error
	switch {
	case writeThrough:
		ferr = l.writeThrough(end)
	case waitFlush:
		l.kickFlusher()
		ferr = l.wait(ctx, w)
	}
	return end, errors.Join(err, ferr)
}

// appendReplicaLocked writes body (whole entries) at off, then, if blank
// is set, rolls to the next segment, which writes the end filler. It
// returns the log's end. l.mu is held.
func (l *Log) appendReplicaLocked(ctx context.Context, off int64, body []byte, blank bool, nrec int, lastTs int64) (int64, error) {
	if l.writeOff != off {
		return l.writeOff, &ReplicaOffsetError{Offset: off, End: l.writeOff}
	}
	if len(body) > 0 {
		if l.writeOff+int64(len(body))+message.BlankSize > l.active.end() {
			return l.writeOff, fmt.Errorf("%w: replica batch at %d of %d bytes does not fit segment %s", ErrInvalidBatch, off, len(body), l.active.path)
		}
		if err := l.makeRoomLocked(ctx, len(body)); err != nil { // fits: it only waits for staging room
			return l.writeOff, err
		}
		if l.writeOff != off { // changed while it waited
			return l.writeOff, &ReplicaOffsetError{Offset: off, End: l.writeOff}
		}
		if _, err := l.appendLocked(ctx, [][]byte{body}, len(body), nrec, nil, true); err != nil {
			return l.writeOff, err
		}
		if nrec > 0 {
			l.lastTs.Store(lastTs)
		}
	}
	if !blank {
		return l.writeOff, nil
	}
	return l.writeOff, l.sealReplicaLocked(ctx)
}

// sealReplicaLocked ends the active segment with its filler at the log's
// end and makes the next segment active (rollLocked), waiting, as
// makeRoomLocked does, while the staging buffer already holds a roll.
// l.mu is held.
func (l *Log) sealReplicaLocked(ctx context.Context) error {
	for {
		if err := l.writable(); err != nil {
			return err
		}
		if l.cfg.writeMode == writeBuffered && l.pendSplit >= 0 {
			if l.cfg.FlushMode == SyncFlush {
				l.kickFlusher()
			}
			l.roomCond.Wait()
			continue
		}
		return l.rollLocked(ctx)
	}
}

// validateReplica checks data, a replica batch at log offset off, the way
// recovery checks what it finds, and splits it: body holds the entries
// before the segment's end filler, blank says the filler ends data.
func (l *Log) validateReplica(off int64, data []byte) (body []byte, blank bool, nrec int, lastTs int64, err error) {
	segSize := l.cfg.SegmentBytes
	bad := func(at int, format string, args ...any) error {
		return fmt.Errorf("%w: replica batch at %d: entry at log offset %d: %s", ErrInvalidBatch, off, off+int64(at), fmt.Sprintf(format, args...))
	}
	if len(data) == 0 {
		return nil, false, 0, 0, fmt.Errorf("%w: empty replica batch at %d", ErrInvalidBatch, off)
	}
	if off < 0 {
		return nil, false, 0, 0, fmt.Errorf("%w: replica batch at negative offset %d", ErrInvalidBatch, off)
	}
	segPos := off % segSize
	for p := 0; p < len(data); {
		pos := segPos + int64(p) // position in the segment
		size, magic, ok := message.RecordSize(data[p:])
		switch {
		case !ok:
			return nil, false, 0, 0, bad(p, "%d bytes left, too few for an entry", len(data)-p)
		case magic == message.MagicBlank:
			if int64(size) != segSize-pos {
				return nil, false, 0, 0, bad(p, "segment filler says %d bytes remain, %d do (segment size %d)", size, segSize-pos, segSize)
			}
			if p+message.BlankSize != len(data) {
				return nil, false, 0, 0, bad(p, "%d bytes follow the segment's end filler", len(data)-p-message.BlankSize)
			}
			return data[:p], true, nrec, lastTs, nil
		case magic == magicHole || magic == magicPad:
			if size < 8 || int64(size) > int64(len(data)-p) || pos+int64(size)+message.BlankSize > segSize {
				return nil, false, 0, 0, bad(p, "%s filler of size %d does not fit", fillerName(magic), size)
			}
		default:
			if size < message.MinRecordSize || int64(size) > int64(len(data)-p) || pos+int64(size)+message.BlankSize > segSize {
				return nil, false, 0, 0, bad(p, "record size %d does not fit (%d bytes left in the batch, %d in the segment)", size, len(data)-p, segSize-pos)
			}
			rec := data[p : p+int(size)]
			if err := message.Check(rec, off+int64(p), true); err != nil {
				return nil, false, 0, 0, bad(p, "%v", err)
			}
			nrec++
			lastTs = message.StoreTimestampOf(rec)
		}
		p += int(size)
	}
	return data, false, nrec, lastTs, nil
}

// CopyReplica copies into buf the log's bytes from off on as a replica
// appends them (AppendReplica): whole entries back to back, with the
// fillers and skipped ranges between records, as many as fit in buf,
// stopping at the readable end and after a segment's end filler, of which
// it copies the 8 bytes that say so; next is then the next segment's
// start. A first entry larger than buf gets a buffer of its own if it is at
// most maxBytes, else an error matching ErrRecordTooLarge. off must be
// where an entry starts (a replica's end); at the readable end it returns
// ErrOffsetTooBig. Safe for concurrent use.
func (l *Log) CopyReplica(off int64, buf []byte, maxBytes int) (data []byte, next int64, err error) {
	for {
		seg, err := l.acquireRange(off, 8)
		if err != nil {
			return nil, off, err
		}
		end := min(l.committed.Load(), seg.end())
		n := min(int64(len(buf)), end-off)
		k, err := l.readInto(seg, buf[:n], off)
		seg.release()
		if err != nil && k < int(n) {
			return nil, off, fmt.Errorf("commitlog: read %s at %d: %w", seg.path, off-seg.base, err)
		}
		b := buf[:k]
		p, next, large, err := replicaEntries(b, off, seg.end(), end)
		switch {
		case err != nil:
			return nil, off, err
		case p == 0 && large == 0:
			return nil, off, fmt.Errorf("commitlog: CopyReplica: a buffer of %d bytes holds no entry", len(buf))
		case p == 0 && large > maxBytes:
			return nil, off, fmt.Errorf("%w: entry at %d of %d bytes, more than %d", ErrRecordTooLarge, off, large, maxBytes)
		case p == 0:
			buf = make([]byte, large)
			continue
		}
		return b[:p], next, nil
	}
}

// replicaEntries walks the entries at the front of b, log bytes from off
// in a segment ending at segEnd, of which those below end are readable. It
// returns how many bytes of whole entries b holds and the offset after
// them (segEnd after the end filler), or, when b holds none, the size of
// the first (large).
func replicaEntries(b []byte, off, segEnd, end int64) (p int, next int64, large int, err error) {
	for p+8 <= len(b) {
		at := off + int64(p)
		size, magic, _ := message.RecordSize(b[p:])
		switch {
		case magic == message.MagicBlank:
			return p + message.BlankSize, segEnd, 0, nil
		case (magic == magicHole || magic == magicPad) && size >= 8:
		case size < message.MinRecordSize:
			if p == 0 {
				return 0, off, 0, fmt.Errorf("%w: %d: size %d (not where an entry starts)", ErrBadOffset, at, size)
			}
			return p, at, 0, nil // for the next call to report
		}
		if at+int64(size) > end {
			if p == 0 {
				return 0, off, 0, fmt.Errorf("%w: entry at %d of %d bytes beyond %d", ErrBadOffset, at, size, end)
			}
			return p, at, 0, nil
		}
		if p+int(size) > len(b) {
			if p == 0 {
				return 0, off, int(size), nil
			}
			return p, at, 0, nil
		}
		p += int(size)
	}
	return p, off + int64(p), 0, nil
}
