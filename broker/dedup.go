package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// De-duplication of user sends (docs/BROKER.md, "De-duplication of sends").
//
// The table remembers, for DuplicationWindow after it was stored, where
// each message of a user send (Send, SendRecords) went, by its topic and
// key: its IDEMPOTENCY_KEY, or its UNIQ_KEY when it has none. A send
// claims its keys under the table's mutex before it stores anything; a key
// already claimed by a send still in flight makes it wait for that send to
// land (then it is a duplicate, or stores if that one failed), so that of
// two concurrent sends of one key exactly one stores it.
//
// Claims in flight sit in a small map of their own. Stored keys live in
// two generations of maps: the current one takes every key stored; once it
// is a window old it becomes the previous one, and the previous one is
// dropped whole (every key in it was stored at least a window ago). A
// lookup checks the claims, the current map, then the previous one, and a
// key older than the window counts as absent, so expiry needs no goroutine
// and the memory held is between one and two windows of keys.

// SendResult says where a message of a Send or SendRecords went.
type SendResult struct {
	store.PutResult
	// Duplicate reports that the message repeated a key stored within the
	// duplication window: nothing was stored for it, and the result is the
	// original's (its offset message id, UNIQ_KEY, queue, queue offset,
	// physical offset and store time).
	Duplicate bool
}

// Marks of a message of a send in a dedupFlight; values >= 0 are the index
// of an earlier message of the same send with the same key (a duplicate of
// it).
const (
	markNone int32 = -1 // no key: stored, not remembered
	markNew  int32 = -2 // claimed: stored and remembered
	markDup  int32 = -3 // a duplicate of a message stored before: not stored
)

// dedupTable is the broker's memory of the keys of recent user sends. Its
// methods are safe for concurrent use; its mutex is a leaf.
//
// A key is remembered by a 16-byte id: the 16 bytes a UNIQ_KEY of 32
// upper-case hex digits (the form producers make) spells, else a 128-bit
// hash of the key (hash/maphash, seeded per process; two keys share an id
// with a probability of about 2^-128 per pair). The maps hold no pointers,
// so the garbage collector does not scan them, and a key costs no
// allocation.
type dedupTable struct {
	window int64 // ms
	now    func() time.Time
	seeds  [2]maphash.Seed
	dups   atomic.Int64 // messages answered as duplicates

	rebuiltFrom    int64 // log offset the rebuild at Open read from
	rebuiltRecords int   // records it read

	mu       sync.Mutex
	cur      dedupGen
	prev     dedupGen
	inflight map[flightKey]flightRef // keys claimed by sends in flight
}

// dedupID is a key's id in the table.
type dedupID [16]byte

// dedupGen is a generation of keys: topic -> key id -> entry.
type dedupGen struct {
	start  int64 // unix ms it became the current generation
	topics map[string]map[dedupID]dedupEntry
	keys   int
}

// dedupEntry is where a remembered message went (32 bytes). Its offset
// message id and UNIQ_KEY are found again when a duplicate needs them.
type dedupEntry struct {
	queueID     int32
	queueOffset int64
	phys        int64
	storeTS     int64 // unix ms
}

// flightKey names a key claimed by a send in flight; flightRef is the
// claim.
type flightKey struct {
	topic string
	id    dedupID
}

type flightRef struct {
	fl  *dedupFlight
	idx int32 // the message's index in fl's send
}

// dedupFlight is one send's claim on its keys.
type dedupFlight struct {
	done   chan struct{} // made by the first send that waits for this one, closed when it lands
	marks  []int32       // per message: markNone, markNew, markDup or an earlier index
	ids    []dedupID     // per message: the id claimed (markNew)
	stores int           // messages to store (markNone and markNew)

	oneMark [1]int32 // backing arrays of a one-message send
	oneID   [1]dedupID
}

func newDedupTable(window time.Duration, now func() time.Time) *dedupTable {
	t := &dedupTable{window: window.Milliseconds(), now: now, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		inflight: map[flightKey]flightRef{}}
	start := now().UnixMilli()
	t.cur, t.prev = newDedupGen(start), newDedupGen(start)
	return t
}

func newDedupGen(start int64) dedupGen {
	return dedupGen{start: start, topics: map[string]map[dedupID]dedupEntry{}}
}

// dedupTopic reports whether sends to topic are de-duplicated: every topic
// a user may send to but a group's retry and dead-letter topics, which
// consumers write copies of one message to (with its UNIQ_KEY) on purpose.
func dedupTopic(topic string) bool { return !isGroupTopic(topic) }

// dedupKey is a key as a send holds it: a property value, or its bytes in
// a record.
type dedupKey interface{ string | []byte }

// id returns k's id: the bytes of 32 upper-case hex digits, else a hash.
func id[K dedupKey](t *dedupTable, k K) dedupID {
	var d dedupID
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
func decodeUpperHex[K dedupKey](d *dedupID, k K) bool {
	for i := range d {
		hi, ok1 := upperHexDigit(k[2*i])
		lo, ok2 := upperHexDigit(k[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		d[i] = hi<<4 | lo
	}
	return true
}

func upperHexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// rotate starts a new generation once the current one is a window old,
// dropping the previous one, whose keys were all stored a window ago.
func (t *dedupTable) rotate(now int64) {
	if now-t.cur.start >= t.window {
		t.prev, t.cur = t.cur, newDedupGen(now)
	}
}

// put inserts or replaces an entry of g; a topic's first entry makes its
// map as large as hint's for the topic (the previous generation: in a
// steady flow the map then never grows).
func (g *dedupGen) put(topic string, id dedupID, e dedupEntry, hint *dedupGen) {
	keys := g.topics[topic]
	if keys == nil {
		keys = make(map[dedupID]dedupEntry, len(hint.topics[topic]))
		g.topics[strings.Clone(topic)] = keys
	}
	if _, ok := keys[id]; !ok {
		g.keys++
	}
	keys[id] = e
}

// find returns the entry of id among a topic's keys of the current
// generation, then of the previous one.
func find(cur, prev map[dedupID]dedupEntry, id dedupID) (dedupEntry, bool) {
	if e, ok := cur[id]; ok {
		return e, true
	}
	e, ok := prev[id]
	return e, ok
}

// claimKeys claims the keys of a send to topic (keys[i] is message i's,
// empty for none) and returns the send's flight. A message whose key was
// stored within the window is marked a duplicate and out[i] gets the
// original's queue, offsets and store time. If another send in flight
// holds one of the keys, the claims made so far are undone and claimKeys
// waits for that send to land, then starts over (holding no claim while
// it waits, so sends never wait in a cycle); it gives up when ctx ends.
func claimKeys[K dedupKey](ctx context.Context, t *dedupTable, topic string, keys []K, out []SendResult) (*dedupFlight, error) {
	fl := &dedupFlight{}
	fl.marks, fl.ids = fl.oneMark[:], fl.oneID[:]
	if len(keys) > 1 {
		fl.marks, fl.ids = make([]int32, len(keys)), make([]dedupID, len(keys))
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
func tryClaim[K dedupKey](t *dedupTable, topic string, keys []K, fl *dedupFlight, out []SendResult) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now().UnixMilli()
	t.rotate(now)
	cur, prev := t.cur.topics[topic], t.prev.topics[topic]
	fl.stores = 0
	for i, k := range keys {
		if len(k) == 0 {
			fl.marks[i] = markNone
			fl.stores++
			continue
		}
		kid := id(t, k)
		if ref, ok := t.inflight[flightKey{topic, kid}]; ok {
			if ref.fl == fl { // an earlier message of this send
				fl.marks[i] = ref.idx
				continue
			}
			t.unclaim(topic, fl, i)
			if ref.fl.done == nil {
				ref.fl.done = make(chan struct{})
			}
			return ref.fl.done
		}
		if e, ok := find(cur, prev, kid); ok && now-e.storeTS < t.window {
			fl.marks[i] = markDup
			out[i] = SendResult{Duplicate: true, PutResult: store.PutResult{QueueID: e.queueID,
				QueueOffset: e.queueOffset, PhysicalOffset: e.phys, StoreTimestamp: e.storeTS}}
			continue
		}
		fl.marks[i], fl.ids[i] = markNew, kid
		fl.stores++
		t.inflight[flightKey{topic, kid}] = flightRef{fl: fl, idx: int32(i)}
	}
	return nil
}

// unclaim removes the claims fl made for its first n messages.
func (t *dedupTable) unclaim(topic string, fl *dedupFlight, n int) {
	for i, m := range fl.marks[:n] {
		if m == markNew {
			delete(t.inflight, flightKey{topic, fl.ids[i]})
		}
	}
}

// land records the outcome of fl's send to topic and fills out: res holds
// the results of the messages it stored (those marked markNone and
// markNew, in order), or is empty when it stored nothing (a store puts all
// or nothing). The claimed keys are remembered with their results, or
// released when nothing was stored; sends waiting for fl are woken.
func (t *dedupTable) land(topic string, fl *dedupFlight, res []store.PutResult, out []SendResult) {
	stored := len(res) > 0
	t.mu.Lock()
	defer t.mu.Unlock()
	j := 0
	for i, m := range fl.marks {
		if m != markNone && m != markNew {
			continue
		}
		if stored {
			r := res[j]
			out[i] = SendResult{PutResult: r}
			if m == markNew {
				t.cur.put(topic, fl.ids[i], dedupEntry{queueID: r.QueueID, queueOffset: r.QueueOffset,
					phys: r.PhysicalOffset, storeTS: r.StoreTimestamp}, &t.prev)
			}
		}
		if m == markNew {
			delete(t.inflight, flightKey{topic, fl.ids[i]})
		}
		j++
	}
	for i, m := range fl.marks {
		if m >= 0 && stored {
			out[i] = out[m]
			out[i].Duplicate = true
		}
	}
	if fl.done != nil {
		close(fl.done)
	}
}

// restore remembers a message found in the log at Open, unless its key is
// known already (the first record of a key is the user's send; later ones
// are deliveries of it).
func (t *dedupTable) restore(topic, key []byte, e dedupEntry) bool {
	kid := id(t, key)
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := t.cur.topics[string(topic)]
	if keys == nil {
		keys = map[dedupID]dedupEntry{}
		t.cur.topics[string(topic)] = keys
	}
	if _, ok := keys[kid]; ok {
		return false
	}
	keys[kid] = e
	t.cur.keys++
	return true
}

// size returns how many keys the table holds (expired ones not yet
// dropped included).
func (t *dedupTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur.keys + t.prev.keys
}

// keep returns the messages of batch that fl stores: batch itself when
// none is a duplicate, else a new slice in the same order.
func (fl *dedupFlight) keep(batch []*message.Message) []*message.Message {
	if fl.stores == len(batch) {
		return batch
	}
	out := make([]*message.Message, 0, fl.stores)
	for i, m := range batch {
		if fl.stored(i) {
			out = append(out, m)
		}
	}
	return out
}

// keepRecords returns pieces of chunks holding the records that fl stores,
// in order: chunks itself when none is a duplicate.
func (fl *dedupFlight) keepRecords(chunks [][]byte) [][]byte {
	if fl.stores == len(fl.marks) {
		return chunks
	}
	var out [][]byte
	i := 0
	for _, c := range chunks {
		from := -1 // start of the run of stored records, if any
		for off := 0; off < len(c); i++ {
			size, _, _ := message.RecordSize(c[off:])
			switch {
			case fl.stored(i) && from < 0:
				from = off
			case !fl.stored(i) && from >= 0:
				out = append(out, c[from:off])
				from = -1
			}
			off += int(size)
		}
		if from >= 0 {
			out = append(out, c[from:])
		}
	}
	return out
}

// stored reports whether message i of fl's send is stored.
func (fl *dedupFlight) stored(i int) bool { return fl.marks[i] == markNone || fl.marks[i] == markNew }

// dedupSend runs a user send to topic through the table: it claims the
// messages' keys (keys[i] is message i's, empty for none), stores the
// messages that are not duplicates with put (which picks them with
// fl.keep or fl.keepRecords), and lands the outcome. The results are in
// the order of the messages; a duplicate's is its original's, marked. An
// error with results is indeterminate (see Send); without, nothing was
// stored.
func dedupSend[K dedupKey](ctx context.Context, b *Broker, topic string, keys []K,
	put func(fl *dedupFlight) ([]store.PutResult, error)) ([]SendResult, error) {
	out := make([]SendResult, len(keys))
	fl, err := claimKeys(ctx, b.dedup, topic, keys, out)
	if err != nil {
		return nil, err
	}
	var res []store.PutResult
	if fl.stores > 0 {
		res, err = put(fl)
	}
	b.dedup.land(topic, fl, res, out)
	if fl.stores > 0 && len(res) == 0 {
		return nil, err
	}
	for i, m := range fl.marks {
		if m == markDup {
			completeDuplicate(b, &out[i], keys[i])
		}
	}
	b.dedup.dups.Add(int64(len(keys) - fl.stores))
	return out, err
}

// completeDuplicate fills in the offset message id and the UNIQ_KEY of a
// duplicate's result, that of the record at its physical offset; key, its
// key, stands for a UNIQ_KEY the log no longer has.
func completeDuplicate[K dedupKey](b *Broker, r *SendResult, key K) {
	r.MsgID = message.EncodeOffsetMsgID(b.cfg.StoreAddr(), r.PhysicalOffset)
	if rec, _, err := b.store.CommitLog().ReadRecord(r.PhysicalOffset); err == nil {
		if v, err := message.NewView(rec.B); err == nil {
			if u, ok := v.Property(message.PropUniqKey); ok {
				r.UniqKey = string(u)
			}
		}
		rec.Release()
	}
	if r.UniqKey == "" {
		r.UniqKey = string(key)
	}
}

// sendResults converts the results of a send that was not de-duplicated.
func sendResults(res []store.PutResult) []SendResult {
	if res == nil {
		return nil
	}
	out := make([]SendResult, len(res))
	for i, r := range res {
		out[i].PutResult = r
	}
	return out
}

// messageKey is a message's de-duplication key: its IDEMPOTENCY_KEY, else
// its UNIQ_KEY, else "".
func messageKey(m *message.Message) string {
	if k, ok := m.Properties.Get(message.PropIdempotencyKey); ok && k != "" {
		return k
	}
	return m.UniqKey()
}
