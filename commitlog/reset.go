package commitlog

import (
	"context"
	"fmt"
)

// ResetTo empties the log and makes it start at offset, a segment
// boundary past its end: a replica too far behind its master, or with an
// empty disk, copies the master's log from the master's first retained
// segment (docs/REPLICATION.md, "Resync from the master's first
// segment"). Every record it held is cut, and the cut recorded in
// StateDir/truncations.log (Offset is the new start) before any segment
// goes. The segments are removed newest first, then the segment at offset
// is created: a crash in between leaves either the old log's prefix, an
// empty log at 0, or the new one, each of which a retry resets again.
// After ResetTo, Open finds an empty log whose first and end offset is
// offset.
//
// The log must not be open, here or in another process.
func ResetTo(ctx context.Context, cfg Config, offset int64, reason string) (TruncateReport, error) {
	l, cfg, err := openOffline(ctx, cfg)
	if err != nil {
		return TruncateReport{}, err
	}
	defer l.closeOffline()
	sl := l.segs.Load()
	minOff, end := sl.segs[0].base, l.writeOff
	rep := TruncateReport{Dir: cfg.Dir, At: cfg.Now().UTC(), Reason: reason, Offset: offset, OldEnd: end}
	switch {
	case offset == minOff && end == minOff:
		return rep, nil // already empty there
	case offset%cfg.SegmentBytes != 0:
		return rep, &TruncateOffsetError{Offset: offset, Min: minOff, End: end,
			Reason: fmt.Sprintf("a reset starts the log at a segment boundary (a multiple of %d)", cfg.SegmentBytes)}
	case offset <= end:
		return rep, &TruncateOffsetError{Offset: offset, Min: minOff, End: end,
			Reason: "a reset starts the log past its end (Truncate cuts it back)"}
	}
	if err := cutRecords(sl, minOff, end, &rep); err != nil {
		return rep, err
	}
	rep.Bytes = end - minOff
	for _, s := range sl.segs {
		rep.RemovedSegments = append(rep.RemovedSegments, s.path)
	}
	l.log.Warn("resetting the log to start at a later offset", "dir", cfg.Dir, "offset", offset, "old_start", minOff,
		"old_end", end, "records", rep.Records, "reason", reason)
	if err := l.appendTruncation(rep); err != nil {
		return rep, err
	}
	for i := len(sl.segs) - 1; i >= 0; i-- {
		s := sl.segs[i]
		s.retire()
		l.segs.Store(&segList{segs: sl.segs[:i]})
		if err := l.fs.Remove(s.path); err != nil {
			return rep, fmt.Errorf("commitlog: remove segment %s: %w", s.path, err)
		}
		if err := l.fs.SyncDir(cfg.Dir); err != nil {
			return rep, fmt.Errorf("commitlog: sync %s: %w", cfg.Dir, err)
		}
	}
	seg, err := l.createSegment(ctx, offset, false)
	if err != nil {
		return rep, err
	}
	l.segs.Store(&segList{segs: []*segment{seg}})
	l.active, l.writeOff = seg, offset
	l.flushed.Store(offset)
	l.lastTs.Store(0)
	l.cp.written = -1 // write it even if the value looks unchanged
	if err := l.writeCheckpoint(); err != nil {
		return rep, err
	}
	return rep, l.fs.SyncDir(cfg.StateDir)
}
