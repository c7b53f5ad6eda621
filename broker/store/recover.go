package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// RecoveryReport says what Open did to the derived data.
type RecoveryReport struct {
	Log               commitlog.RecoveryReport `json:"commitLog"`
	Metadata          metadata.LoadReport      `json:"metadata"`          // where each metadata file came from
	Queues            int                      `json:"queues"`            // consume queues found
	TruncatedEntries  int64                    `json:"truncatedEntries"`  // queue entries past the log's end, dropped
	DispatchedFrom    int64                    `json:"dispatchedFrom"`    // log offset re-dispatch started at
	DispatchedRecords int64                    `json:"dispatchedRecords"` // records re-dispatched
	Rebuilt           bool                     `json:"rebuilt"`           // queues and index were rebuilt from the whole log
	RebuildReason     string                   `json:"rebuildReason,omitempty"`
	RepairedQueues    []string                 `json:"repairedQueues,omitempty"` // rebuilt because an entry disagreed with the log (CheckQueues)
	// SkippedEntries counts queue offsets whose records are gone: deleted
	// by retention before they were dispatched (their queues resume after
	// them), or lost in a damaged range recovery skipped (SkipCorrupt).
	SkippedEntries int64 `json:"skippedEntries,omitempty"`
	// DispatchError is why the log could not be dispatched to its end at
	// Open (a full disk refusing a consume-queue or index file): the store
	// opened stalled, refusing Put until the dispatcher catches up.
	DispatchError string        `json:"dispatchError,omitempty"`
	Duration      time.Duration `json:"durationNs"` // whole store recovery
}

// Recovery returns what Open found and did.
func (s *Store) Recovery() RecoveryReport { return s.report }

// recover brings the consume queues and the index in line with the
// recovered commit log (PROTOCOL §4.5): open them, cut what points past the
// log's end, re-dispatch from the last flushed dispatch position (or the
// whole log when derived data is missing), and restore the queue counters.
func (s *Store) recover(ctx context.Context) error {
	start := time.Now()
	r := &s.report
	r.Log = s.cl.Recovery()
	logMin, logEnd := s.cl.MinOffset(), s.cl.MaxOffset()
	idx, err := index.Open(ctx, s.indexConfig())
	if err != nil {
		return err
	}
	s.idx = idx
	cp, ok := s.readCheckpoint()
	if err := s.openQueues(ctx, cp); err != nil {
		return err
	}
	if cp.Clean {
		// The queues were opened trusting it; from here on they change, so
		// a crash before the next checkpoint must not find it clean.
		notClean := cp
		notClean.Clean = false
		if err := s.writeCheckpoint(notClean); err != nil {
			// A full disk: without a checkpoint a crash rebuilds the queues,
			// which is slow but right; a clean one would be trusted wrongly.
			s.log.Warn("dispatch checkpoint not rewritten at start; removing it", "err", err)
			if err := s.cfg.FS.Remove(s.checkpointPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("store: remove clean dispatch checkpoint: %w", err)
			}
			if err := s.cfg.FS.SyncDir(s.cfg.Root); err != nil {
				return fmt.Errorf("store: remove clean dispatch checkpoint: %w", err)
			}
		}
	}
	for k, q := range s.queues {
		n, err := q.TruncatePhysical(logEnd)
		if err != nil {
			return fmt.Errorf("store: truncate consume queue %s: %w", k, err)
		}
		r.TruncatedEntries += n
	}
	// Index entries below the checkpoint's dispatch position were flushed
	// before it was written; later ones may be torn, so they go and are
	// written again.
	idxEnd := logEnd
	switch {
	case !ok:
		idxEnd = logMin
	case cp.Dispatched < logEnd:
		idxEnd = cp.Dispatched
	}
	reindexFrom, err := s.idx.Truncate(idxEnd)
	if err != nil {
		return err
	}
	from := logMin
	switch {
	case !ok:
		r.RebuildReason = "no dispatch checkpoint"
	case cp.Dispatched > logEnd:
		r.RebuildReason = fmt.Sprintf("dispatch checkpoint %d is past the log's end %d", cp.Dispatched, logEnd)
	default:
		from = max(min(cp.Dispatched, reindexFrom), logMin)
		if missing := s.missingQueue(cp); missing != "" {
			from, r.RebuildReason = logMin, missing
		}
	}
	if from == logMin && logEnd > logMin && r.RebuildReason == "" && reindexFrom <= logMin {
		r.RebuildReason = "index empty"
	}
	r.Rebuilt = from == logMin && logEnd > logMin
	s.indexFrom = reindexFrom
	r.DispatchedFrom = from
	s.dispatched.Store(from)
	s.dispatchFrom = from
	n, err := s.dispatch()
	r.DispatchedRecords += n
	if errors.Is(err, errGap) && !r.Rebuilt {
		// A queue lacks entries before the checkpoint: rebuild everything.
		r.Rebuilt, r.RebuildReason, r.DispatchedFrom = true, err.Error(), logMin
		if s.indexFrom, err = s.idx.Truncate(logMin); err != nil {
			return err
		}
		s.dispatched.Store(logMin)
		s.dispatchFrom = logMin
		n, err = s.dispatch()
		r.DispatchedRecords += n
	}
	if err == nil {
		err = s.createPending()
	}
	if err != nil {
		if errors.Is(err, errGap) {
			return err
		}
		if err := s.openStalled(err); err != nil {
			return err
		}
	} else if s.cfg.DispatchLimit != nil && s.dispatched.Load() < s.cl.MaxOffset() {
		if err := s.openHeld(); err != nil {
			return err
		}
	}
	r.SkippedEntries = s.skipped.Load()
	if s.cfg.CheckQueues {
		for _, k := range s.Queues() {
			q := s.queues[k]
			problem, err := s.checkQueue(k, q)
			if err != nil {
				return fmt.Errorf("store: check consume queue %s: %w", k, err)
			}
			if problem != "" {
				if err := s.repairQueue(ctx, k, q, problem); err != nil {
					return err
				}
				r.RepairedQueues = append(r.RepairedQueues, k.String())
			}
		}
	}
	logMin = s.cl.MinOffset()
	for k, q := range s.queues {
		s.setNext(k, max(s.nextOf(k), q.MaxOffset()))
		q.logicMin.Store(firstAtOrAbove(q.Queue, logMin))
	}
	s.trimmedAt.Store(logMin)
	r.Queues = len(s.queues)
	r.Duration = time.Since(start)
	s.log.Info("store recovered", "queues", r.Queues, "truncatedEntries", r.TruncatedEntries, "dispatchedFrom", from,
		"records", r.DispatchedRecords, "rebuilt", r.Rebuilt, "reason", r.RebuildReason, "duration", r.Duration)
	// Both are derived from the log: on a disk too full to write them the
	// previous checkpoint stays valid (the next start dispatches from it),
	// and the flush loop tries again.
	if err := s.checkpoint(false); err != nil {
		s.log.Warn("dispatch checkpoint not written at start; the next start dispatches from the previous one", "err", err)
	}
	// The commit log wrote its part of the report; the whole one replaces it.
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := fsx.WriteFileAtomic(s.cfg.FS, filepath.Join(s.cfg.Root, "recovery-report.json"), append(b, '\n')); err != nil {
		s.log.Warn("recovery report not written", "file", filepath.Join(s.cfg.Root, "recovery-report.json"), "err", err)
	}
	return nil
}

// openStalled lets Open finish although the recovered log could not be
// dispatched to its end (err: a full disk refusing a consume-queue or
// index file): the store opens stalled, its dispatcher retrying, and Put
// refuses messages until it has caught up. The queue counters must then
// come from the log, not from the queues: Open reads the queue offsets of
// the records not dispatched (their headers only).
func (s *Store) openStalled(cause error) error {
	s.report.DispatchError = cause.Error()
	s.stall.begin(s.cfg.Now(), cause)
	s.stall.refuseNow.Store(true)
	ends, err := s.logQueueEnds(s.dispatched.Load())
	if err != nil {
		return fmt.Errorf("store: open with records not dispatched (%v): %w", cause, err)
	}
	for k, end := range ends {
		s.setNext(k, end)
	}
	s.recoveredEnds = ends
	s.log.Error("store opened with records not dispatched; sends are refused until they are", "offset", s.dispatched.Load(),
		"lagBytes", s.cl.MaxOffset()-s.dispatched.Load(), "err", cause)
	return nil
}

// openHeld lets Open finish with records Config.DispatchLimit holds back
// (a controller-mode broker's records its group has not confirmed): the
// queue counters come from the log, as in openStalled, without a stall.
func (s *Store) openHeld() error {
	ends, err := s.logQueueEnds(s.dispatched.Load())
	if err != nil {
		return fmt.Errorf("store: open with records held back from dispatch: %w", err)
	}
	for k, end := range ends {
		s.setNext(k, end)
	}
	s.recoveredEnds = ends
	return nil
}

// logQueueEnds returns, for each queue with a record at or after log
// offset from, one past the queue offset of its last record.
func (s *Store) logQueueEnds(from int64) (map[QueueKey]int64, error) {
	ends := map[QueueKey]int64{}
	for off := from; off < s.cl.MaxOffset(); {
		r, next, err := s.cl.ReadRecord(off)
		if err != nil {
			if errors.Is(err, commitlog.ErrOffsetTooBig) {
				break
			}
			return nil, fmt.Errorf("read log at %d: %w", off, err)
		}
		b := r.B
		if tx := message.SysFlagOf(b) & message.TransactionMask; tx != message.TransactionPrepared && tx != message.TransactionRollback {
			v, err := message.NewView(b)
			if err != nil {
				r.Release()
				return nil, fmt.Errorf("decode record at %d: %w", off, err)
			}
			if !s.isDeleted(v.Topic(), off) { // not of a deleted topic (deletetopic.go)
				k := QueueKey{Topic: string(v.Topic()), QueueID: v.QueueID()}
				ends[k] = max(ends[k], v.QueueOffset()+1)
			}
		}
		r.Release()
		off = next
	}
	return ends, nil
}

// RecoveredQueueEnd returns one past the queue offset of the last record
// of (topic, queueID) in the log at Open, dispatched or not, when Open
// could not dispatch the log to its end (see Recovery().DispatchError);
// otherwise, and for a queue with no record past the dispatch position
// then, 0. The queue's max offset reaches it once the dispatcher has
// caught up.
func (s *Store) RecoveredQueueEnd(topic string, queueID int32) int64 {
	return s.recoveredEnds[QueueKey{Topic: topic, QueueID: queueID}]
}

// indexConfig is the configuration of the store's index.
func (s *Store) indexConfig() index.Config {
	return index.Config{
		Dir: filepath.Join(s.cfg.Root, "index"), FS: s.cfg.FS, SlotCount: s.cfg.IndexSlots,
		EntryCount: s.cfg.IndexEntries, Now: s.cfg.Now, Logger: s.cfg.Logger,
	}
}

// missingQueue names a queue holding fewer entries than the checkpoint
// recorded, or returns "".
func (s *Store) missingQueue(cp dispatchCheckpoint) string {
	for name, max := range cp.Queues {
		var k QueueKey
		i := len(name) - 1
		for i >= 0 && name[i] != '/' {
			i--
		}
		qid, err := strconv.Atoi(name[i+1:])
		if i < 0 || err != nil {
			return fmt.Sprintf("dispatch checkpoint names a bad queue %q", name)
		}
		k = QueueKey{Topic: name[:i], QueueID: int32(qid)}
		q := s.queues[k]
		if q == nil || q.MaxOffset() < max {
			have := int64(0)
			if q != nil {
				have = q.MaxOffset()
			}
			return fmt.Sprintf("consume queue %s holds %d entries, the checkpoint recorded %d", k, have, max)
		}
	}
	return ""
}

// openQueues opens every consume queue directory under Root/consumequeue,
// in parallel, each with what the dispatch checkpoint cp recorded of it
// as its hint.
func (s *Store) openQueues(ctx context.Context, cp dispatchCheckpoint) error {
	root := filepath.Join(s.cfg.Root, "consumequeue")
	topics, err := s.cfg.FS.ReadDir(root)
	if err != nil {
		return nil // none yet
	}
	var keys []QueueKey
	for _, topic := range topics {
		ids, err := s.cfg.FS.ReadDir(filepath.Join(root, topic))
		if err != nil {
			continue
		}
		for _, id := range ids {
			if strings.HasSuffix(id, rebuildSuffix) { // an interrupted repair
				if err := removeTree(s.cfg.FS, filepath.Join(root, topic, id)); err != nil {
					return err
				}
				continue
			}
			qid, err := strconv.Atoi(id)
			if err != nil {
				s.log.Warn("ignoring unexpected entry in consume-queue directory", "path", filepath.Join(root, topic, id))
				continue
			}
			keys = append(keys, QueueKey{Topic: topic, QueueID: int32(qid)})
		}
	}
	opened := make([]*cqueue, len(keys))
	err = parallel(len(keys), func(i int) error {
		k := keys[i]
		hint := consumequeue.Hint{MaxOffset: cp.Queues[k.String()], Clean: cp.Clean}
		q, err := s.openQueue(ctx, k, s.queueDir(k), hint)
		opened[i] = q
		return err
	})
	for i, q := range opened {
		if q != nil {
			s.queues[keys[i]] = q // closed by closeAll if Open fails
		}
	}
	return err
}
