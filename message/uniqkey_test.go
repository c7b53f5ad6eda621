package message_test

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// uniqFields splits an id into its IP, pid, instance, time and counter.
func uniqFields(t *testing.T, id string) (ip [4]byte, pid uint16, instance, ms uint32, counter uint16) {
	t.Helper()
	require.Len(t, id, 32)
	require.Equal(t, strings.ToUpper(id), id, "uppercase")
	b, err := hex.DecodeString(id)
	require.NoError(t, err)
	copy(ip[:], b)
	return ip, binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint32(b[6:]),
		binary.BigEndian.Uint32(b[10:]), binary.BigEndian.Uint16(b[14:])
}

func monthStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
}

func TestUniqIDLayout(t *testing.T) {
	tests := []struct {
		name string
		ip   netip.Addr
		want [4]byte
	}{
		{"ipv4", netip.MustParseAddr("10.0.0.5"), [4]byte{10, 0, 0, 5}},
		{"ipv4-mapped", netip.MustParseAddr("::ffff:10.0.0.5"), [4]byte{10, 0, 0, 5}},
		{"invalid", netip.Addr{}, [4]byte{127, 0, 0, 1}},
		{"ipv6 folded", netip.MustParseAddr("2001:db8::1"), [4]byte{0x20, 0x01, 0x0d, 0xb8 ^ 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			id := message.NewUniqIDGenerator(tt.ip).Next()
			ip, pid, _, ms, _ := uniqFields(t, id)
			assert.Equal(t, tt.want, ip)
			assert.Equal(t, uint16(os.Getpid()), pid)
			sinceMonth := before.Sub(monthStart(before)).Milliseconds()
			assert.InDelta(t, sinceMonth, int64(ms), 5000, "ms since the start of the month")
		})
	}
}

func TestUniqIDGeneratorsDiffer(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.5")
	_, _, i1, _, _ := uniqFields(t, message.NewUniqIDGenerator(ip).Next())
	_, _, i2, _, _ := uniqFields(t, message.NewUniqIDGenerator(ip).Next())
	assert.NotEqual(t, i1, i2, "each generator gets its own instance field")
}

func TestUniqIDCounterWrapsWithinOneMillisecond(t *testing.T) {
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	// A state far ahead of the clock: every id below is taken "within one ms"
	// as far as the clock is concerned.
	future := time.Now().Add(time.Hour)
	base := future.UnixMilli()
	g.SetStateForTest(base, 0xFFFE)
	seen := map[string]bool{}
	var prevMS uint32
	var prevCounter uint16
	for i := range 70000 {
		id := g.Next()
		require.False(t, seen[id], "duplicate %s at %d", id, i)
		seen[id] = true
		_, _, _, ms, counter := uniqFields(t, id)
		if i > 0 {
			assert.Equal(t, prevCounter+1, counter)
			if counter == 0 {
				assert.Equal(t, prevMS+1, ms, "a wrapped counter carries into the time field")
			} else {
				assert.Equal(t, prevMS, ms)
			}
		}
		prevMS, prevCounter = ms, counter
	}
	want := uint32(base + 2 - monthStart(future).UnixMilli())
	assert.Equal(t, want, prevMS, "two carries")
}

func TestUniqIDClockBackwards(t *testing.T) {
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	ahead := time.Now().Add(10 * time.Minute)
	g.SetStateForTest(ahead.UnixMilli(), 5)
	_, _, _, ms, counter := uniqFields(t, g.Next())
	assert.Equal(t, uint32(ahead.Sub(monthStart(ahead)).Milliseconds()), ms)
	assert.Equal(t, uint16(6), counter)
}

func TestUniqIDCounterKeepsCountingAcrossMilliseconds(t *testing.T) {
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	past := time.Now().Add(-time.Second)
	g.SetStateForTest(past.UnixMilli(), 41)
	before := time.Now()
	_, _, _, ms, counter := uniqFields(t, g.Next())
	assert.Equal(t, uint16(42), counter, "the counter is not reset when the ms changes")
	assert.InDelta(t, before.Sub(monthStart(before)).Milliseconds(), int64(ms), 1000, "the time field follows the clock")

	g.SetStateForTest(past.UnixMilli(), 0xFFFF)
	_, _, _, _, counter = uniqFields(t, g.Next())
	assert.Equal(t, uint16(0), counter, "the counter wraps")
}

func TestUniqIDNextAtTakesTheGivenTime(t *testing.T) {
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	now := time.Now()
	g.SetStateForTest(now.Add(-time.Second).UnixMilli(), 7)
	at := now.Add(time.Minute) // a born timestamp ahead of the last id
	_, _, _, ms, counter := uniqFields(t, g.NextAt(at.UnixMilli()))
	assert.Equal(t, uint32(at.Sub(monthStart(at)).Milliseconds()), ms, "the id's time is the one given")
	assert.Equal(t, uint16(8), counter)

	// A time behind the last id (another goroutine's batch, or a clock
	// step back) does not take the generator back: ids stay unique.
	seen := map[string]bool{}
	for i := range 1000 {
		id := g.NextAt(now.Add(-time.Duration(i) * time.Millisecond).UnixMilli())
		require.False(t, seen[id], "duplicate %s", id)
		seen[id] = true
		_, _, _, got, _ := uniqFields(t, id)
		assert.Equal(t, ms, got, "the time stays at the latest one given")
	}
}

func TestUniqIDUniqueAcrossGoroutines(t *testing.T) {
	const goroutines, perG = 8, 100_000
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	results := make([][]string, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			ids := make([]string, perG)
			for j := range ids {
				ids[j] = g.Next()
			}
			results[i] = ids
		})
	}
	wg.Wait()
	seen := make(map[string]struct{}, goroutines*perG)
	for _, ids := range results {
		for _, id := range ids {
			seen[id] = struct{}{}
		}
	}
	assert.Len(t, seen, goroutines*perG)
}

func TestNewUniqID(t *testing.T) {
	a, b := message.NewUniqID(), message.NewUniqID()
	assert.NotEqual(t, a, b)
	_, pid, _, _, _ := uniqFields(t, a)
	assert.Equal(t, uint16(os.Getpid()), pid)
	buf := message.NewUniqIDGenerator(netip.Addr{}).AppendNext([]byte("x"))
	assert.Len(t, buf, 33)
	assert.True(t, strings.HasPrefix(string(buf), "x7F000001"), fmt.Sprint(string(buf)))
}
