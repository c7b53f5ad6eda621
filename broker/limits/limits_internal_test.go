package limits

import (
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/message"
)

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  Policy
		bad   []string // keys named in the error, in order
	}{
		{name: "none", attrs: nil},
		{name: "others only", attrs: map[string]string{"priority.lanes": "3", "queue.type": "SimpleCQ"}},
		{name: "hours", attrs: map[string]string{AttrRetentionHours: "72"}, want: Policy{Retention: 72 * time.Hour}},
		{name: "ms", attrs: map[string]string{AttrRetentionMs: "90000"}, want: Policy{Retention: 90 * time.Second}},
		{name: "leading zeros", attrs: map[string]string{AttrRetentionMs: "0090"}, want: Policy{Retention: 90 * time.Millisecond}},
		{name: "backlog", attrs: map[string]string{AttrMaxBacklog: "10000"}, want: Policy{MaxBacklog: 10000}},
		{name: "refuse", attrs: map[string]string{AttrMaxBacklog: "5", AttrBacklogPolicy: "refuse"}, want: Policy{MaxBacklog: 5, Refuse: true}},
		{name: "ttl", attrs: map[string]string{AttrDefaultTTL: "60000"}, want: Policy{DefaultTTL: time.Minute}},
		{name: "100 years", attrs: map[string]string{AttrRetentionHours: "876000"}, want: Policy{Retention: MaxSpan}},
		{name: "past 100 years", attrs: map[string]string{AttrRetentionHours: "876001"}, bad: []string{AttrRetentionHours}},
		{name: "plus sign", attrs: map[string]string{AttrMaxBacklog: "+5"}, bad: []string{AttrMaxBacklog}},
		{name: "spaces", attrs: map[string]string{AttrDefaultTTL: " 5"}, bad: []string{AttrDefaultTTL}},
		{name: "policy case", attrs: map[string]string{AttrMaxBacklog: "5", AttrBacklogPolicy: "REFUSE"}, want: Policy{MaxBacklog: 5},
			bad: []string{AttrBacklogPolicy}},
		{name: "several bad, good kept", attrs: map[string]string{AttrRetentionHours: "x", AttrDefaultTTL: "0", AttrMaxBacklog: "7", "ttl.x": "1"},
			want: Policy{MaxBacklog: 7}, bad: []string{AttrRetentionHours, AttrDefaultTTL, "ttl.x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(tc.attrs)
			assert.Equal(t, tc.want, p)
			if len(tc.bad) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, brokererr.ErrInvalidArgument)
			var keys []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ae *AttrError
				require.True(t, errors.As(e, &ae))
				keys = append(keys, ae.Key)
			}
			assert.Equal(t, tc.bad, keys)
		})
	}
}

func TestRangeSet(t *testing.T) {
	var r rangeSet
	for _, o := range []int64{5, 7, 6, 1, 2, 9, 7} {
		r.add(o)
	}
	assert.Equal(t, rangeSet{{1, 3}, {5, 8}, {9, 10}}, r)
	assert.True(t, r.valid())
	for o, want := range map[int64]bool{0: false, 1: true, 3: false, 7: true, 8: false, 9: true, 10: false} {
		assert.Equal(t, want, r.has(o), "%d", o)
	}
	r.dropBelow(6)
	assert.Equal(t, rangeSet{{6, 8}, {9, 10}}, r)
	r.dropBelow(20)
	assert.Empty(t, r)

	r = nil
	for o := range int64(maxRanges + 10) {
		r.add(o * 2) // every other offset: a range each
	}
	assert.Len(t, r, maxRanges)
	assert.True(t, r.valid())
	assert.True(t, r.has(1), "the lowest ranges merged")
	assert.True(t, r.has(2*(maxRanges+9)))
}

func TestStateRoundTrip(t *testing.T) {
	in := map[string]map[int32]queueDoc{
		"Orders": {0: {Start: 12, Counted: rangeSet{{12, 14}, {20, 21}}, Expired: 3, Dropped: 12}, 3: {Start: 1}},
	}
	data, err := encodeState(in)
	require.NoError(t, err)
	out, err := decodeState(data)
	require.NoError(t, err)
	assert.Equal(t, in, out)

	for _, bad := range []string{
		`{"topics": {"Orders": {"x": {"start": 1}}}}`,
		`{"topics": {"Orders": {"-1": {"start": 1}}}}`,
		`{"topics": {"Orders": {"0": {"start": -1}}}}`,
		`{"topics": {"Orders": {"0": {"counted": [[5, 3]]}}}}`,
		`{"topics": {"Orders": {"0": {"counted": [[1, 3], [2, 4]]}}}}`,
		`{"topics": {"bad topic": {}}}`,
		`{"topics": {}, "other": 1}`,
		`[]`,
	} {
		_, err := decodeState([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// sealed returns a record of m as the store holds it.
func sealed(t testing.TB, m *message.Message) []byte {
	b, err := message.Append(nil, m, true)
	require.NoError(t, err)
	return b
}

func TestRecordExpiry(t *testing.T) {
	m := &message.Message{Topic: "%RETRY%G", Body: []byte("x"), BornTimestamp: 1000, StoreTimestamp: 5000,
		Properties: message.Properties{{Key: PropTTL, Value: "250"}, {Key: message.PropRetryTopic, Value: "Orders"}}}
	rec := sealed(t, m)
	ttl, origin, ok := recordTTL(rec, true)
	require.True(t, ok)
	assert.Equal(t, 250*time.Millisecond, ttl)
	assert.Equal(t, "Orders", string(origin))
	assert.Equal(t, int64(1250), expiresAt(rec, ttl), "counted from the born time, earlier than the store time")

	m.BornTimestamp = 9000 // a producer clock ahead: the store time bounds it
	assert.Equal(t, int64(5250), expiresAt(sealed(t, m), ttl))
	m.BornTimestamp = 0
	assert.Equal(t, int64(5250), expiresAt(sealed(t, m), ttl))

	m.Properties = message.Properties{{Key: PropTTL, Value: "soon"}}
	ttl, _, ok = recordTTL(sealed(t, m), false)
	assert.True(t, ok)
	assert.Zero(t, ttl, "a malformed stored TTL never expires its message")
	m.Properties = message.Properties{{Key: "TTL", Value: "3"}}
	ttl, _, _ = recordTTL(sealed(t, m), false)
	assert.Zero(t, ttl, "RocketMQ's request-reply TTL is not read")
	assert.Zero(t, expiresAt(sealed(t, m), 0))
}

// FuzzRecordTTL: reading the TTL of a record a producer sent never
// panics, and a TTL read is one ParseTTL accepts.
func FuzzRecordTTL(f *testing.F) {
	m := &message.Message{Topic: "T", Body: []byte("x"), BornTimestamp: 1, StoreTimestamp: 2,
		Properties: message.Properties{{Key: PropTTL, Value: "1000"}, {Key: message.PropRetryTopic, Value: "Orders"}}}
	f.Add(sealed(f, m), true)
	m.Properties = message.Properties{{Key: PropTTL, Value: "99999999999999999999"}}
	f.Add(sealed(f, m), false)
	f.Add([]byte("TTL_MS\x01"), false)
	f.Fuzz(func(t *testing.T, rec []byte, wantOrigin bool) {
		ttl, _, ok := recordTTL(rec, wantOrigin)
		if !ok || ttl == 0 {
			return
		}
		require.True(t, ttl > 0 && ttl <= MaxSpan, "%s", ttl)
		again, err := ParseTTL([]byte(strconv.FormatInt(ttl.Milliseconds(), 10)))
		require.NoError(t, err)
		require.Equal(t, ttl, again)
		_ = expiresAt(rec, ttl)
	})
}

// FuzzParsePolicy: topic attributes from an updateTopic never panic the
// parser, and an accepted policy written back as attributes parses to
// itself.
func FuzzParsePolicy(f *testing.F) {
	f.Add(AttrRetentionHours, "2", AttrMaxBacklog, "10", AttrBacklogPolicy, "refuse")
	f.Add(AttrRetentionMs, "1", AttrDefaultTTL, "0", "ttl.x", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		attrs := map[string]string{k1: v1, k2: v2, k3: v3}
		p, err := ParsePolicy(attrs)
		if err != nil {
			require.ErrorIs(t, err, brokererr.ErrInvalidArgument)
			return
		}
		back := map[string]string{}
		if p.Retention > 0 {
			back[AttrRetentionMs] = strconv.FormatInt(p.Retention.Milliseconds(), 10)
		}
		if p.MaxBacklog > 0 {
			back[AttrMaxBacklog] = strconv.FormatInt(p.MaxBacklog, 10)
			back[AttrBacklogPolicy] = p.BacklogPolicy()
		}
		if p.DefaultTTL > 0 {
			back[AttrDefaultTTL] = strconv.FormatInt(p.DefaultTTL.Milliseconds(), 10)
		}
		p2, err := ParsePolicy(back)
		require.NoError(t, err, "%v", back)
		require.Equal(t, p, p2)
	})
}

// FuzzDecodeState: the state file never panics its decoder, and what it
// accepts encodes back to itself.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"topics": {"Orders": {"0": {"start": 12, "counted": [[12, 14]], "expired": 3, "dropped": 12}}}}`))
	f.Add([]byte(`{"topics": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		b, err := encodeState(st)
		require.NoError(t, err)
		st2, err := decodeState(b)
		require.NoError(t, err)
		require.True(t, maps.EqualFunc(st, st2, func(a, b map[int32]queueDoc) bool {
			return maps.EqualFunc(a, b, func(x, y queueDoc) bool {
				return x.Start == y.Start && x.Expired == y.Expired && x.Dropped == y.Dropped && len(x.Counted) == len(y.Counted)
			})
		}))
	})
}
