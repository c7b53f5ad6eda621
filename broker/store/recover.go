package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/internal/fsx"
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
	Duration          time.Duration            `json:"durationNs"`               // whole store recovery
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
	idx, err := index.Open(ctx, index.Config{
		Dir: filepath.Join(s.cfg.Root, "index"), FS: s.cfg.FS, SlotCount: s.cfg.IndexSlots,
		EntryCount: s.cfg.IndexEntries, Now: s.cfg.Now, Logger: s.cfg.Logger,
	})
	if err != nil {
		return err
	}
	s.idx = idx
	if err := s.openQueues(ctx); err != nil {
		return err
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
	cp, ok := s.readCheckpoint()
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
	n, err := s.dispatch()
	r.DispatchedRecords += n
	if err != nil {
		if !errors.Is(err, errGap) || r.Rebuilt {
			return err
		}
		// A queue lacks entries before the checkpoint: rebuild everything.
		r.Rebuilt, r.RebuildReason, r.DispatchedFrom = true, err.Error(), logMin
		if s.indexFrom, err = s.idx.Truncate(logMin); err != nil {
			return err
		}
		s.dispatched.Store(logMin)
		n, err := s.dispatch()
		r.DispatchedRecords += n
		if err != nil {
			return err
		}
	}
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
		s.next[k] = q.MaxOffset()
		q.logicMin.Store(firstAtOrAbove(q.Queue, logMin))
	}
	s.trimmedAt = logMin
	r.Queues = len(s.queues)
	r.Duration = time.Since(start)
	s.log.Info("store recovered", "queues", r.Queues, "truncatedEntries", r.TruncatedEntries, "dispatchedFrom", from,
		"records", r.DispatchedRecords, "rebuilt", r.Rebuilt, "reason", r.RebuildReason, "duration", r.Duration)
	if err := s.checkpoint(); err != nil {
		return err
	}
	// The commit log wrote its part of the report; the whole one replaces it.
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := fsx.WriteFileAtomic(s.cfg.FS, filepath.Join(s.cfg.Root, "recovery-report.json"), append(b, '\n')); err != nil {
		return fmt.Errorf("store: write recovery report: %w", err)
	}
	return nil
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

// openQueues opens every consume queue directory under Root/consumequeue.
func (s *Store) openQueues(ctx context.Context) error {
	root := filepath.Join(s.cfg.Root, "consumequeue")
	topics, err := s.cfg.FS.ReadDir(root)
	if err != nil {
		return nil // none yet
	}
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
			k := QueueKey{Topic: topic, QueueID: int32(qid)}
			q, err := s.openQueue(ctx, k, s.queueDir(k))
			if err != nil {
				return err
			}
			s.queues[k] = q
		}
	}
	return nil
}
