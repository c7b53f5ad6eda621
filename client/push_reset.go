package client

// resetQueues moves the queues of topic this consumer holds on the broker
// at addr to offsets (by queue id): the broker reset the group's offsets
// (Admin.ResetOffsetByTime), and told it through its group watch.
func (p *PushConsumer) resetQueues(addr, topic string, offsets map[int32]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != pushStarted {
		return
	}
	for k, aq := range p.queues {
		if off, ok := offsets[aq.q.ID]; ok && aq.q.Broker == addr && aq.q.Topic == topic {
			p.queues[k] = p.replaceQueue(aq, off)
		}
	}
}

// resetQueue moves aq to offset, if the consumer still holds it: the
// broker answered its pull "offset moved" back to offset, as after a reset
// of the group's offsets whose notification this consumer missed.
func (p *PushConsumer) resetQueue(aq *assignedQueue, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := keyOf(aq.q); p.state == pushStarted && p.queues[k] == aq {
		p.queues[k] = p.replaceQueue(aq, offset)
	}
}

// replaceQueue returns the state that takes over a held queue from old, to
// consume it from offset, as RocketMQ's clients do when told of a reset:
// old stops pulling and is dropped (it commits nothing more, and what it
// pulled and has not handled yet is not handed to the handler), and the
// new state pulls from offset, which is then the offset it commits. The
// queue's lock is kept. The new state starts pulling once old's loops
// have ended and any commit of old in flight has been answered, so that
// the broker, which ignores commits of other offsets until the group
// pulls from the reset offset, has seen it; for ordered consumption, once
// old's handler call in progress returned. Releasing the new state waits
// for old's batches still running. p.mu is held and the consumer started:
// Shutdown waits for what it starts.
func (p *PushConsumer) replaceQueue(old *assignedQueue, offset int64) *assignedQueue {
	old.cancel()
	aq := p.newAssigned(old.q, old.filter, offset)
	aq.lockedAt.Store(old.lockedAt.Load())
	aq.loops.Add(1)    // the start below
	aq.inflight.Add(1) // old's batches
	start := func() {
		old.drop()
		old.loops.Wait()
		if aq.ctx.Err() == nil {
			p.startLoops(aq)
		}
		aq.loops.Done()
		old.inflight.Wait()
		aq.inflight.Done()
	}
	if !p.tasks.goFunc(start) { // cannot happen while started: tasks.wait comes after
		aq.loops.Done()
		aq.inflight.Done()
	}
	p.c.log.Info("queue moved to a reset offset", "queue", old.q, "from", old.pq.commitOffset(), "to", offset)
	return aq
}
