package message

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// UniqIDGenerator makes client message ids (UNIQ_KEY, §3.5): 16 bytes as 32
// uppercase hex characters,
//
//	IP (4) | pid (2) | instance (4) | ms since the start of the month (4) | counter (2)
//
// in Java's layout. Create one with NewUniqIDGenerator; it is safe for
// concurrent use and takes no lock.
//
// Uniqueness. The last 6 bytes come from one 64-bit atomic state, Unix ms
// << 16 | counter, that every id moves strictly forward with a
// compare-and-swap. The counter goes up by one with every id, wrapping at
// 65536 like Java's; the ms follows the clock. When the counter wraps within
// one ms it carries into the ms, so the time field runs a moment ahead of
// the clock instead of repeating, and a clock that steps back is ignored the
// same way. One generator therefore never repeats an id within a month; ids
// a month or more apart could meet only with the same time of month and the
// same counter, as in Java, since the time field restarts each month.
// Generators in one process get distinct instance fields (a random 32-bit
// value drawn at start-up plus a per-generator sequence number), and
// processes on one host differ in pid (low 16 bits) and their random value.
type UniqIDGenerator struct {
	prefix [20]byte      // uppercase hex of IP, pid and instance
	state  atomic.Uint64 // Unix ms << 16 | counter of the last id
}

var (
	processInstance = rand.Uint32() // random per process
	generatorSeq    atomic.Uint32
	month           atomic.Pointer[monthWindow]
	defaultGen      = sync.OnceValue(func() *UniqIDGenerator { return NewUniqIDGenerator(defaultIP()) })
)

// monthWindow is a calendar month in local time, in Unix ms [start, end).
type monthWindow struct{ start, end int64 }

// NewUniqIDGenerator returns a generator for ids carrying ip. An IPv6
// address (not IPv4-mapped) is folded to 4 bytes by XOR of its four 32-bit
// words; an invalid one counts as 127.0.0.1.
func NewUniqIDGenerator(ip netip.Addr) *UniqIDGenerator {
	var raw [10]byte
	ip4 := ipv4Bytes(ip)
	copy(raw[:4], ip4[:])
	binary.BigEndian.PutUint16(raw[4:], uint16(os.Getpid()))
	binary.BigEndian.PutUint32(raw[6:], processInstance+generatorSeq.Add(1)-1)
	g := &UniqIDGenerator{}
	appendUpperHex(g.prefix[:0], raw[:])
	return g
}

func ipv4Bytes(ip netip.Addr) [4]byte {
	switch {
	case !ip.IsValid():
		return [4]byte{127, 0, 0, 1}
	case ip.Is4() || ip.Is4In6():
		return ip.Unmap().As4()
	}
	b := ip.As16()
	var out [4]byte
	for i, c := range b {
		out[i%4] ^= c
	}
	return out
}

// Next returns a new id.
func (g *UniqIDGenerator) Next() string {
	return g.NextAt(time.Now().UnixMilli())
}

// NextAt returns a new id for a message made at nowMS (Unix ms, usually
// the message's born timestamp, read once for both): the id's time part is
// nowMS, or later if the generator already went past it, and the ids stay
// unique however nowMS moves.
func (g *UniqIDGenerator) NextAt(nowMS int64) string {
	var buf [32]byte
	return string(g.appendAt(buf[:0], nowMS))
}

// AppendNext appends a new id (32 characters) to dst. It does not allocate
// when dst has 32 bytes to spare, except once a month.
func (g *UniqIDGenerator) AppendNext(dst []byte) []byte {
	return g.appendAt(dst, time.Now().UnixMilli())
}

func (g *UniqIDGenerator) appendAt(dst []byte, nowMS int64) []byte {
	s := g.advance(nowMS)
	ms := int64(s >> 16)
	var tail [6]byte
	binary.BigEndian.PutUint32(tail[:], uint32(ms-monthOf(ms).start))
	binary.BigEndian.PutUint16(tail[4:], uint16(s))
	dst = append(dst, g.prefix[:]...)
	return appendUpperHex(dst, tail[:])
}

// advance moves the state forward, to nowMS if that is ahead, and returns
// the new one.
func (g *UniqIDGenerator) advance(nowMS int64) uint64 {
	now := uint64(max(nowMS, 0)) << 16
	for {
		old := g.state.Load()
		next := old + 1
		// The clock moved on: take its ms and keep the counter. This is
		// larger than old+1 exactly when the clock is ahead of old's ms.
		next = max(next, now|next&0xFFFF)
		if g.state.CompareAndSwap(old, next) {
			return next
		}
	}
}

// monthOf returns the local calendar month holding the Unix ms.
func monthOf(ms int64) *monthWindow {
	if w := month.Load(); w != nil && w.start <= ms && ms < w.end {
		return w
	}
	t := time.UnixMilli(ms)
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
	w := &monthWindow{start: start.UnixMilli(), end: start.AddDate(0, 1, 0).UnixMilli()}
	month.Store(w)
	return w
}

// NewUniqID returns an id from the process's default generator, whose IP
// is the host's first non-loopback IPv4 address, or 127.0.0.1.
func NewUniqID() string {
	return defaultGen().Next()
}

// NewUniqIDAt is NewUniqID for a message made at nowMS (see NextAt).
func NewUniqIDAt(nowMS int64) string {
	return defaultGen().NextAt(nowMS)
}

func defaultIP() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok {
			ip = ip.Unmap()
			if ip.Is4() && !ip.IsLoopback() && !ip.IsUnspecified() {
				return ip
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}
