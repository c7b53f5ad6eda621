package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/tick"
)

// brokerAddrs returns the addresses of the brokers of the subscribed
// topics (from the cached routes), sorted.
func (p *PushConsumer) brokerAddrs(ctx context.Context) []string {
	set := map[string]bool{}
	for _, topic := range p.topics() {
		rt, err := p.c.routes.get(ctx, topic)
		if err != nil {
			continue
		}
		for _, addr := range rt.masters {
			set[addr] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// heartbeat announces the consumer to every broker of its topics (with the
// queues it holds on each) and watches the group on each. It fails only
// when no broker took the heartbeat.
func (p *PushConsumer) heartbeat(ctx context.Context) error {
	addrs := p.brokerAddrs(ctx)
	if len(addrs) == 0 {
		return fmt.Errorf("client: no broker serves the subscribed topics: %w", ErrNoQueue)
	}
	var errs []error
	ok := 0
	for _, addr := range addrs {
		if err := p.heartbeatTo(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		ok++
	}
	p.syncLinks(addrs)
	if ok == 0 {
		return errors.Join(errs...)
	}
	for _, err := range errs {
		p.c.log.Warn("heartbeat failed", "err", err)
	}
	return nil
}

// heartbeatTo sends one heartbeat to the broker at addr.
func (p *PushConsumer) heartbeatTo(ctx context.Context, addr string) error {
	req := &gantryv1.HeartbeatRequest{ClientId: p.c.cfg.ClientID, Group: p.group, Model: p.protoModel(), Ordered: p.opts.ordered}
	p.mu.Lock()
	for _, topic := range slices.Sorted(maps.Keys(p.subs)) {
		req.Subscriptions = append(req.Subscriptions, &gantryv1.Subscription{Topic: topic, Expression: p.subs[topic]})
	}
	if p.state == pushStarted {
		for _, aq := range p.queues {
			if aq.q.Broker == addr {
				req.Assigned = append(req.Assigned, &gantryv1.QueueRef{Topic: aq.q.Topic, QueueId: aq.q.ID})
			}
		}
	}
	p.mu.Unlock()
	m, err := p.c.messaging(addr)
	if err != nil {
		return err
	}
	_, err = m.Heartbeat(ctx, req)
	return callError("heartbeat", addr, err, ErrNotFound)
}

// heartbeatLoop heartbeats every heartbeat interval, and at once after a
// rebalance changed the queues held.
func (p *PushConsumer) heartbeatLoop() {
	t := time.NewTicker(p.opts.heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-p.life.Done():
			return
		case <-t.C:
		case <-p.hbKick:
		}
		ctx, cancel := context.WithTimeout(p.life, nameServerCallTimeout)
		if err := p.heartbeat(ctx); err != nil && p.life.Err() == nil {
			p.c.log.Warn("heartbeat failed", "err", err)
		}
		cancel()
	}
}

// brokerLink is the group watch on one broker: while it is open the broker
// keeps the client in the group, and each membership change it reports
// triggers a rebalance.
type brokerLink struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *brokerLink) stop() {
	l.cancel()
	<-l.done
}

// syncLinks watches the group on each of addrs and stops watching on other
// brokers.
func (p *PushConsumer) syncLinks(addrs []string) {
	p.mu.Lock()
	if p.state != pushStarted {
		p.mu.Unlock()
		return
	}
	var gone []*brokerLink
	for addr, l := range p.brokers {
		if !slices.Contains(addrs, addr) {
			gone = append(gone, l)
			delete(p.brokers, addr)
		}
	}
	for _, addr := range addrs {
		if p.brokers[addr] != nil {
			continue
		}
		// Not p.life: the watch must outlive Shutdown's release of the
		// queues, or the broker would give them (and their locks) away
		// while their last batches run.
		ctx, cancel := context.WithCancel(p.c.life)
		l := &brokerLink{cancel: cancel, done: make(chan struct{})}
		if !p.tasks.goFunc(func() { defer close(l.done); p.watch(ctx, addr) }) {
			cancel()
			continue
		}
		p.brokers[addr] = l
	}
	p.mu.Unlock()
	for _, l := range gone {
		l.stop()
	}
}

// watch keeps a WatchGroup stream open to addr until ctx ends.
func (p *PushConsumer) watch(ctx context.Context, addr string) {
	var backoff time.Duration
	for ctx.Err() == nil {
		err := p.watchOnce(ctx, addr)
		p.setWatched(addr, nil)
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.NotFound || status.Code(err) == codes.FailedPrecondition {
			// The broker does not know the client (it restarted): join again.
			hctx, cancel := context.WithTimeout(ctx, nameServerCallTimeout)
			err = errors.Join(err, p.heartbeatTo(hctx, addr))
			cancel()
		}
		backoff = min(max(2*backoff, 200*time.Millisecond), 3*time.Second)
		p.c.log.Debug("group watch ended; reopening", "broker", addr, "in", backoff, "err", err)
		trigger(p.kick) // the membership may have changed meanwhile
		sleepCtx(ctx, backoff)
	}
}

// watchOnce reads one WatchGroup stream until it ends.
func (p *PushConsumer) watchOnce(ctx context.Context, addr string) error {
	m, err := p.c.messaging(addr)
	if err != nil {
		return err
	}
	st, err := m.WatchGroup(ctx, &gantryv1.WatchGroupRequest{Group: p.group, ClientId: p.c.cfg.ClientID})
	if err != nil {
		return err
	}
	for {
		ev, err := st.Recv()
		if err != nil {
			return err
		}
		if r := ev.GetOffsetReset(); r != nil {
			p.c.log.Info("the group's offsets were reset", "broker", addr, "topic", r.GetTopic(), "offsets", r.GetOffsets())
			p.resetQueues(addr, r.GetTopic(), r.GetOffsets())
			continue
		}
		p.c.log.Debug("group membership", "broker", addr, "clients", ev.GetClientIds())
		p.setWatched(addr, ev.GetClientIds())
		trigger(p.kick)
	}
}

// rebalanceLoop rebalances when a membership change is reported, every
// rebalance interval, and soon after a round that could not take every
// queue it was given (200 ms, doubling while rounds stay incomplete).
func (p *PushConsumer) rebalanceLoop() {
	t := time.NewTicker(p.opts.rebalanceEvery)
	defer t.Stop()
	var soon <-chan time.Time
	delay := retryRebalanceAfterLockFail
	for {
		select {
		case <-p.life.Done():
			return
		case <-p.kick:
		case <-t.C:
		case <-soon:
		}
		soon = nil
		if p.rebalance(p.life) {
			delay = retryRebalanceAfterLockFail
			continue
		}
		soon = time.After(delay)
		delay = min(2*delay, p.opts.rebalanceEvery)
	}
}

// rebalance computes the queues this member should hold, releases those it
// should not and takes the new ones. It reports false when some queue
// could not be taken yet (its lock is held by the previous owner, say).
func (p *PushConsumer) rebalance(ctx context.Context) bool {
	want := map[queueKey]Queue{}
	keep := map[string]bool{} // topics whose share could not be computed: keep what is held
	complete := true
	for _, topic := range p.topics() {
		mine, err := p.share(ctx, topic)
		if err != nil {
			// The retry topic's route appears shortly after the first
			// heartbeat created the topic: try again soon.
			complete = false
			if ctx.Err() == nil && !(p.isRetryTopic(topic) && errors.Is(err, ErrTopicNotFound)) {
				p.c.log.Warn("rebalance: keeping the current queues", "topic", topic, "err", err)
			}
			keep[topic] = true
			continue
		}
		for _, q := range mine {
			want[keyOf(q)] = q
		}
	}
	p.mu.Lock()
	if p.state != pushStarted {
		p.mu.Unlock()
		return true
	}
	var released []*assignedQueue
	for k, aq := range p.queues {
		if _, ok := want[k]; !ok && !keep[k.topic] {
			released = append(released, aq)
			delete(p.queues, k)
		}
	}
	var added []Queue
	for k, q := range want {
		if _, ok := p.queues[k]; !ok {
			added = append(added, q)
		}
	}
	p.mu.Unlock()
	sortQueues(added)

	for _, aq := range released {
		aq.cancel() // stop at once; release waits for what runs
		p.c.log.Info("rebalance: releasing queue", "queue", aq.q)
		k := keyOf(aq.q)
		p.mu.Lock()
		p.releasing[k] = true
		p.mu.Unlock()
		p.releases.Go(func() {
			p.release(aq)
			p.mu.Lock()
			delete(p.releasing, k)
			p.mu.Unlock()
		})
	}
	for _, q := range added {
		p.mu.Lock()
		releasing := p.releasing[keyOf(q)]
		p.mu.Unlock()
		if releasing {
			// Let go of moments ago and its offset not committed yet
			// (a member list that missed this client for a moment, say):
			// the next try takes it from the committed offset.
			complete = false
			p.c.log.Info("rebalance: queue not taken yet: its release has not ended", "queue", q)
			continue
		}
		if err := p.take(ctx, q); err != nil {
			complete = false
			if ctx.Err() == nil {
				p.c.log.Info("rebalance: queue not taken yet", "queue", q, "err", err)
			}
		}
	}
	if len(released) > 0 || len(added) > 0 {
		trigger(p.hbKick)
	}
	return complete
}

// share returns this member's queues of topic.
func (p *PushConsumer) share(ctx context.Context, topic string) ([]Queue, error) {
	rt, err := p.c.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	qs := slices.Clone(rt.read)
	sortQueues(qs)
	if p.opts.model == Broadcasting {
		return qs, nil
	}
	ids, err := p.members(ctx, rt)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ids, p.c.cfg.ClientID) {
		// The broker has not registered this client (yet): it restarted
		// moments ago, or expired the client while it was cut off. A share
		// computed without this member would be none, and letting every
		// queue go would rewind them to their committed offsets; keep them
		// until the heartbeat that is sent now registers the client again.
		trigger(p.hbKick)
		return nil, fmt.Errorf("client: the broker does not list this client (%s) in group %s yet: %w", p.c.cfg.ClientID, p.group, ErrUnavailable)
	}
	return p.opts.strategy.Allocate(p.c.cfg.ClientID, ids, qs), nil
}

// setWatched records the members a broker's group watch reported; nil
// forgets them (the stream ended).
func (p *PushConsumer) setWatched(addr string, ids []string) {
	if ids != nil {
		ids = slices.Clone(ids)
		slices.Sort(ids)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ids == nil {
		delete(p.watched, addr)
	} else {
		p.watched[addr] = ids
	}
}

// members returns the group's live clients, sorted, from a broker of the
// topic: as its open group watch last reported them, else by asking it.
func (p *PushConsumer) members(ctx context.Context, rt *topicRoute) ([]string, error) {
	var errs []error
	for _, addr := range slices.Sorted(maps.Values(rt.masters)) {
		p.mu.Lock()
		ids, ok := p.watched[addr]
		p.mu.Unlock()
		if ok {
			return slices.Clone(ids), nil // an AllocateStrategy may modify what it is given
		}
		m, err := p.c.messaging(addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := m.GetConsumerList(ctx, &gantryv1.GetConsumerListRequest{Group: p.group})
		if err != nil {
			errs = append(errs, callError("consumer list", addr, err, ErrNotFound))
			continue
		}
		ids = slices.Clone(resp.GetClientIds())
		slices.Sort(ids)
		return ids, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("client: no broker for the group's consumer list: %w", ErrNoQueue)
	}
	return nil, errors.Join(errs...)
}

// take starts consuming q: it locks it first (clustering), finds
// its start offset and starts its loops.
func (p *PushConsumer) take(ctx context.Context, q Queue) error {
	needLock := p.opts.model == Clustering
	if needLock {
		granted, err := p.lock(ctx, q.Broker, []Queue{q})
		if err != nil {
			return err
		}
		if len(granted) == 0 {
			return errors.New("its lock is held by another member")
		}
	}
	start, err := p.startOffset(ctx, q)
	if err != nil {
		if needLock {
			p.unlock(ctx, q)
		}
		return err
	}
	aq := p.newAssigned(q, p.subExpression(q.Topic), start)
	if needLock {
		aq.lockedAt.Store(time.Now().UnixNano())
	}
	p.mu.Lock()
	if p.state != pushStarted {
		p.mu.Unlock()
		aq.cancel()
		return ErrClosed
	}
	p.queues[keyOf(q)] = aq
	p.mu.Unlock()
	p.startLoops(aq)
	p.c.log.Info("rebalance: took queue", "queue", q, "offset", start)
	return nil
}

// newAssigned returns the state of a queue the consumer takes, to be
// consumed from start with a tag filter.
func (p *PushConsumer) newAssigned(q Queue, filter string, start int64) *assignedQueue {
	actx, cancel := context.WithCancel(p.life)
	return &assignedQueue{
		q: q, filter: filter, pq: newProcessQueue(start, p.opts.ordered), ctx: actx, cancel: cancel,
		wake: make(chan struct{}, 1), needLock: p.opts.model == Clustering, committed: -1,
	}
}

// startLoops starts aq's pull loop and (ordered) its consume loop.
func (p *PushConsumer) startLoops(aq *assignedQueue) {
	aq.loops.Add(1)
	if !p.tasks.goFunc(func() { p.pullLoop(aq) }) {
		aq.loops.Done()
	}
	if p.opts.ordered {
		aq.loops.Add(1)
		if !p.tasks.goFunc(func() { p.orderedLoop(aq) }) {
			aq.loops.Done()
		}
	}
}

func (p *PushConsumer) subExpression(topic string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subs[topic]
}

// startOffset is where consuming q starts: the committed offset, else
// the ConsumeFrom position.
func (p *PushConsumer) startOffset(ctx context.Context, q Queue) (int64, error) {
	req := &gantryv1.QueryOffsetRequest{Group: p.group, Topic: q.Topic, QueueId: q.ID}
	if p.opts.model == Broadcasting {
		req.ClientId = p.c.cfg.ClientID
	}
	var off int64
	_, err := p.c.call(q, "query offset", func(m gantryv1.MessagingClient) error {
		resp, err := m.QueryOffset(ctx, req)
		if err != nil {
			return err
		}
		if resp.GetFound() {
			off = resp.GetOffset()
			return nil
		}
		switch p.opts.from {
		case ConsumeFromTimestamp:
			r, err := m.SearchOffset(ctx, &gantryv1.SearchOffsetRequest{Topic: q.Topic, QueueId: q.ID, TimestampMs: p.opts.fromTime.UnixMilli()})
			off = r.GetOffset()
			return err
		default:
			r, err := m.GetQueueOffsets(ctx, &gantryv1.GetQueueOffsetsRequest{Topic: q.Topic, QueueId: q.ID})
			off = r.GetMaxOffset()
			if p.opts.from == ConsumeFromFirstOffset {
				off = r.GetMinOffset()
			}
			return err
		}
	})
	return off, err
}

// lock asks the broker at addr for the locks of qs and returns those
// granted.
func (p *PushConsumer) lock(ctx context.Context, addr string, qs []Queue) ([]Queue, error) {
	req := &gantryv1.LockQueuesRequest{Group: p.group, ClientId: p.c.cfg.ClientID}
	for _, q := range qs {
		req.Queues = append(req.Queues, &gantryv1.QueueRef{Topic: q.Topic, QueueId: q.ID})
	}
	m, err := p.c.messaging(addr)
	if err != nil {
		return nil, err
	}
	resp, err := m.LockQueues(ctx, req)
	if err != nil {
		return nil, callError("lock queues", addr, err, ErrTopicNotFound)
	}
	var out []Queue
	for _, r := range resp.GetLocked() {
		for _, q := range qs {
			if q.Topic == r.GetTopic() && q.ID == r.GetQueueId() {
				out = append(out, q)
			}
		}
	}
	return out, nil
}

// unlock releases q's lock (best effort: it expires anyway).
func (p *PushConsumer) unlock(ctx context.Context, q Queue) {
	p.lockMu.Lock()
	defer p.lockMu.Unlock()
	m, err := p.c.messaging(q.Broker)
	if err == nil {
		_, err = m.UnlockQueues(ctx, &gantryv1.UnlockQueuesRequest{Group: p.group, ClientId: p.c.cfg.ClientID,
			Queues: []*gantryv1.QueueRef{{Topic: q.Topic, QueueId: q.ID}}})
	}
	if err != nil {
		p.c.log.Warn("unlock failed; the lock will expire", "queue", q, "err", err)
	}
}

// lockLoop renews the locks of the queues held (clustering). A queue
// whose lock is not renewed stops being consumed and triggers a rebalance.
func (p *PushConsumer) lockLoop() { tick.Every(p.life, p.opts.lockRenewEvery, p.renewLocks) }

// renewLocks renews the locks of the queues held, per broker.
func (p *PushConsumer) renewLocks() {
	// A queue being released is not renewed, and its unlock waits for the
	// renewal in flight: a renewal must not take back a lock just released.
	p.lockMu.Lock()
	defer p.lockMu.Unlock()
	byBroker := map[string][]*assignedQueue{}
	for _, aq := range p.assignedQueues() {
		if aq.ctx.Err() == nil {
			byBroker[aq.q.Broker] = append(byBroker[aq.q.Broker], aq)
		}
	}
	lost := false
	for addr, aqs := range byBroker {
		qs := make([]Queue, len(aqs))
		for i, aq := range aqs {
			qs[i] = aq.q
		}
		ctx, cancel := context.WithTimeout(p.life, nameServerCallTimeout)
		granted, err := p.lock(ctx, addr, qs)
		cancel()
		if err != nil {
			if p.life.Err() == nil {
				p.c.log.Warn("lock renewal failed", "broker", addr, "err", err)
			}
			continue // the locks stay trusted until their local expiry
		}
		now := time.Now().UnixNano()
		for _, aq := range aqs {
			if slices.Contains(granted, aq.q) {
				aq.lockedAt.Store(now)
			} else {
				aq.lockedAt.Store(0)
				lost = true
				p.c.log.Warn("queue lock lost", "queue", aq.q)
			}
		}
	}
	if lost {
		trigger(p.kick)
	}
}
