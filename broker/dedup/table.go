package dedup

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// How the table works (docs/BROKER.md, "De-duplication of sends").
//
// The store's key index is the memory of the keys stored: the dispatcher
// indexes every record under its topic by its UNIQ_KEY and its
// IDEMPOTENCY_KEY, and a parked record under its REAL_TOPIC by its key
// too, with its store time. A user send (Send, SendRecords) claims the
// keys of its messages (their IDEMPOTENCY_KEY, else their UNIQ_KEY) under
// the table's mutex before it stores anything; a key already claimed by a
// send still in flight makes it wait for that send to land (then it is a
// duplicate, or stores if that one failed), so that of two concurrent
// sends of one key exactly one stores it. Holding its claims, the send
// then looks each key up in the index (store.FindByKey): the oldest record
// of the topic (or parked for it) with that key stored within the window
// is the original, and the message is a duplicate of it.
//
// The index lags the log by the dispatcher's delay, so a landed send keeps
// its keys in the table, with where they went, until the dispatcher has
// passed their records: each claim drops, in the order they landed, the
// recent keys whose records are below the store's dispatch position. This
// needs no goroutine, and the table holds about the keys of the sends in
// flight and of the dispatcher's delay (a few ms of sends), whatever the
// window.

// Result says where a message of a Send or SendRecords went.
type Result struct {
	store.PutResult
	// Duplicate reports that the message repeated a key stored within the
	// duplication window: nothing was stored for it, and the result is the
	// original's (its offset message id, UNIQ_KEY, queue, queue offset,
	// physical offset and store time).
	Duplicate bool
}

// Marks of a message of a send in a Flight; values >= 0 are the index
// of an earlier message of the same send with the same key (a duplicate of
// it).
const (
	markNone  int32 = -1 // no key: stored, not remembered
	markNew   int32 = -2 // claimed: stored and remembered
	markDup   int32 = -3 // a duplicate of a recent send: not stored
	markFound int32 = -4 // claimed, then found in the index: a duplicate, not stored; the claim goes at land
)

// Table holds the claims of the sends in flight and the recent keys
// not yet known indexed. Its methods are safe for concurrent use; its
// mutex is a leaf.
//
// A key of a topic is held by a 16-byte id: the 16 bytes a UNIQ_KEY of 32
// upper-case hex digits (the form producers make) spells, else a 128-bit
// hash of the key, XOR a 128-bit hash of the topic (hash/maphash with
// other seeds; all seeded per process: two keys share an id with a
// probability of about 2^-128 per pair), so a lookup hashes 16 bytes. The index lookup compares the
// keys themselves.
type Table struct {
	window     int64 // ms
	now        func() time.Time
	dispatched func() int64 // the store's dispatch position: records below it are indexed
	// refusal is the store's refusal of writes while its dispatcher is
	// stalled (Store.Refusal), nil when it takes them; nil func: never.
	refusal   func() error
	store     Store // nil in tests of the table alone
	storeAddr netip.AddrPort
	parking   []string        // topics holding records parked for their REAL_TOPIC
	seeds     [4]maphash.Seed // two for keys, two for topics
	dups      atomic.Int64    // messages answered as duplicates

	mu     sync.Mutex
	keys   map[keyID]*slot // keys claimed by sends in flight, and recent keys
	recent int             // keys landed (no claim) in keys
	landed []recentRef     // the recent keys in the order they landed, from head on
	head   int
	slots  slotSlab

	// First attempts and retries (firstattempt.go).
	firsts           map[uint64]struct{} // first attempts in flight, by sequence number
	firstNext        uint64              // the next first attempt's number
	firstLastPhys    int64               // the physical offset of the last record a first attempt stored (-1: none)
	firstLanded      chan struct{}       // closed when a first attempt lands, for retries waiting; nil when none waits
	retried          map[keyID]int64     // keys of retries, to the unix ms when they stop mattering
	retriedQ         []retriedRef        // registrations of retried in time order, from retriedHead on
	retriedHead      int
	retriedFullUntil int64 // unix ms: retries overflowed the table, first attempts go the checked way until then
}

// recentRef names a recent key, by its slot, and the physical offset of
// its record: the key is still that recent one if the slot holds no claim
// and that offset (a slot freed or claimed again since holds another).
type recentRef struct {
	slot *slot
	phys int64
}

// keyID is the id of a key of a topic in the table.
type keyID [16]byte

// slot is a key in the table: claimed by a send in flight (fl set),
// or a recent key, landed, with its record's physical offset and store
// time. The rest of a duplicate's result is read from that record
// (completeDuplicate). Slots live in the table's slotSlab, so that a
// send's claims, its landing and the dispatcher's passing update a key in
// place: the map is looked up once a key (claim), added to once and
// deleted from once.
type slot struct {
	id      keyID   // the key's id in keys
	fl      *Flight // the claim; nil once landed
	idx     int32   // the message's index in fl's send
	phys    int64   // -1 while claimed, or free
	storeTS int64   // unix ms
}

// slotSlab hands out dedupSlots from arrays of slabSlots and takes back
// the ones the table drops, for reuse.
type slotSlab struct {
	free []*slot
	next []slot // the rest of the newest array
}

const slabSlots = 256

func (sl *slotSlab) get() *slot {
	if n := len(sl.free); n > 0 {
		s := sl.free[n-1]
		sl.free = sl.free[:n-1]
		return s
	}
	if len(sl.next) == 0 {
		sl.next = make([]slot, slabSlots)
	}
	s := &sl.next[0]
	sl.next = sl.next[1:]
	return s
}

// put takes s back, cleared: a recentRef to it no longer matches.
func (sl *slotSlab) put(s *slot) {
	*s = slot{phys: -1}
	sl.free = append(sl.free, s)
}

// drop removes s's key from the table and frees s. Under mu.
func (t *Table) drop(s *slot) {
	delete(t.keys, s.id)
	t.slots.put(s)
}

// Flight is one send's claim on its keys.
type Flight struct {
	done   chan struct{} // made by the first send that waits for this one, closed when it lands
	marks  []int32       // per message: markNone, markNew, markDup, markFound or an earlier index
	slots  []*slot       // per message: the slot of its key (markNew, markFound: claimed)
	stores int           // messages to store (markNone and markNew)
	now    int64         // unix ms of the claim: the window ends there

	oneMark [1]int32 // backing arrays of a one-message send
	oneSlot [1]*slot
}

// New returns the table of cfg, which must be valid.
func New(cfg Config) *Table {
	t := newTable(cfg.Window, cfg.Now, cfg.Store.DispatchedOffset)
	t.refusal, t.store, t.storeAddr, t.parking = cfg.Store.Refusal, cfg.Store, cfg.StoreAddr, cfg.ParkingTopics
	return t
}

// newTable returns a table for window; dispatched reports the store's
// dispatch position (Store.DispatchedOffset).
func newTable(window time.Duration, now func() time.Time, dispatched func() int64) *Table {
	return &Table{window: window.Milliseconds(), now: now, dispatched: dispatched,
		seeds: [4]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed()},
		keys:  map[keyID]*slot{}, firsts: map[uint64]struct{}{}, firstLastPhys: -1, retried: map[keyID]int64{}}
}

// Key is a key as a send holds it: a property value, or its bytes in a
// record.
type Key interface{ string | []byte }

// id returns the id of key k of the topic whose topicID is tid.
func idOf[K Key](t *Table, tid keyID, k K) keyID {
	d := keyPart(t, k)
	for i := range d {
		d[i] ^= tid[i]
	}
	return d
}

// topicID is the hash of topic that ids of its keys include.
func topicPart(t *Table, topic string) keyID {
	var d keyID
	binary.LittleEndian.PutUint64(d[:8], maphash.String(t.seeds[2], topic))
	binary.LittleEndian.PutUint64(d[8:], maphash.String(t.seeds[3], topic))
	return d
}

// keyPart returns the part of an id that k makes: the bytes of 32 upper-case
// hex digits, else a hash.
func keyPart[K Key](t *Table, k K) keyID {
	var d keyID
	if len(k) == 2*len(d) && decodeUpperHex(&d, k) {
		return d
	}
	var h1, h2 uint64
	switch v := any(k).(type) {
	case string:
		h1, h2 = maphash.String(t.seeds[0], v), maphash.String(t.seeds[1], v)
	case []byte:
		h1, h2 = maphash.Bytes(t.seeds[0], v), maphash.Bytes(t.seeds[1], v)
	}
	binary.LittleEndian.PutUint64(d[:8], h1)
	binary.LittleEndian.PutUint64(d[8:], h2)
	return d
}

// decodeUpperHex decodes the 32 upper-case hex digits of k into d.
func decodeUpperHex[K Key](d *keyID, k K) bool {
	var bad byte
	for i := range d {
		hi, lo := upperHex[k[2*i]], upperHex[k[2*i+1]]
		bad |= hi | lo
		d[i] = hi<<4 | lo&0xF
	}
	return bad&0xF0 == 0
}

// upperHex maps an upper-case hex digit to its value, anything else to
// 0xFF.
var upperHex = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'A' <= c && c <= 'F':
			t[c] = byte(c - 'A' + 10)
		default:
			t[c] = 0xFF
		}
	}
	return t
}()

// forgetIndexed drops the recent keys whose records the dispatcher has
// passed (the index holds them), in the order they landed: a key landed
// after one stored further on waits for that one. Under mu.
func (t *Table) forgetIndexed() {
	if t.head == len(t.landed) {
		return
	}
	d := t.dispatched()
	for ; t.head < len(t.landed) && t.landed[t.head].phys < d; t.head++ {
		ref := t.landed[t.head]
		if s := ref.slot; s.fl == nil && s.phys == ref.phys { // not claimed, landed again nor freed since
			t.drop(s)
			t.recent--
		}
	}
	t.landed, t.head = compactQueue(t.landed, t.head)
}

// compactQueue returns q, a queue read up to head, and its new head: empty
// once all of it is read, else moved to the front once at least half of
// it and 1,024 entries are, so that it neither grows without end nor is
// copied often.
func compactQueue[T any](q []T, head int) ([]T, int) {
	switch {
	case head == len(q):
		return q[:0], 0
	case head >= 1024 && 2*head >= len(q):
		return q[:copy(q, q[head:])], 0
	}
	return q, head
}

// claimKeys claims the keys of a send to topic (keys[i] is message i's,
// empty for none) and returns the send's flight. A message whose key a
// recent send stored within the window is marked a duplicate and out[i]
// gets the original's physical offset and store time; the index is not
// consulted (findStored does that for the claimed keys). If another send
// in flight holds one of the keys, the claims made so far are undone and
// claimKeys waits for that send to land, then starts over (holding no
// claim while it waits, so sends never wait in a cycle); it gives up when
// ctx ends.
func claimKeys[K Key](ctx context.Context, t *Table, topic string, keys []K, out []Result) (*Flight, error) {
	fl := &Flight{}
	fl.marks, fl.slots = fl.oneMark[:], fl.oneSlot[:]
	if len(keys) > 1 {
		fl.marks, fl.slots = make([]int32, len(keys)), make([]*slot, len(keys))
	}
	for {
		wait := tryClaim(t, topic, keys, fl, out)
		if wait == nil {
			return fl, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("broker: send to %q: waiting for a send of the same key in flight: %w", topic, ctx.Err())
		}
	}
}

// tryClaim is one pass of claimKeys: nil when the keys are claimed, else
// the channel to wait on.
func tryClaim[K Key](t *Table, topic string, keys []K, fl *Flight, out []Result) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now().UnixMilli()
	fl.now = now
	t.forgetIndexed()
	tid := topicPart(t, topic)
	fl.stores = 0
	for i, k := range keys {
		if len(k) == 0 {
			fl.marks[i] = markNone
			fl.stores++
			continue
		}
		kid := idOf(t, tid, k)
		s, ok := t.keys[kid]
		switch {
		case ok && s.fl == fl: // an earlier message of this send
			fl.marks[i] = s.idx
			continue
		case ok && s.fl != nil: // another send's
			t.unclaim(fl, i)
			if s.fl.done == nil {
				s.fl.done = make(chan struct{})
			}
			return s.fl.done
		case ok && now-s.storeTS < t.window:
			fl.marks[i] = markDup
			out[i] = Result{Duplicate: true, PutResult: store.PutResult{PhysicalOffset: s.phys, StoreTimestamp: s.storeTS}}
			continue
		case ok:
			t.recent-- // expired: the claim takes its slot
		default:
			s = t.slots.get()
			s.id = kid
			t.keys[kid] = s
		}
		s.fl, s.idx, s.phys, s.storeTS = fl, int32(i), -1, 0
		fl.marks[i], fl.slots[i] = markNew, s
		fl.stores++
	}
	return nil
}

// unclaim removes the claims fl made for its first n messages.
func (t *Table) unclaim(fl *Flight, n int) {
	for i, m := range fl.marks[:n] {
		if m == markNew || m == markFound {
			t.drop(fl.slots[i])
		}
	}
}

// found marks message i of fl, whose key it claimed, a duplicate of the
// stored message r. Only fl's send calls it (fl's marks are its own); the
// claim is kept until land, so sends waiting for it see the outcome.
func (fl *Flight) found(i int, r store.PutResult, out []Result) {
	fl.marks[i] = markFound
	fl.stores--
	out[i] = Result{PutResult: r, Duplicate: true}
}

// land records the outcome of fl's send and fills out: res holds
// the results of the messages it stored (those marked markNone and
// markNew, in order), or is empty when it stored nothing (a store puts all
// or nothing). The keys stored are remembered as recent; every claim is
// released; sends waiting for fl are woken.
func (t *Table) land(fl *Flight, res []store.PutResult, out []Result) {
	stored := len(res) > 0
	t.mu.Lock()
	defer t.mu.Unlock()
	j := 0
	for i, m := range fl.marks {
		switch {
		case m == markFound:
			t.drop(fl.slots[i])
			continue
		case m != markNone && m != markNew:
			continue
		}
		if stored {
			r := res[j]
			out[i] = Result{PutResult: r}
			if m == markNew {
				s := fl.slots[i]
				s.fl, s.phys, s.storeTS = nil, r.PhysicalOffset, r.StoreTimestamp
				t.recent++
				t.landed = append(t.landed, recentRef{slot: s, phys: r.PhysicalOffset})
			}
		} else if m == markNew {
			t.drop(fl.slots[i])
		}
		j++
	}
	for i, m := range fl.marks {
		if m >= 0 { // out[m] is final: a duplicate's, or set above
			out[i] = out[m]
			out[i].Duplicate = true
		}
	}
	if fl.done != nil {
		close(fl.done)
	}
}

// Recent returns how many recent keys the table holds: landed, and not
// yet known indexed by the store.
func (t *Table) Recent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recent
}

// Unindexed drops the recent keys whose records the store has indexed
// and returns how many remain: 0 once every landed send is answered from
// the index alone.
func (t *Table) Unindexed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetIndexed()
	return t.recent
}

// Held returns how many keys the table holds, claimed or recent, and how
// many retries registered.
func (t *Table) Held() (keys, retried int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys), len(t.retried)
}

// Duplicates returns how many messages were answered as duplicates.
func (t *Table) Duplicates() int64 { return t.dups.Load() }

// StoresAll reports whether fl's send stores every message: none is a
// duplicate, or fl has no marks (a first attempt, which claims nothing).
func (fl *Flight) StoresAll() bool { return fl.stores == len(fl.marks) }

// Stored reports whether message i of fl's send is stored: it is no
// duplicate.
func (fl *Flight) Stored(i int) bool { return fl.marks[i] == markNone || fl.marks[i] == markNew }

// Send runs a user send to topic through t: it claims the
// messages' keys (keys[i] is message i's, empty for none), looks the
// claimed ones up in the store (findStored), stores the messages that are
// not duplicates with put (which picks them with fl.Keep or
// fl.KeepRecords), and lands the outcome. The results are in the order of
// the messages; a duplicate's is its original's, marked. An error with
// results is indeterminate (see Send); without, nothing was stored.
//
// attempt is the send's SendRequest.attempt (0: not said), and uniqKeyed
// reports that every message's key is its UNIQ_KEY: a first attempt so
// keyed skips the table and the index unless a retry registered one of
// its keys, and a retry first waits for the first attempts in flight
// (firstattempt.go).
func Send[K Key](ctx context.Context, t *Table, topic string, keys []K, attempt uint32, uniqKeyed bool,
	put func(fl *Flight) ([]store.PutResult, error)) ([]Result, error) {
	switch {
	case attempt == 1 && uniqKeyed:
		if seq, ok := startFirstAttempt(t, topic, keys); ok {
			var res []store.PutResult
			defer func() { t.landFirstAttempt(seq, res) }()
			res, err := put(&Flight{}) // no marks: stores every message
			return Results(res), err
		}
	case attempt >= 2:
		if err := waitFirstAttempts(ctx, t, topic, keys); err != nil {
			return nil, err
		}
	}
	out := make([]Result, len(keys))
	fl, err := claimKeys(ctx, t, topic, keys, out)
	if err != nil {
		return nil, err
	}
	if err := findStored(t, topic, keys, fl, out); err != nil {
		t.land(fl, nil, out)
		return nil, err
	}
	var res []store.PutResult
	if fl.stores > 0 {
		res, err = put(fl)
	}
	t.land(fl, res, out)
	if fl.stores > 0 && len(res) == 0 {
		return nil, err
	}
	for i, m := range fl.marks {
		if m == markDup {
			completeDuplicate(t, &out[i], keys[i])
		}
	}
	t.dups.Add(int64(len(keys) - fl.stores))
	return out, err
}

// completeDuplicate fills in the rest of a duplicate of a recent send's
// result (its offset message id, UNIQ_KEY, queue and queue offset) from
// the record at its physical offset; if the log no longer has it (not
// expected: it was stored within the dispatcher's delay), the offset
// message id is made from the physical offset and key, its key, stands for
// its UNIQ_KEY.
func completeDuplicate[K Key](t *Table, r *Result, key K) {
	if full, err := t.store.ResultAt(r.PhysicalOffset); err == nil {
		r.PutResult = full
		return
	}
	r.MsgID = message.EncodeOffsetMsgID(t.storeAddr, r.PhysicalOffset)
	r.UniqKey = string(key)
}

// findStored looks the keys fl claimed up in the store's index: a message
// whose key the store holds for topic within the window is a duplicate of
// the oldest such record (found).
func findStored[K Key](t *Table, topic string, keys []K, fl *Flight, out []Result) error {
	begin := fl.now - t.window + 1
	for i, m := range fl.marks {
		if m != markNew {
			continue
		}
		key := []byte(keys[i]) // no copy: the compiler sees it is only read
		r, ok, err := t.store.FindByKey(topic, key, begin, math.MaxInt64, func(v message.View) bool {
			return isSendOf(v, topic, key, t.parking)
		})
		if err != nil {
			return fmt.Errorf("broker: send to %q: looking for a stored message of key %q: %w", topic, string(key), err)
		}
		if ok {
			fl.found(i, r, out)
		}
	}
	return nil
}

// isSendOf reports whether the record v is a send of key to topic: a
// message of topic, or one parked on its way there (in a parking topic,
// with that REAL_TOPIC), whose IDEMPOTENCY_KEY, else UNIQ_KEY,
// is key.
func isSendOf(v message.View, topic string, key []byte, parking []string) bool {
	var uniq, idem, realTopic []byte
	for k, val := range v.All() { // one pass; the last of a repeated key wins
		switch string(k) {
		case message.PropUniqKey:
			uniq = val
		case message.PropIdempotencyKey:
			idem = val
		case message.PropRealTopic:
			realTopic = val
		}
	}
	switch t := string(v.Topic()); {
	case t == topic:
	case slices.Contains(parking, t) && string(realTopic) == topic:
	default:
		return false
	}
	if len(idem) == 0 {
		idem = uniq
	}
	return string(idem) == string(key)
}

// Results converts the results of a send that was not de-duplicated.
func Results(res []store.PutResult) []Result {
	if res == nil {
		return nil
	}
	out := make([]Result, len(res))
	for i, r := range res {
		out[i].PutResult = r
	}
	return out
}

// MessageKey is a message's de-duplication key: its IDEMPOTENCY_KEY, else
// its UNIQ_KEY, else "".
func MessageKey(m *message.Message) string {
	if k, ok := m.Properties.Get(message.PropIdempotencyKey); ok && k != "" {
		return k
	}
	return m.UniqKey()
}
