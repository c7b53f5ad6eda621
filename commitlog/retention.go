package commitlog

import (
	"fmt"
	"time"

	"github.com/gantrymq/gantry/message"
)

// CleanResult says what one retention pass did.
type CleanResult struct {
	UsedRatio float64  // disk use seen at the start of the pass
	DiskFull  bool     // appends are refused after this pass
	Deleted   []string // segment files removed, oldest first
	// Pinned is the expired segment kept because it holds an offset at or
	// above Config.KeepFrom, "" if none was.
	Pinned string
	// Held is the segment kept because it holds an offset at or above
	// Config.DeleteFloor although it was due (expired, or forced by disk
	// use), "" if none was.
	Held string
}

// Clean runs one retention pass (RocketMQ's cleanup, run every
// CleanInterval by the background loop):
//   - above DiskFullRatio appends are refused with ErrDiskFull; below it they
//     are accepted again;
//   - sealed segments whose newest record is older than FileReservedTime are
//     deleted, oldest first, at a DeleteWhen hour or when disk use is above
//     DiskMaxUsedRatio, stopping at the first that holds an offset at or
//     above KeepFrom;
//   - above DiskForceCleanRatio the oldest sealed segments are deleted even
//     if not expired, until use drops below it;
//   - no deletion passes DeleteFloor: the first segment holding an offset at
//     or above it stops every kind.
//
// At most DeleteFilesBatchMax segments go per pass; the active segment never
// does. Safe for concurrent use with appends and reads: a deleted segment
// stays mapped until its last reader releases it.
func (l *Log) Clean() (CleanResult, error) {
	if l.closed.Load() {
		return CleanResult{}, ErrClosed
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	usage, err := l.fs.DiskUsage(l.cfg.Dir)
	if err != nil {
		return CleanResult{}, fmt.Errorf("commitlog: disk usage of %s: %w", l.cfg.Dir, err)
	}
	res := CleanResult{UsedRatio: usage.UsedRatio()}
	now := l.cfg.Now()
	timeUp := l.hours[now.Hour()]
	keep, floor := bound{f: l.cfg.KeepFrom}, bound{f: l.cfg.DeleteFloor}
	for len(res.Deleted) < l.cfg.DeleteFilesBatchMax {
		seg, newest := l.oldestSealed()
		if seg == nil {
			break
		}
		expired := now.Sub(time.UnixMilli(newest)) > l.cfg.FileReservedTime
		force := res.UsedRatio > l.cfg.DiskForceCleanRatio
		if !force && !(expired && (timeUp || res.UsedRatio > l.cfg.DiskMaxUsedRatio)) {
			break
		}
		if floor.pins(seg) {
			res.Held = seg.path
			break
		}
		if !force && keep.pins(seg) {
			res.Pinned = seg.path
			break
		}
		if err := l.deleteOldest(seg); err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, seg.path)
		l.log.Info("deleted segment", "segment", seg.path, "expired", expired, "forced", force && !expired, "diskUsed", res.UsedRatio)
		if force {
			if u, err := l.fs.DiskUsage(l.cfg.Dir); err == nil {
				res.UsedRatio = u.UsedRatio()
			}
		}
	}
	l.noteHeld(res, floor.off, now)
	res.DiskFull = res.UsedRatio > l.cfg.DiskFullRatio
	if was := l.diskFull.Swap(res.DiskFull); was != res.DiskFull {
		if res.DiskFull {
			l.log.Error("disk almost full; refusing appends", "used", res.UsedRatio, "limit", l.cfg.DiskFullRatio)
		} else {
			l.log.Info("disk space back; accepting appends", "used", res.UsedRatio)
		}
	}
	return res, nil
}

// heldWarnEvery is how often a pass that wants to free disk space but
// finds the oldest segment above DeleteFloor says so, while that lasts.
const heldWarnEvery = time.Minute

// noteHeld warns when disk use calls for deletion (forced cleaning, or
// expired segments above DiskMaxUsedRatio) that DeleteFloor holds back:
// when it starts, then at most every heldWarnEvery (of the pass's clock,
// now).
func (l *Log) noteHeld(res CleanResult, floor int64, now time.Time) {
	if res.Held == "" || res.UsedRatio <= l.cfg.DiskMaxUsedRatio {
		l.heldWarned = time.Time{}
		return
	}
	if now.Sub(l.heldWarned) >= heldWarnEvery {
		l.heldWarned = now
		l.log.Warn("disk space is short but the oldest segment holds records not yet dispatched to the consume queues; keeping it",
			"segment", res.Held, "dispatched", floor, "diskUsed", res.UsedRatio, "forceCleanRatio", l.cfg.DiskForceCleanRatio)
	}
}

// bound asks a Config offset hook (KeepFrom, DeleteFloor) once, when
// first needed.
type bound struct {
	f     func() int64
	off   int64
	asked bool
}

// pins reports whether seg holds an offset at or above the bound.
func (k *bound) pins(seg *segment) bool {
	if k.f == nil {
		return false
	}
	if !k.asked {
		k.off, k.asked = k.f(), true
	}
	return k.off < seg.base+seg.size
}

// oldestSealed returns the oldest segment other than the active one and
// the store time of its newest record (bounded by the first record of the
// segment after it).
func (l *Log) oldestSealed() (*segment, int64) {
	sl := l.segs.Load()
	if len(sl.segs) < 2 {
		return nil, 0
	}
	next := sl.segs[1]
	if l.committed.Load() <= next.base {
		return nil, 0 // the next segment holds nothing readable yet: the first is still the end
	}
	if !next.acquire() {
		return nil, 0
	}
	defer next.release()
	newest := int64(0)
	if size, magic, ok := message.RecordSize(next.b); ok && magic == message.MagicV1 && int64(size) <= next.size {
		newest = message.StoreTimestampOf(next.b)
	}
	return sl.segs[0], newest
}

// deleteOldest removes the first segment: readers stop getting it first,
// then the file goes.
func (l *Log) deleteOldest(seg *segment) error {
	l.mu.Lock()
	sl := l.segs.Load()
	if len(sl.segs) < 2 || sl.segs[0] != seg {
		l.mu.Unlock()
		return nil
	}
	l.segs.Store(&segList{segs: append([]*segment(nil), sl.segs[1:]...)})
	l.minOff.Store(sl.segs[1].base)
	l.mu.Unlock()
	seg.retire()
	if err := l.fs.Remove(seg.path); err != nil {
		return fmt.Errorf("commitlog: delete segment %s: %w", seg.path, err)
	}
	if err := l.fs.SyncDir(l.cfg.Dir); err != nil {
		return fmt.Errorf("commitlog: sync %s: %w", l.cfg.Dir, err)
	}
	l.stats.deleted.Add(1)
	return nil
}
