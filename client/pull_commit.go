package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/tick"
)

// closeCommitGrace bounds Close's final commit when Close is given a
// context that has already ended: the marks are still worth one short
// try.
const closeCommitGrace = 3 * time.Second

// markKey names a marked queue whatever the address of its broker, which
// a route change may move.
type markKey struct {
	topic, brokerName string
	id                int32
}

func markKeyOf(q Queue) markKey { return markKey{q.Topic, q.BrokerName, q.ID} }

// mark is the offset marked for a queue.
type mark struct {
	q      Queue
	offset int64
	dirty  bool // marked since the last commit that succeeded
}

// commits is a PullConsumer's offset marks and their committing.
type commits struct {
	// sem serialises the calls that commit (Commit, CommitOffset), so that
	// an older offset never lands after a newer one.
	sem chan struct{}

	mu      sync.Mutex
	marks   map[markKey]*mark
	noBatch map[string]bool // brokers that answered CommitOffsets UNIMPLEMENTED, for the consumer's life

	stopAuto context.CancelFunc // nil without auto-commit
	autoDone chan struct{}
}

func newCommits() *commits {
	return &commits{sem: make(chan struct{}, 1), marks: map[markKey]*mark{}, noBatch: map[string]bool{}}
}

// acquire takes the commit turn, or fails when ctx ends first.
func (cs *commits) acquire(ctx context.Context) error {
	select {
	case cs.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("client: commit: waiting for the commit in progress: %w", ctx.Err())
	}
}

func (cs *commits) release() { <-cs.sem }

// MarkOffset records offset (the next message to consume) as q's offset to
// commit: in memory, committed by the next Commit, auto-commit or Close.
// Marks only move forward: an offset at or below q's current mark is
// ignored, as is a negative one (use CommitOffset to move an offset back).
// It is cheap and safe to call for every message.
func (pc *PullConsumer) MarkOffset(q Queue, offset int64) {
	if offset < 0 {
		return
	}
	cs := pc.commits
	cs.mu.Lock()
	defer cs.mu.Unlock()
	k := markKeyOf(q)
	if m, ok := cs.marks[k]; ok {
		if offset <= m.offset {
			return
		}
		m.q, m.offset, m.dirty = q, offset, true
		return
	}
	cs.marks[k] = &mark{q: q, offset: offset, dirty: true}
}

// reset makes offset q's mark, committed (CommitOffset).
func (cs *commits) reset(q Queue, offset int64) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.marks[markKeyOf(q)] = &mark{q: q, offset: offset}
}

// Commit commits the offset of every queue marked (MarkOffset) since its
// last successful commit: one CommitOffsets request per broker, holding
// all of that broker's queues (a broker that does not know CommitOffsets
// gets one CommitOffset per queue). A queue whose commit failed stays
// marked, for the next Commit. The error joins one error per failed
// broker request or queue, each naming it.
func (pc *PullConsumer) Commit(ctx context.Context) error {
	cs := pc.commits
	if err := cs.acquire(ctx); err != nil {
		return err
	}
	defer cs.release()
	return pc.commitMarked(ctx)
}

// pending is one queue's offset on its way to its broker.
type pending struct {
	k      markKey
	q      Queue
	offset int64
	failed bool  // not committed
	err    error // why, unless the request's error says it
}

// commitMarked commits the dirty marks; the caller holds the commit turn.
func (pc *PullConsumer) commitMarked(ctx context.Context) error {
	cs := pc.commits
	var errs []error
	byBroker := map[string][]*pending{}
	cs.mu.Lock()
	for k, m := range cs.marks {
		if !m.dirty {
			continue
		}
		p := &pending{k: k, q: m.q, offset: m.offset}
		addr, err := pc.c.brokerAddr(m.q)
		if err != nil {
			errs = append(errs, fmt.Errorf("client: commit %s at %d: %w", m.q, m.offset, err))
			continue
		}
		byBroker[addr] = append(byBroker[addr], p)
	}
	cs.mu.Unlock()
	if len(byBroker) == 0 {
		return errors.Join(errs...)
	}
	for _, ps := range byBroker { // requests and errors in queue order
		slices.SortFunc(ps, func(a, b *pending) int {
			return cmp.Or(cmp.Compare(a.k.topic, b.k.topic), cmp.Compare(a.k.brokerName, b.k.brokerName), cmp.Compare(a.k.id, b.k.id))
		})
	}

	brokerErrs := make(map[string]error, len(byBroker))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range slices.Sorted(maps.Keys(byBroker)) {
		wg.Go(func() {
			if err := pc.commitBroker(ctx, addr, byBroker[addr]); err != nil {
				mu.Lock()
				brokerErrs[addr] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, addr := range slices.Sorted(maps.Keys(byBroker)) {
		if err := brokerErrs[addr]; err != nil {
			errs = append(errs, err)
		}
		for _, p := range byBroker[addr] {
			if p.failed {
				if p.err != nil {
					errs = append(errs, p.err)
				}
				continue
			}
			// A queue marked further meanwhile stays to commit.
			if m := cs.marks[p.k]; m != nil && m.offset == p.offset {
				m.dirty = false
			}
		}
	}
	return errors.Join(errs...)
}

// commitBroker commits ps on the broker at addr, in requests of at most
// MaxCommitOffsetsEntries. It returns the error of a request as a whole
// and sets it, or each queue's own, on ps.
func (pc *PullConsumer) commitBroker(ctx context.Context, addr string, ps []*pending) error {
	m, err := pc.c.messaging(addr)
	if err != nil {
		return pc.failAll(addr, ps, err)
	}
	pc.commits.mu.Lock()
	batch := !pc.commits.noBatch[addr]
	pc.commits.mu.Unlock()
	var errs []error
	for chunk := range slices.Chunk(ps, gantryv1.MaxCommitOffsetsEntries) {
		if batch {
			err := pc.commitBatch(ctx, m, addr, chunk)
			if status.Code(err) != codes.Unimplemented {
				errs = append(errs, err)
				continue
			}
			pc.c.log.Info("broker does not implement CommitOffsets: committing queue by queue", "broker", addr)
			pc.commits.mu.Lock()
			pc.commits.noBatch[addr] = true // an older broker: do not ask again
			pc.commits.mu.Unlock()
			batch = false
		}
		for _, p := range chunk {
			_, err := m.CommitOffset(ctx, &gantryv1.CommitOffsetRequest{Group: pc.group, Topic: p.q.Topic, QueueId: p.q.ID, Offset: p.offset})
			if err = callError("commit offset", addr, err, ErrTopicNotFound); err != nil {
				pc.c.brokerFailed(p.q.Topic, err)
				p.failed, p.err = true, fmt.Errorf("client: commit %s at %d: %w", p.q, p.offset, err)
			}
		}
	}
	return errors.Join(errs...)
}

// commitBatch sends one CommitOffsets request. Each queue's own error is
// set on its pending; a failure of the request as a whole marks them all
// failed and is returned, as is UNIMPLEMENTED (an older broker), which
// marks nothing.
func (pc *PullConsumer) commitBatch(ctx context.Context, m gantryv1.MessagingClient, addr string, ps []*pending) error {
	req := &gantryv1.CommitOffsetsRequest{Group: pc.group, Entries: make([]*gantryv1.OffsetEntry, len(ps))}
	entries := make([]gantryv1.OffsetEntry, len(ps)) // one allocation for the request
	for i, p := range ps {
		entries[i].Topic, entries[i].QueueId, entries[i].Offset = p.q.Topic, p.q.ID, p.offset
		req.Entries[i] = &entries[i]
	}
	resp, err := m.CommitOffsets(ctx, req)
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return err // the caller falls back; nothing to report
		}
		return pc.failAll(addr, ps, callError("commit offsets", addr, err, ErrTopicNotFound))
	}
	results := resp.GetResults()
	for i, p := range ps {
		if i >= len(results) {
			p.failed, p.err = true, fmt.Errorf("client: commit %s at %d on %s: the broker answered %d results for %d entries", p.q, p.offset, addr, len(results), len(ps))
			continue
		}
		if e := results[i].GetError(); e != nil {
			code := codes.Code(e.GetCode())
			if code == codes.OK {
				code = codes.Unknown
			}
			se := newStatusError("commit offset", addr, status.New(code, e.GetMessage()), ErrTopicNotFound)
			if errors.Is(se, ErrTopicNotFound) {
				pc.c.routes.kick(p.q.Topic) // the topic may have moved
			}
			p.failed, p.err = true, fmt.Errorf("client: commit %s at %d: %w", p.q, p.offset, se)
		}
	}
	return nil
}

// failAll marks ps failed with the request that carried them, and returns
// its error, naming the broker and the first queue.
func (pc *PullConsumer) failAll(addr string, ps []*pending, err error) error {
	topics := map[string]bool{}
	for _, p := range ps {
		p.failed = true // reported once, by the request's error
		if !topics[p.q.Topic] {
			topics[p.q.Topic] = true
			pc.c.brokerFailed(p.q.Topic, err)
		}
	}
	return fmt.Errorf("client: commit offsets of %d queues (%s, ...) on %s: %w", len(ps), ps[0].q, addr, err)
}

// startAutoCommit runs Commit every d on a goroutine that Close stops.
func (pc *PullConsumer) startAutoCommit(d time.Duration) {
	cs := pc.commits
	ctx, stop := context.WithCancel(context.Background())
	cs.stopAuto, cs.autoDone = stop, make(chan struct{})
	go func() {
		defer close(cs.autoDone)
		tick.Every(ctx, d, func() {
			cctx, cancel := context.WithTimeout(ctx, max(d, closeCommitGrace))
			defer cancel()
			if err := pc.Commit(cctx); err != nil && ctx.Err() == nil {
				pc.c.log.Warn("auto-commit failed; the offsets stay marked for the next one", "group", pc.group, "err", err)
			}
		})
	}()
}

// stopAutoCommit stops the auto-commit goroutine and waits for it.
func (pc *PullConsumer) stopAutoCommit() {
	if cs := pc.commits; cs.stopAuto != nil {
		cs.stopAuto()
		<-cs.autoDone
	}
}

// finalCommit is Close's commit of the marks, bounded by ctx, or by
// closeCommitGrace when ctx has already ended.
func (pc *PullConsumer) finalCommit(ctx context.Context) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), closeCommitGrace)
		defer cancel()
	}
	return pc.Commit(ctx)
}
