package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// ScheduleTopic holds delayed messages; its consume-queue tags code is the
// delivery time, not a tag hash.
const ScheduleTopic = "SCHEDULE_TOPIC_XXXX"

// rebuildSuffix names the directory a damaged queue is rebuilt in.
const rebuildSuffix = ".rebuild"

// errDamaged means a consume-queue entry disagrees with the log.
var errDamaged = errors.New("store: consume-queue entry disagrees with the commit log")

// entryProblem cross-checks the entry at queue offset qo of queue k against
// rec, the log bytes it points at, and says what is wrong, or "". Checking
// the tags code means decoding the properties, so it is optional.
func entryProblem(rec []byte, e consumequeue.Entry, k QueueKey, qo int64, withTags bool) string {
	v, err := message.NewView(rec)
	switch {
	case err != nil:
		return fmt.Sprintf("no record at log offset %d: %v", e.Offset, err)
	case len(v.Bytes()) != int(e.Size):
		return fmt.Sprintf("entry size %d, record size %d", e.Size, len(v.Bytes()))
	case message.PhysicalOffsetOf(rec) != e.Offset:
		return fmt.Sprintf("log offset %d holds the record of offset %d", e.Offset, message.PhysicalOffsetOf(rec))
	case string(v.Topic()) != k.Topic || v.QueueID() != k.QueueID:
		return fmt.Sprintf("record at %d belongs to %s/%d", e.Offset, v.Topic(), v.QueueID())
	case v.QueueOffset() != qo:
		return fmt.Sprintf("record at %d has queue offset %d", e.Offset, v.QueueOffset())
	case withTags && k.Topic != ScheduleTopic && tagsCode(v) != e.TagsCode:
		tags, _ := v.Property(message.PropTags)
		return fmt.Sprintf("entry tags code %d, record's tags %q hash to %d", e.TagsCode, tags, tagsCode(v))
	}
	return ""
}

// checkQueue cross-checks every entry of q whose record is still in the log
// and returns the first problem, or "".
func (s *Store) checkQueue(k QueueKey, q *cqueue) (string, error) {
	buf := make([]consumequeue.Entry, 0, 1024)
	logMin := s.cl.MinOffset()
	prevEnd := int64(-1)
	for from := q.Queue.MinOffset(); from < q.MaxOffset(); {
		entries, err := q.Read(from, cap(buf), buf[:0])
		if err != nil {
			return "", err
		}
		if len(entries) == 0 {
			break
		}
		for i, e := range entries {
			qo := from + int64(i)
			if e.Offset < prevEnd {
				return fmt.Sprintf("offset %d: entry at log offset %d precedes the previous entry's end %d", qo, e.Offset, prevEnd), nil
			}
			prevEnd = e.End()
			if e.Offset < logMin || s.cl.InHole(e.Offset) {
				continue
			}
			if p := s.checkEntry(k, e, qo, true); p != "" {
				return fmt.Sprintf("offset %d: %s", qo, p), nil
			}
		}
		from += int64(len(entries))
	}
	return "", nil
}

// QueueRepairs returns how many consume queues were rebuilt since Open
// because an entry disagreed with the log.
func (s *Store) QueueRepairs() int64 { return s.repairs.Load() }

// checkEntry reads the record e points at and cross-checks it.
func (s *Store) checkEntry(k QueueKey, e consumequeue.Entry, qo int64, withTags bool) string {
	r, err := s.cl.Read(e.Offset, int(e.Size))
	if err != nil {
		return fmt.Sprintf("log offset %d size %d: %v", e.Offset, e.Size, err)
	}
	defer r.Release()
	return entryProblem(r.B, e, k, qo, withTags)
}

// repairQueue rebuilds queue k from the log after damaged was found to
// disagree with it. The damaged files are kept under Root/corrupt. A
// concurrent repair of the same queue makes this one a no-op.
func (s *Store) repairQueue(ctx context.Context, k QueueKey, damaged *cqueue, reason string) error {
	s.dispatchMu.Lock() // no appends while the queue is rebuilt and swapped
	defer s.dispatchMu.Unlock()
	s.qmu.RLock()
	cur := s.queues[k]
	s.qmu.RUnlock()
	if cur != damaged {
		return nil
	}
	s.log.Warn("consume queue disagrees with the commit log; rebuilding it from the log", "queue", k.String(), "dir", s.queueDir(k), "problem", reason)
	dir := s.queueDir(k)
	tmp := dir + rebuildSuffix
	if err := removeTree(s.cfg.FS, tmp); err != nil {
		return err
	}
	nq, err := s.openQueue(ctx, k, tmp, consumequeue.Hint{})
	if err != nil {
		return err
	}
	n, err := s.fillQueue(k, nq.Queue)
	if cerr := nq.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: rebuild consume queue %s: %w", k, err)
	}

	s.qmu.Lock()
	defer s.qmu.Unlock()
	_ = damaged.Close()
	delete(s.queues, k)
	delete(s.dcache[k.Topic], k.QueueID)
	fsys := s.cfg.FS
	keep := filepath.Join(s.cfg.Root, "corrupt", "consumequeue", k.Topic, strconv.Itoa(int(k.QueueID)), strconv.FormatInt(s.cfg.Now().UnixMilli(), 10))
	if err := fsys.MkdirAll(keep, 0o755); err != nil {
		return fmt.Errorf("store: keep damaged consume queue %s: %w", k, err)
	}
	if err := moveFiles(fsys, dir, keep); err != nil {
		return fmt.Errorf("store: keep damaged consume queue %s: %w", k, err)
	}
	if err := moveFiles(fsys, tmp, dir); err != nil {
		return fmt.Errorf("store: install rebuilt consume queue %s: %w", k, err)
	}
	if err := removeTree(fsys, tmp); err != nil {
		return err
	}
	q, err := s.openQueue(ctx, k, dir, consumequeue.Hint{})
	if err != nil {
		return err
	}
	q.logicMin.Store(firstAtOrAbove(q.Queue, s.cl.MinOffset()))
	s.queues[k] = q
	s.repairs.Add(1)
	s.log.Warn("consume queue rebuilt from the commit log", "queue", k.String(), "entries", n, "damagedCopy", keep)
	return nil
}

// fillQueue appends to q the entries of queue k for every record in
// [log min, dispatched).
func (s *Store) fillQueue(k QueueKey, q *consumequeue.Queue) (int64, error) {
	var n int64
	end := s.dispatched.Load()
	for off := s.cl.MinOffset(); off < end; {
		r, next, err := s.cl.ReadRecord(off)
		if errors.Is(err, commitlog.ErrOffsetTooSmall) {
			off = s.cl.MinOffset()
			continue
		}
		if err != nil {
			return n, fmt.Errorf("read log at %d: %w", off, err)
		}
		v, err := message.NewView(r.B)
		if err == nil && string(v.Topic()) == k.Topic && v.QueueID() == k.QueueID && !s.isDeleted(v.Topic(), off) {
			if tx := v.SysFlag() & message.TransactionMask; tx != message.TransactionPrepared && tx != message.TransactionRollback {
				e := consumequeue.Entry{Offset: off, Size: int32(len(r.B)), TagsCode: tagsCode(v)}
				err = q.Append(v.QueueOffset(), e)
				if errors.Is(err, consumequeue.ErrNotContiguous) { // the messages in between were lost to a damaged range
					if err = s.fillLost(k, q, v.QueueOffset(), off); err == nil {
						err = q.Append(v.QueueOffset(), e)
					}
				}
				n++
			}
		}
		r.Release()
		if err != nil {
			return n, fmt.Errorf("log offset %d: %w", off, err)
		}
		off = next
	}
	return n, q.Flush()
}

// moveFiles renames every file of dir into to and makes both durable.
func moveFiles(fsys fsx.FS, dir, to string) error {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil // nothing there
	}
	for _, name := range names {
		if err := fsys.Rename(filepath.Join(dir, name), filepath.Join(to, name)); err != nil {
			return err
		}
	}
	if err := fsys.SyncDir(to); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// removeTree removes dir and everything under it; a missing dir is fine.
func removeTree(fsys fsx.FS, dir string) error {
	info, err := fsys.Stat(dir)
	if err != nil {
		return nil
	}
	if info.IsDir {
		names, err := fsys.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := removeTree(fsys, filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if err := fsys.Remove(dir); err != nil {
		return fmt.Errorf("store: remove %s: %w", dir, err)
	}
	return fsys.SyncDir(filepath.Dir(dir))
}
