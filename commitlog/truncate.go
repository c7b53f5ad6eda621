package commitlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// Truncation: a replica that rejoins a group after a failover may hold a
// tail the new master lacks (docs/REPLICATION.md, "Rejoining"). Its owner
// closes the log (and the store built on it), cuts it with Truncate at the
// point the replica shares with the master, and opens it again.
//
// Truncate works on a closed log's directory, not on an open Log: the bytes
// it removes have been read, dispatched into consume queues and indexed,
// and handed out as Regions; cutting them under a live Log would leave all
// of that pointing at bytes that are gone. Reopening the store over the
// truncated log drops what points past its end (broker/store's recovery).

// TruncationsFile is the file in StateDir to which Truncate appends one
// JSON line (a TruncateReport) per truncation that removed anything.
const TruncationsFile = "truncations.log"

// ErrTruncateOffset is the kind of every *TruncateOffsetError.
var ErrTruncateOffset = errors.New("commitlog: bad truncation offset")

// TruncateOffsetError reports a truncation offset Truncate refuses: outside
// the log, or not where an entry starts. It unwraps to ErrTruncateOffset.
type TruncateOffsetError struct {
	Offset   int64 // the offset asked for
	Min, End int64 // the log's first offset and its end
	Reason   string
}

func (e *TruncateOffsetError) Error() string {
	return fmt.Sprintf("commitlog: cannot truncate the log [%d, %d) at offset %d: %s", e.Min, e.End, e.Offset, e.Reason)
}

// Unwrap returns ErrTruncateOffset.
func (e *TruncateOffsetError) Unwrap() error { return ErrTruncateOffset }

// TruncateReport says what a truncation cut: the truncation record. It is
// also the JSON line Truncate appends to StateDir/truncations.log.
type TruncateReport struct {
	Dir    string    `json:"dir"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
	Offset int64     `json:"offset"` // the log's new end
	OldEnd int64     `json:"oldEnd"` // the log's end before
	Bytes  int64     `json:"bytes"`  // OldEnd - Offset: records and the fillers between them
	// Records counts the records cut; the fields after it describe the
	// first and the last of them (zero when Records is 0). Timestamps
	// are store timestamps, Unix milliseconds.
	Records             int   `json:"records"`
	FirstOffset         int64 `json:"firstOffset"`
	LastOffset          int64 `json:"lastOffset"`
	FirstStoreTimestamp int64 `json:"firstStoreTimestamp"`
	LastStoreTimestamp  int64 `json:"lastStoreTimestamp"`
	// RemovedSegments are the segment files deleted whole.
	RemovedSegments []string `json:"removedSegments,omitempty"`
}

// Truncate removes everything at and after offset from the closed log that
// cfg describes: the segments after the one holding offset are deleted and
// that one is zeroed from offset on. It recovers the log first, as Open
// would. offset must lie in [MinOffset, end] and be where an entry starts
// (a record, a filler, or a segment's start), else a *TruncateOffsetError
// naming it. reason goes into the record.
//
// When anything is cut, the record is appended to StateDir/truncations.log
// and synced before the log is touched, so that every cut is on record
// (a crash before the cut completes may leave a record of a cut a retry
// then repeats). A crash at any point leaves a log that Open recovers to
// its old end or to offset, nothing in between: the checkpoint and the
// abort marker are set first so that recovery reads the partly zeroed
// segment as a torn tail at offset, and later segments are deleted last
// first. After Truncate, Open finds the log's end at offset.
//
// The log must not be open, here or in another process.
func Truncate(ctx context.Context, cfg Config, offset int64, reason string) (TruncateReport, error) {
	l, cfg, err := openOffline(ctx, cfg)
	if err != nil {
		return TruncateReport{}, err
	}
	defer l.closeOffline()
	sl := l.segs.Load()
	minOff, end := sl.segs[0].base, l.writeOff
	rep := TruncateReport{Dir: cfg.Dir, At: cfg.Now().UTC(), Reason: reason, Offset: offset, OldEnd: end}
	bad := func(format string, args ...any) error {
		return &TruncateOffsetError{Offset: offset, Min: minOff, End: end, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case offset < minOff:
		return rep, bad("below the log's first offset (deleted by retention)")
	case offset > end:
		return rep, bad("beyond the log's end")
	case offset == end:
		return rep, nil
	}
	seg := sl.find(offset)
	keptTs, err := entryStart(seg, offset-seg.base)
	if err != nil {
		return rep, bad("%v", err)
	}
	if err := cutRecords(sl, offset, end, &rep); err != nil {
		return rep, err
	}
	rep.Bytes = end - offset
	for _, s := range sl.segs {
		if s.base > seg.base {
			rep.RemovedSegments = append(rep.RemovedSegments, s.path)
		}
	}
	l.log.Warn("truncating the log", "dir", cfg.Dir, "offset", offset, "old_end", end, "bytes", rep.Bytes,
		"records", rep.Records, "reason", reason)
	if err := l.appendTruncation(rep); err != nil {
		return rep, err
	}
	// From here on a crash must recover to end or to offset: recovery of
	// an unclean log whose checkpoint says offset ends it at the first
	// damage at or after offset, whatever valid records follow.
	l.flushed.Store(offset)
	l.lastTs.Store(keptTs)
	l.cp.written = -1 // write it even if the value looks unchanged
	if err := l.writeCheckpoint(); err != nil {
		return rep, err
	}
	if err := l.markRunning(); err != nil {
		return rep, err
	}
	if err := l.cutSegments(sl, seg, offset); err != nil {
		return rep, err
	}
	if err := l.fs.Remove(l.abortPath()); err != nil {
		return rep, fmt.Errorf("commitlog: remove abort marker: %w", err)
	}
	if err := l.fs.SyncDir(cfg.StateDir); err != nil {
		return rep, fmt.Errorf("commitlog: sync %s: %w", cfg.StateDir, err)
	}
	return rep, nil
}

// openOffline recovers the closed log of cfg for Truncate or ResetTo
// (creating its directories, as Open does); closeOffline releases it.
func openOffline(ctx context.Context, cfg Config) (*Log, Config, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, cfg, err
	}
	l := newLog(cfg)
	l.truncating = true
	for _, d := range []string{cfg.Dir, cfg.StateDir} {
		if err := l.fs.MkdirAll(d, 0o755); err != nil {
			return nil, cfg, fmt.Errorf("commitlog: create %s: %w", d, err)
		}
	}
	if err := l.recover(ctx); err != nil {
		l.closeOffline()
		return nil, cfg, err
	}
	return l, cfg, nil
}

func (l *Log) closeOffline() {
	l.closeSegments()
	l.freeStages()
}

// entryStart checks that an entry starts at position pos of seg by walking
// the entries from the segment's start (sizes only: recovery checked the
// records it relies on), and returns the store timestamp of the last
// record before pos in the segment (0 if none).
func entryStart(seg *segment, pos int64) (lastTs int64, err error) {
	p := int64(0)
	for p < pos {
		size, magic, ok := message.RecordSize(seg.b[p:])
		switch {
		case !ok || size < 8 || int64(size) > seg.size-p:
			return 0, fmt.Errorf("the entry at %d of segment %s is damaged (size %d)", seg.base+p, seg.path, size)
		case magic == message.MagicBlank:
			return 0, fmt.Errorf("it lies in the end filler of segment %s, which starts at %d", seg.path, seg.base+p)
		case magic != magicHole && magic != magicPad:
			lastTs = message.StoreTimestampOf(seg.b[p:])
		}
		if p+int64(size) > pos {
			return 0, fmt.Errorf("it lies inside the entry at %d (%d bytes)", seg.base+p, size)
		}
		p += int64(size)
	}
	return lastTs, nil
}

// cutRecords walks the entries of [from, end) and fills in the records
// part of rep.
func cutRecords(sl *segList, from, end int64, rep *TruncateReport) error {
	for off := from; off < end; {
		seg := sl.find(off)
		if seg == nil {
			return fmt.Errorf("commitlog: truncate: no segment holds offset %d below the end %d", off, end)
		}
		pos := off - seg.base
		size, magic, reason := recordAt(seg, pos)
		switch {
		case reason != "":
			return fmt.Errorf("commitlog: truncate: entry at %d in %s: %s", off, seg.path, reason)
		case magic == message.MagicBlank:
			off = seg.end()
			continue
		case magic != magicHole && magic != magicPad:
			ts := message.StoreTimestampOf(seg.b[pos:])
			if rep.Records == 0 {
				rep.FirstOffset, rep.FirstStoreTimestamp = off, ts
			}
			rep.Records++
			rep.LastOffset, rep.LastStoreTimestamp = off, ts
		}
		off += int64(size)
	}
	return nil
}

// appendTruncation appends rep as a JSON line to StateDir/truncations.log
// and makes it durable.
func (l *Log) appendTruncation(rep TruncateReport) error {
	path := filepath.Join(l.cfg.StateDir, TruncationsFile)
	line, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("commitlog: encode truncation record: %w", err)
	}
	created := !fsx.Exists(l.fs, path)
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err == nil {
		_, err = f.WriteAt(append(line, '\n'), size)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil && created {
		err = l.fs.SyncDir(l.cfg.StateDir)
	}
	if err != nil {
		return fmt.Errorf("commitlog: write truncation record to %s: %w", path, err)
	}
	return nil
}

// cutSegments zeroes seg from offset on and deletes the segments after it,
// the last first. The first bytes at offset go first, alone, and are
// synced: from then on recovery ends the log at offset (a torn tail),
// however the rest of the zeroing and the deletions are interrupted.
func (l *Log) cutSegments(sl *segList, seg *segment, offset int64) error {
	pos := offset - seg.base
	var zeros [message.BlankSize]byte
	head := min(int64(len(zeros)), seg.size-pos)
	if _, err := seg.file.WriteAt(zeros[:head], pos); err != nil {
		return fmt.Errorf("commitlog: truncate %s at %d: %w", seg.path, pos, err)
	}
	if err := seg.file.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync %s: %w", seg.path, err)
	}
	if rest := seg.size - pos - head; rest > 0 {
		if err := seg.file.ZeroRange(pos+head, rest); err != nil {
			return fmt.Errorf("commitlog: zero %s from %d: %w", seg.path, pos+head, err)
		}
		if err := seg.file.Sync(); err != nil {
			return fmt.Errorf("commitlog: sync %s: %w", seg.path, err)
		}
	}
	for i := len(sl.segs) - 1; i >= 0 && sl.segs[i].base > seg.base; i-- {
		s := sl.segs[i]
		s.retire()
		l.segs.Store(&segList{segs: sl.segs[:i]})
		if err := l.fs.Remove(s.path); err != nil {
			return fmt.Errorf("commitlog: remove segment %s: %w", s.path, err)
		}
		// One at a time: a crash must not leave a gap in the segments.
		if err := l.fs.SyncDir(l.cfg.Dir); err != nil {
			return fmt.Errorf("commitlog: sync %s: %w", l.cfg.Dir, err)
		}
	}
	l.writeOff = offset
	return nil
}
