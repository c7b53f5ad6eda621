package delivery

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/tick"
	"github.com/gantrymq/gantry/message"
)

// TimerProgressFile is the timer's progress file, in the store's config
// directory beside delayOffset.json (with a .bak like the metadata files):
//
//	{"lowWater": <offset>, "delivered": [[<from>, <to>], ...]}
//
// Every queue offset of TimerTopic below lowWater is delivered, and so is
// every offset in a delivered range [from, to) above it.
const TimerProgressFile = "timerProgress.json"

// progressInterval is about the longest delivered progress waits to be
// recorded: the scheduler and the timer flush the commit log themselves
// (under ASYNC_FLUSH it may wait for more data) when their progress waited
// this long, and the timer saves its file this often while it changes.
const progressInterval = time.Second

// timer delivers the messages parked with a delivery time: TimerTopic's
// one queue holds them in arrival order, each with its absolute
// TIMER_DELIVER_MS. The timer keeps the pending ones in a min-heap of
// (delivery time, queue offset), filled by scanning the queue from its
// low-water mark at Open and then as messages are parked; every
// Config.Tick it re-publishes those due by Config.Now.
//
// Delivered offsets enter the saved progress only once the commit log is
// durable past the re-published messages, and the file is written
// (atomically, within about progressInterval of a change and at Close)
// from that. A crash after a re-publish and before the save delivers the message
// again at the next Open; a crash never loses one.
//
// Everything but the two counters is owned by the timer's goroutine (and
// by openTimer and finish, before it starts and after it ended).
type timer struct {
	d    *Service
	log  *slog.Logger
	fs   fsx.FS
	path string

	pending   timerHeap
	scanned   int64     // every offset below it is pending, unsaved or done
	done      offsetSet // delivered offsets whose messages are durable: what the file holds
	unsaved   []progress
	dirty     bool      // done changed since the last save
	savedAt   time.Time // last save (real time)
	flushedAt time.Time // last flush of the log for the progress (real time)
	warned    time.Time

	queued      atomic.Int64  // len(pending), for Pending
	scannedUpTo atomic.Int64  // scanned, for Pending
	saves       atomic.Uint64 // saves of the progress file, for StateVersion
}

// timerEntry is a pending message: its delivery time (unix ms) and queue
// offset.
type timerEntry struct{ at, off int64 }

// openTimer loads the timer's progress and scans the queue from its
// low-water mark.
func openTimer(d *Service) (*timer, error) {
	t := &timer{d: d, log: d.log.With("component", "timer"), fs: d.cfg.FS,
		path: filepath.Join(d.cfg.Dir, TimerProgressFile), savedAt: time.Now()}
	maxOff := queueEnd(d.store, TimerTopic, 0)
	src, err := metadata.Load(t.fs, t.path, func(data []byte) error {
		s, err := decodeTimerProgress(data, maxOff)
		if err == nil {
			t.done = s
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("broker: load %s: %w", t.path, err)
	}
	if src == metadata.SourceBackup {
		t.log.Warn("timer progress file damaged; using its backup (messages may be delivered again)", "file", t.path)
		t.dirty = true
	}
	if low := t.done.low(); low > maxOff {
		t.log.Warn("timer progress past its queue's end (the log lost its tail); delivering from the end",
			"lowWater", low, "queueEnd", maxOff)
		t.done, t.dirty = offsetSet{base: maxOff}, true
	}
	t.scanned = t.done.low()
	t.scan()
	return t, nil
}

// run delivers due messages every Config.Tick until ctx ends.
func (t *timer) run(ctx context.Context) {
	tick.Every(ctx, t.d.cfg.Tick, func() { t.step(ctx) })
}

// step takes in newly parked messages, delivers the due ones, records
// what the log made durable and saves the progress if it changed.
func (t *timer) step(ctx context.Context) {
	t.scan()
	for ctx.Err() == nil { // batches until none is due
		if !t.deliver(ctx) {
			break
		}
	}
	cl := t.d.commitLog
	flushed := cl.FlushedOffset()
	if len(t.unsaved) > 0 && t.unsaved[len(t.unsaved)-1].logEnd > flushed && time.Since(t.flushedAt) >= progressInterval {
		if err := cl.Flush(); err != nil {
			t.warn("flushing the commit log for the timer's progress failed; will retry", "err", err)
		}
		t.flushedAt, flushed = time.Now(), cl.FlushedOffset()
	}
	t.record(flushed)
	if t.dirty && time.Since(t.savedAt) >= progressInterval {
		_ = t.save()
	}
}

// scan adds the messages parked since the last scan to the heap.
func (t *timer) scan() {
	defer func() { t.queued.Store(int64(len(t.pending))); t.scannedUpTo.Store(t.scanned) }()
	for {
		_, maxOff := t.d.store.QueueOffsets(TimerTopic, 0)
		if t.scanned >= maxOff {
			return
		}
		if !t.scanBatch() {
			return
		}
	}
}

// scanBatch scans one batch of the queue from t.scanned and reports
// whether it moved.
func (t *timer) scanBatch() bool {
	gr, err := t.d.store.Get(TimerTopic, 0, t.scanned, deliverBatch, deliverBatchBytes, nil)
	if err != nil {
		t.warn("reading the timer queue failed; will retry", "offset", t.scanned, "err", err)
		return false
	}
	defer gr.Release()
	switch gr.Status {
	case store.Found, store.OffsetFoundNull, store.OffsetTooSmall:
	default:
		return false
	}
	expect := t.scanned
	for _, r := range gr.Records {
		qo := message.QueueOffsetOf(r.B)
		t.lose(expect, qo)
		expect = qo + 1
		if !t.done.has(qo) {
			heap.Push(&t.pending, timerEntry{at: t.deliverAt(r.B, qo), off: qo})
		}
	}
	t.lose(expect, gr.NextOffset)
	moved := gr.NextOffset > t.scanned
	t.scanned = max(t.scanned, gr.NextOffset)
	return moved
}

// lose marks offsets [from, to), whose records log retention deleted
// before their delivery, as done.
func (t *timer) lose(from, to int64) {
	n := 0
	for o := from; o < to; o++ {
		if !t.done.has(o) {
			t.done.add(o)
			n++
		}
	}
	if n > 0 {
		t.dirty = true
		t.log.Warn("parked messages deleted by log retention before their delivery", "messages", n, "offsets", from, "to", to)
	}
}

// deliverAt reads a parked record's TIMER_DELIVER_MS; a record without a
// valid one is due at once.
func (t *timer) deliverAt(rec []byte, qo int64) int64 {
	if v, err := message.NewView(rec); err == nil {
		if s, ok := v.Property(message.PropTimerDeliverMS); ok {
			if at, err := strconv.ParseInt(string(s), 10, 64); err == nil {
				return at
			}
		}
	}
	t.log.Warn("parked message without a valid TIMER_DELIVER_MS; delivering it at once", "offset", qo)
	return 0
}

// deliver re-publishes a batch of due messages and reports whether it
// delivered or dropped any.
func (t *timer) deliver(ctx context.Context) bool {
	now := t.d.cfg.Now().UnixMilli()
	var due []timerEntry
	for len(t.pending) > 0 && t.pending[0].at <= now && len(due) < deliverBatch {
		due = append(due, heap.Pop(&t.pending).(timerEntry))
	}
	if len(due) == 0 {
		return false
	}
	defer func() { t.queued.Store(int64(len(t.pending))) }()
	var msgs []*message.Message
	var sent, retry []timerEntry
	var dropped []int64
	for _, e := range due {
		m, err := t.read(e.off)
		switch {
		case errors.Is(err, errRetry):
			retry = append(retry, e)
		case err != nil:
			t.log.Warn("dropping a parked message that cannot be delivered", "offset", e.off, "err", err)
			dropped = append(dropped, e.off)
		default:
			msgs, sent = append(msgs, m), append(sent, e)
		}
	}
	if len(msgs) > 0 && !t.d.republish(ctx, msgs, t.warn) {
		retry, sent = append(retry, sent...), nil
	}
	for _, e := range retry {
		heap.Push(&t.pending, e)
	}
	if len(sent)+len(dropped) == 0 {
		return false
	}
	for _, e := range sent {
		dropped = append(dropped, e.off)
	}
	t.unsaved = appendProgress(t.unsaved, progress{offs: dropped, logEnd: t.d.commitLog.MaxOffset()})
	return true
}

// errRetry: a pending message cannot be read now; try again later.
var errRetry = errors.New("broker: parked message not readable yet")

// read returns the message to deliver for the parked record at offset
// off, errRetry, or why it cannot be delivered.
func (t *timer) read(off int64) (*message.Message, error) {
	gr, err := t.d.store.Get(TimerTopic, 0, off, 1, deliverBatchBytes, nil)
	if err != nil {
		t.warn("reading the timer queue failed; will retry", "offset", off, "err", err)
		return nil, errRetry
	}
	defer gr.Release()
	switch {
	case gr.Status == store.OffsetTooSmall || (gr.Status == store.OffsetFoundNull && len(gr.Records) == 0):
		return nil, errors.New("deleted by log retention before its delivery")
	case gr.Status != store.Found || len(gr.Records) == 0:
		return nil, errRetry
	}
	return t.d.unparked(gr.Records[0].B)
}

// record moves the delivered offsets whose messages the log made durable
// (flushed is its durable end) into the saved set.
func (t *timer) record(flushed int64) {
	i := 0
	for ; i < len(t.unsaved) && t.unsaved[i].logEnd <= flushed; i++ {
		for _, o := range t.unsaved[i].offs {
			t.done.add(o)
		}
		t.dirty = true
	}
	t.unsaved = t.unsaved[i:]
}

// save writes the progress file.
func (t *timer) save() error {
	data, err := json.MarshalIndent(timerProgressDoc{LowWater: t.done.low(), Delivered: t.done.ranges()}, "", "  ")
	if err != nil {
		return err
	}
	if err := metadata.Save(t.fs, t.path, append(data, '\n')); err != nil {
		t.warn("saving the timer progress failed; will retry", "file", t.path, "err", err)
		return err
	}
	t.dirty, t.savedAt = false, time.Now()
	t.saves.Add(1)
	return nil
}

// finish makes the delivered messages durable, records them and saves the
// progress; Close calls it after the loop ended. If the flush fails, the
// unrecorded messages will be delivered again.
func (t *timer) finish() error {
	if err := t.d.commitLog.Flush(); err != nil {
		return err
	}
	t.record(t.d.commitLog.FlushedOffset())
	if !t.dirty {
		return nil
	}
	return t.save()
}

// pendingCount returns the messages parked in the timer and not delivered.
func (t *timer) pendingCount() int64 {
	_, maxOff := t.d.store.QueueOffsets(TimerTopic, 0)
	return t.queued.Load() + max(maxOff-t.scannedUpTo.Load(), 0)
}

// warn logs a failure at most every warnEvery.
func (t *timer) warn(msg string, args ...any) {
	if time.Since(t.warned) >= warnEvery {
		t.warned = time.Now()
		t.log.Warn(msg, args...)
	}
}

// timerProgressDoc is TimerProgressFile.
type timerProgressDoc struct {
	LowWater  int64      `json:"lowWater"`
	Delivered [][2]int64 `json:"delivered"`
}

// decodeTimerProgress decodes and checks a progress file, ignoring
// offsets at or past the queue's end maxOff (which the log lost: new
// messages will take them).
func decodeTimerProgress(data []byte, maxOff int64) (offsetSet, error) {
	var doc timerProgressDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return offsetSet{}, fmt.Errorf("bad JSON: %w", err)
	}
	if doc.LowWater < 0 {
		return offsetSet{}, fmt.Errorf("lowWater %d: want >= 0", doc.LowWater)
	}
	s := offsetSet{base: doc.LowWater}
	prev := doc.LowWater
	for _, r := range doc.Delivered {
		if r[0] < prev || r[1] <= r[0] {
			return offsetSet{}, fmt.Errorf("delivered range [%d, %d): want ascending ranges above lowWater %d", r[0], r[1], doc.LowWater)
		}
		prev = r[1]
		for o := r[0]; o < min(r[1], maxOff); o++ {
			s.add(o)
		}
	}
	return s, nil
}

// timerHeap orders pending messages by delivery time, then offset.
type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].off < h[j].off)
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// offsetSet is a set of queue offsets: every offset below base, and base+i
// for each bit i set in bits (bit i%64 of word i/64). Full leading words
// are dropped as they fill, so it takes a bit per offset between the
// lowest missing offset and the highest member.
type offsetSet struct {
	base int64
	bits []uint64
}

func (s *offsetSet) has(o int64) bool {
	if o < s.base {
		return true
	}
	i := o - s.base
	return i/64 < int64(len(s.bits)) && s.bits[i/64]&(1<<(i%64)) != 0
}

func (s *offsetSet) add(o int64) {
	if o < s.base {
		return
	}
	i := o - s.base
	w := int(i / 64)
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	s.bits[w] |= 1 << (i % 64)
	n := 0
	for n < len(s.bits) && s.bits[n] == math.MaxUint64 {
		n++
	}
	if n > 0 {
		s.bits, s.base = s.bits[n:], s.base+int64(n)*64
	}
}

// low returns the lowest offset not in the set.
func (s *offsetSet) low() int64 {
	if len(s.bits) == 0 {
		return s.base
	}
	return s.base + int64(bits.TrailingZeros64(^s.bits[0]))
}

// ranges returns the members above low as ascending [from, to) ranges.
func (s *offsetSet) ranges() [][2]int64 {
	var out [][2]int64
	low, from := s.low(), int64(-1)
	for w, word := range s.bits {
		if (word == 0 && from < 0) || (word == math.MaxUint64 && from >= 0) {
			continue // no change of state within the word
		}
		for b := range 64 {
			o := s.base + int64(w*64+b)
			in := word&(1<<b) != 0 && o >= low
			switch {
			case in && from < 0:
				from = o
			case !in && from >= 0:
				out, from = append(out, [2]int64{from, o}), -1
			}
		}
	}
	if from >= 0 {
		out = append(out, [2]int64{from, s.base + int64(len(s.bits))*64})
	}
	return out
}
