package client

import (
	"cmp"
	"slices"
	"sync"
)

// processQueue holds the messages of one assigned queue from their pull to
// the end of their handling, in offset order. Its commit offset is the
// lowest offset still held (pulled and not yet handled), or the next offset
// to pull when it holds nothing: never past a message that was not handled.
//
// Its load, for flow control, counts the messages not handled yet, as
// RocketMQ's does: a message waiting at the front (its handler still
// running, or its send-back to the broker) keeps the handled ones behind
// it in the queue until it is done, only as offsets. Only ordered
// consumption, which hands messages out from here, keeps the messages
// themselves; concurrent consumption keeps each one's offset and size, so
// that neither a handled message nor the pull it came in stays in memory
// for the one in front (a failed message waiting to go back is a copy held
// by its sender). Handled messages count neither as messages nor as bytes;
// the offset span bounds them (WithMaxSpan).
type processQueue struct {
	mu        sync.Mutex
	entries   []pqEntry // ascending offsets; handled ones leave from the front
	unhandled int       // entries not done
	bytes     int64     // body bytes of the entries held
	next      int64     // the offset to pull next
	taken     int       // ordered: entries[:taken] are handed to the handler
	peak      int       // most messages held and not handled at once
	keepMsgs  bool      // ordered: entries hold their messages until done
	space     chan struct{}
}

type pqEntry struct {
	off  int64       // msg.QueueOffset
	size int64       // body bytes
	msg  *MessageExt // ordered only; nil once done
	done bool
}

// newProcessQueue returns a queue that pulls from next on; keepMsgs for
// ordered consumption (take, untake).
func newProcessQueue(next int64, keepMsgs bool) *processQueue {
	return &processQueue{next: next, keepMsgs: keepMsgs, space: make(chan struct{}, 1)}
}

// put adds pulled messages (ascending offsets, after those held) and sets
// the next offset to pull.
func (pq *processQueue) put(msgs []*MessageExt, next int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		e := pqEntry{off: m.QueueOffset, size: int64(len(m.Body))}
		if pq.keepMsgs {
			e.msg = m
		}
		pq.entries = append(pq.entries, e)
		pq.bytes += e.size
	}
	pq.unhandled += len(msgs)
	pq.peak = max(pq.peak, pq.unhandled)
	pq.next = next
}

// setNext moves the next offset to pull (the broker corrected it).
func (pq *processQueue) setNext(next int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.next = next
}

// nextOffset returns the offset to pull next.
func (pq *processQueue) nextOffset() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.next
}

// done marks messages handled and drops the handled prefix.
func (pq *processQueue) done(msgs []*MessageExt) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	j := -1 // the entry after the last one marked: msgs are usually a run
	for _, m := range msgs {
		if j < 0 || j >= len(pq.entries) || pq.entries[j].off != m.QueueOffset {
			i, ok := slices.BinarySearchFunc(pq.entries, m.QueueOffset, func(e pqEntry, off int64) int {
				return cmp.Compare(e.off, off)
			})
			if !ok {
				j = -1
				continue
			}
			j = i
		}
		if e := &pq.entries[j]; !e.done {
			e.done = true
			pq.unhandled--
			pq.bytes -= e.size
			e.msg = nil // handled: nothing here keeps it, or its pull, in memory
		}
		j++
	}
	n := 0
	for n < len(pq.entries) && pq.entries[n].done {
		n++
	}
	if n > 0 {
		clear(pq.entries[:n])
		pq.entries = pq.entries[n:]
		pq.taken = max(pq.taken-n, 0)
	}
	select { // fewer unhandled, or a smaller span
	case pq.space <- struct{}{}:
	default:
	}
}

// take hands out up to n messages not handed out yet, in offset order
// (ordered consumption).
func (pq *processQueue) take(n int) []*MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	end := min(pq.taken+n, len(pq.entries))
	out := make([]*MessageExt, 0, end-pq.taken)
	for _, e := range pq.entries[pq.taken:end] {
		out = append(out, e.msg)
	}
	pq.taken = end
	return out
}

// untake gives back the last n messages handed out, to be handed out
// again (ordered consumption that asked for a retry).
func (pq *processQueue) untake(n int) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.taken = max(pq.taken-n, 0)
}

// pending reports whether messages wait to be handed out (ordered).
func (pq *processQueue) pending() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.taken < len(pq.entries)
}

// commitOffset is the offset to commit: the lowest held, or the next to
// pull.
func (pq *processQueue) commitOffset() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if len(pq.entries) > 0 {
		return pq.entries[0].off
	}
	return pq.next
}

// load returns how many messages are held and not handled yet, the body
// bytes of all held, and the offset span between the first held and the
// last.
func (pq *processQueue) load() (count int, bytes int64, span int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if n := len(pq.entries); n > 0 {
		span = pq.entries[n-1].off - pq.entries[0].off
	}
	return pq.unhandled, pq.bytes, span
}

// peakCount returns the most messages ever held and not handled at once.
func (pq *processQueue) peakCount() int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.peak
}
