package message_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

var (
	bornV4  = netip.MustParseAddrPort("10.0.0.5:53211")
	storeV4 = netip.MustParseAddrPort("192.168.1.10:10911")
	bornV6  = netip.MustParseAddrPort("[2001:db8::10]:53211")
	storeV6 = netip.MustParseAddrPort("[2001:db8::1]:10911")
)

// sampleMessage returns a message with every field set and a body of
// bodyLen bytes.
func sampleMessage(bodyLen int) *message.Message {
	body := make([]byte, bodyLen)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	return &message.Message{
		QueueID:                   3,
		Flag:                      7,
		QueueOffset:               41,
		PhysicalOffset:            5<<30 + 1234,
		SysFlag:                   message.FlagMultiTags,
		BornTimestamp:             1700000000123,
		BornHost:                  bornV4,
		StoreTimestamp:            1700000000130,
		StoreHost:                 storeV4,
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 99,
		Body:                      body,
		Topic:                     "Orders",
		Properties: message.Properties{
			{Key: message.PropKeys, Value: "k1 k2"},
			{Key: message.PropTags, Value: "TagA"},
			{Key: message.PropUniqKey, Value: "0A0000051F9018B4AAC20012D6870001"},
		},
	}
}

// encode appends m and requires success.
func encode(t testing.TB, m *message.Message, withCRC bool) []byte {
	t.Helper()
	rec, err := message.Append(nil, m, withCRC)
	require.NoError(t, err)
	return rec
}

// expected returns what decoding m's record gives: m with the derived
// fields filled in.
func expected(t testing.TB, m *message.Message, withCRC bool) *message.Message {
	t.Helper()
	rec := encode(t, m, withCRC)
	w := *m
	w.StoreSize = int32(len(rec))
	w.BodyCRC = int32(crc32.ChecksumIEEE(m.Body) & 0x7FFFFFFF)
	w.SysFlag = m.SysFlag &^ (message.FlagBornHostV6 | message.FlagStoreHostV6)
	if w.BornHost.Addr().Is6() {
		w.SysFlag |= message.FlagBornHostV6
	}
	if w.StoreHost.Addr().Is6() {
		w.SysFlag |= message.FlagStoreHostV6
	}
	if !w.BornHost.IsValid() {
		w.BornHost = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	if !w.StoreHost.IsValid() {
		w.StoreHost = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	if len(w.Body) == 0 {
		w.Body = nil
	}
	w.Properties = nil
	for _, kv := range m.Properties {
		if kv.Key != message.PropCRC {
			w.Properties = append(w.Properties, kv)
		}
	}
	if withCRC {
		tail, _, err := message.Decode(rec)
		require.NoError(t, err)
		w.Properties = append(w.Properties, tail.Properties[len(tail.Properties)-1])
	}
	return &w
}

func TestAppendRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *message.Message)
	}{
		{"ipv4 hosts", func(*message.Message) {}},
		{"ipv6 born host", func(m *message.Message) { m.BornHost = bornV6 }},
		{"ipv6 store host", func(m *message.Message) { m.StoreHost = storeV6 }},
		{"ipv6 hosts", func(m *message.Message) { m.BornHost, m.StoreHost = bornV6, storeV6 }},
		{"ipv4-mapped ipv6 host stays ipv6", func(m *message.Message) {
			m.BornHost = netip.MustParseAddrPort("[::ffff:10.0.0.5]:1")
		}},
		{"zero hosts", func(m *message.Message) { m.BornHost, m.StoreHost = netip.AddrPort{}, netip.AddrPort{} }},
		{"stale host flags are replaced", func(m *message.Message) {
			m.SysFlag |= message.FlagBornHostV6 | message.FlagStoreHostV6
		}},
		{"compressed flag", func(m *message.Message) { m.SysFlag = message.FlagCompressed }},
		{"transaction prepared", func(m *message.Message) { m.SysFlag = message.TransactionPrepared }},
		{"empty body", func(m *message.Message) { m.Body = nil }},
		{"empty non-nil body", func(m *message.Message) { m.Body = []byte{} }},
		{"no properties", func(m *message.Message) { m.Properties = nil }},
		{"empty key and value", func(m *message.Message) {
			m.Properties = message.Properties{{Key: "", Value: "v"}, {Key: "k", Value: ""}}
		}},
		{"duplicate keys kept", func(m *message.Message) {
			m.Properties = append(m.Properties, message.Property{Key: message.PropTags, Value: "TagB"})
		}},
		{"stale __CRC32# dropped", func(m *message.Message) {
			m.Properties = append(message.Properties{{Key: message.PropCRC, Value: "0123456789"}}, m.Properties...)
		}},
		{"127-byte topic", func(m *message.Message) { m.Topic = strings.Repeat("t", message.MaxTopicLen) }},
		{"negative fields", func(m *message.Message) {
			m.QueueID, m.Flag, m.QueueOffset, m.PhysicalOffset = -1, -2, -3, -4
			m.BornTimestamp, m.StoreTimestamp, m.ReconsumeTimes, m.PreparedTransactionOffset = -5, -6, -7, -8
		}},
		{"largest properties", func(m *message.Message) {
			m.Properties = message.Properties{{Key: "k", Value: strings.Repeat("v", message.MaxPropertiesLen-3)}}
		}},
		{"largest properties with CRC tail", func(m *message.Message) {
			m.Properties = message.Properties{{Key: "k", Value: strings.Repeat("v", message.MaxPropertiesLen-3-message.CRCTailSize)}}
		}},
	}
	for _, tt := range tests {
		for _, withCRC := range []bool{false, true} {
			t.Run(tt.name+crcSuffix(withCRC), func(t *testing.T) {
				m := sampleMessage(100)
				tt.modify(m)
				if tt.name == "largest properties" && withCRC {
					t.Skip("too large for the CRC tail")
				}
				orig := *m
				size, err := message.EncodedSize(m, withCRC)
				require.NoError(t, err)
				prefix := []byte("prefix")
				out, err := message.Append(bytes.Clone(prefix), m, withCRC)
				require.NoError(t, err)
				assert.Equal(t, orig, *m, "Append must not modify m")
				require.Equal(t, prefix, out[:len(prefix)])
				rec := out[len(prefix):]
				require.Len(t, rec, size)

				assert.Equal(t, withCRC, message.HasCRC(rec))
				require.NoError(t, message.Check(rec, m.PhysicalOffset, withCRC))
				got, n, err := message.Decode(rec)
				require.NoError(t, err)
				assert.Equal(t, size, n)
				assert.Equal(t, expected(t, m, withCRC), got)

				again := encode(t, got, withCRC)
				assert.Equal(t, rec, again, "decode and re-encode must give the same bytes")
			})
		}
	}
}

func crcSuffix(withCRC bool) string {
	if withCRC {
		return " with CRC"
	}
	return ""
}

func TestEncodedSize(t *testing.T) {
	m := sampleMessage(5)
	m.Topic = "T"
	m.Properties = nil
	size, err := message.EncodedSize(m, false)
	require.NoError(t, err)
	assert.Equal(t, 97, size, "§3.1: 5-byte body, topic T, no properties")
	size, err = message.EncodedSize(m, true)
	require.NoError(t, err)
	assert.Equal(t, 97+message.CRCTailSize, size)
	m.BornHost, m.StoreHost = bornV6, storeV6
	size, err = message.EncodedSize(m, false)
	require.NoError(t, err)
	assert.Equal(t, 97+24, size, "each IPv6 host adds 12 bytes")

	empty := &message.Message{Topic: "T"}
	size, err = message.EncodedSize(empty, false)
	require.NoError(t, err)
	assert.Equal(t, message.MinRecordSize+1, size)
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		modify  func(m *message.Message)
		withCRC bool
		want    error
	}{
		{"empty topic", func(m *message.Message) { m.Topic = "" }, false, message.ErrEmptyTopic},
		{"128-byte topic", func(m *message.Message) { m.Topic = strings.Repeat("t", 128) }, false, message.ErrTopicTooLong},
		{"properties too large", func(m *message.Message) {
			m.Properties = message.Properties{{Key: "k", Value: strings.Repeat("v", message.MaxPropertiesLen-2)}}
		}, false, message.ErrPropertiesTooLarge},
		{"properties too large with the CRC tail", func(m *message.Message) {
			m.Properties = message.Properties{{Key: "k", Value: strings.Repeat("v", message.MaxPropertiesLen-3)}}
		}, true, message.ErrPropertiesTooLarge},
		{"0x01 in a value", func(m *message.Message) { m.Properties.Set("k", "a\x01b") }, false, message.ErrInvalidProperty},
		{"0x02 in a key", func(m *message.Message) { m.Properties.Set("k\x02", "v") }, false, message.ErrInvalidProperty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleMessage(10)
			tt.modify(m)
			_, err := message.EncodedSize(m, tt.withCRC)
			require.ErrorIs(t, err, tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "message: "), err.Error())
			dst := []byte("keep")
			out, err := message.Append(dst, m, tt.withCRC)
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, []byte("keep"), out, "dst is returned unchanged")
		})
	}
}

func TestMessageAccessors(t *testing.T) {
	tests := []struct {
		name      string
		props     message.Properties
		tags      string
		keys      []string
		uniq      string
		msgIDUniq bool
	}{
		{"none", nil, "", nil, "", false},
		{"all", message.Properties{{Key: "TAGS", Value: "A"}, {Key: "KEYS", Value: " k1  k2 "}, {Key: "UNIQ_KEY", Value: "U"}},
			"A", []string{"k1", "k2"}, "U", true},
		{"empty uniq key", message.Properties{{Key: "UNIQ_KEY", Value: ""}}, "", nil, "", false},
		{"last duplicate wins", message.Properties{{Key: "TAGS", Value: "A"}, {Key: "TAGS", Value: "B"}}, "B", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &message.Message{StoreHost: storeV4, PhysicalOffset: 1000, Properties: tt.props}
			assert.Equal(t, tt.tags, m.Tags())
			assert.Equal(t, tt.keys, m.Keys())
			assert.Equal(t, tt.uniq, m.UniqKey())
			assert.Equal(t, "C0A8010A00002A9F00000000000003E8", m.OffsetMsgID())
			if tt.msgIDUniq {
				assert.Equal(t, tt.uniq, m.MsgID())
			} else {
				assert.Equal(t, m.OffsetMsgID(), m.MsgID())
			}
		})
	}
}

func TestStampThenSealThenCheck(t *testing.T) {
	for _, hosts := range [][2]netip.AddrPort{{bornV4, storeV4}, {bornV6, storeV4}, {bornV4, storeV6}, {bornV6, storeV6}} {
		t.Run(hosts[0].String()+"/"+hosts[1].String(), func(t *testing.T) {
			m := sampleMessage(200)
			m.BornHost, m.StoreHost = hosts[0], hosts[1]
			m.PhysicalOffset, m.QueueOffset, m.StoreTimestamp = 0, 0, 0
			rec := encode(t, m, true)
			require.NoError(t, message.Check(rec, 0, true))

			message.SetPhysicalOffset(rec, 4096)
			message.SetQueueOffset(rec, 17)
			message.SetStoreTimestamp(rec, 1700000009999)
			message.SetReconsumeTimes(rec, 4)
			message.SetPreparedTransactionOffset(rec, 55)
			err := message.Check(rec, 4096, true)
			require.ErrorIs(t, err, message.ErrInvalidRecord, "the tail is stale until resealed")
			tailSealed := bytes.Clone(rec)
			require.NoError(t, message.SealCRC(rec))
			require.NoError(t, message.Check(rec, 4096, true))
			require.NoError(t, message.SealTail(tailSealed))
			require.Equal(t, rec, tailSealed, "SealTail writes what SealCRC writes")

			got, _, err := message.Decode(rec)
			require.NoError(t, err)
			assert.Equal(t, int64(4096), got.PhysicalOffset)
			assert.Equal(t, int64(17), got.QueueOffset)
			assert.Equal(t, int64(1700000009999), got.StoreTimestamp)
			assert.Equal(t, int32(4), got.ReconsumeTimes)
			assert.Equal(t, int64(55), got.PreparedTransactionOffset)
			assert.Equal(t, hosts[0], got.BornHost)
			assert.Equal(t, hosts[1], got.StoreHost)
			assert.Equal(t, int64(4096), message.PhysicalOffsetOf(rec))
			assert.Equal(t, int64(17), message.QueueOffsetOf(rec))
			assert.Equal(t, int64(1700000009999), message.StoreTimestampOf(rec))
			assert.Equal(t, int32(4), message.ReconsumeTimesOf(rec))

			require.NoError(t, message.Stamp(rec, 8192, 18, 1700000010000))
			require.NoError(t, message.Check(rec, 8192, true))
			assert.Equal(t, int64(18), message.QueueOffsetOf(rec))
			assert.Equal(t, int64(1700000010000), message.StoreTimestampOf(rec))
		})
	}
}

func TestStampWithoutCRC(t *testing.T) {
	rec := encode(t, sampleMessage(10), false)
	require.NoError(t, message.Stamp(rec, 77, 1, 2))
	require.NoError(t, message.Check(rec, 77, false))
	require.ErrorIs(t, message.SealCRC(rec), message.ErrNoCRC)
	require.ErrorIs(t, message.SealCRC(rec[:20]), message.ErrTruncated)
	for name, b := range map[string][]byte{"no tail": rec, "short": rec[:3], "truncated": rec[:len(rec)-1], "empty": nil} {
		require.ErrorIs(t, message.SealTail(b), message.ErrNoCRC, name)
	}
}

func TestBlank(t *testing.T) {
	b := message.AppendBlank([]byte("x"), 4096)
	require.Len(t, b, 1+message.BlankSize)
	size, magic, ok := message.RecordSize(b[1:])
	require.True(t, ok)
	assert.Equal(t, int32(4096), size)
	assert.Equal(t, message.MagicBlank, magic)

	err := message.Check(b[1:], -1, false)
	require.ErrorIs(t, err, message.ErrBlank)
	require.ErrorIs(t, err, message.ErrInvalidRecord)
	_, _, err = message.Decode(b[1:])
	require.ErrorIs(t, err, message.ErrBlank)

	_, _, ok = message.RecordSize(b[1:8])
	assert.False(t, ok)
}

func TestMagicConstants(t *testing.T) {
	assert.Equal(t, int32(-0x255CDF59), message.MagicV1) // 0xDAA320A7
	for want, got := range map[uint32]int32{0xDAA320A7: message.MagicV1, 0xDAA320AB: message.MagicV2, 0xCBD43194: message.MagicBlank} {
		assert.Equal(t, want, uint32(got))
	}
	assert.Equal(t, 20, message.CRCTailSize)
	rec := encode(t, &message.Message{Topic: "T"}, false)
	assert.Len(t, rec, message.MinRecordSize+1)
}

func TestDecodeIntoAliasing(t *testing.T) {
	rec := encode(t, sampleMessage(50), true)
	var m message.Message
	n, err := message.DecodeInto(&m, rec, false)
	require.NoError(t, err)
	require.Equal(t, len(rec), n)
	assert.Len(t, m.Body, 50)
	assert.Equal(t, len(m.Body), cap(m.Body), "aliased body capacity is clipped")
	rec[88] ^= 0xFF
	assert.Equal(t, rec[88], m.Body[0], "copyBody=false aliases the buffer")

	props := m.Properties
	other := encode(t, &message.Message{Topic: "X", Properties: message.Properties{{Key: "A", Value: "1"}}}, false)
	_, err = message.DecodeInto(&m, other, true)
	require.NoError(t, err)
	assert.Equal(t, "X", m.Topic)
	assert.Nil(t, m.Body)
	assert.Equal(t, message.Properties{{Key: "A", Value: "1"}}, m.Properties)
	assert.Same(t, &props[0], &m.Properties[0], "DecodeInto reuses the Properties array")

	before := m
	_, err = message.DecodeInto(&m, other[:40], true)
	require.ErrorIs(t, err, message.ErrTruncated)
	assert.Equal(t, before, m, "m is unchanged on error")

	got, _, err := message.Decode(rec)
	require.NoError(t, err)
	rec[88] ^= 0xFF
	assert.NotEqual(t, rec[88], got.Body[0], "Decode copies the body")
}

func TestDecodeAllStopsAtBadRecord(t *testing.T) {
	var body []byte
	for i := range 3 {
		var err error
		body, err = message.Append(body, sampleMessage(10+i), i == 1)
		require.NoError(t, err)
	}
	msgs, err := message.DecodeAll(body)
	require.NoError(t, err)
	require.Len(t, msgs, 3)

	msgs, err = message.DecodeAll(body[:len(body)-1])
	require.ErrorIs(t, err, message.ErrTruncated)
	assert.Len(t, msgs, 2)
	assert.Contains(t, err.Error(), "record 2 at byte")

	msgs, err = message.DecodeAll(nil)
	require.NoError(t, err)
	assert.Empty(t, msgs)
}

func TestSysFlagConstants(t *testing.T) {
	assert.Equal(t, message.TransactionRollback, message.TransactionMask)
	assert.Equal(t, message.TransactionPrepared|message.TransactionCommit, message.TransactionRollback)
	for _, f := range []int32{message.TransactionNone, message.TransactionPrepared, message.TransactionCommit, message.TransactionRollback} {
		assert.Equal(t, f, (f|message.FlagCompressed|message.FlagBornHostV6)&message.TransactionMask)
	}
	assert.False(t, errors.Is(message.ErrTruncated, message.ErrInvalidRecord), "sentinels are distinct")
}

func TestAppendUnsealed(t *testing.T) {
	m := sampleMessage(100)
	sealed, err := message.Append(nil, m, true)
	require.NoError(t, err)
	rec, err := message.AppendUnsealed(nil, m, "")
	require.NoError(t, err)
	require.Len(t, rec, len(sealed))
	assert.True(t, message.HasCRC(rec))
	assert.Error(t, message.Check(rec, m.PhysicalOffset, true), "not sealed yet")
	require.NoError(t, message.SealCRC(rec))
	assert.Equal(t, sealed, rec)

	// With a UNIQ_KEY: as if it were the last property.
	withID := *m
	withID.Properties = append(append(message.Properties(nil), m.Properties...), message.Property{Key: message.PropUniqKey, Value: "ID-1"})
	want, err := message.Append(nil, &withID, true)
	require.NoError(t, err)
	rec, err = message.AppendUnsealed(nil, m, "ID-1")
	require.NoError(t, err)
	size, err := message.UnsealedSize(m, "ID-1")
	require.NoError(t, err)
	assert.Equal(t, len(rec), size)
	require.NoError(t, message.SealCRC(rec))
	assert.Equal(t, want, rec)
	_, err = message.AppendUnsealed(nil, m, "bad\x01id")
	assert.ErrorIs(t, err, message.ErrInvalidProperty)
	_, err = message.UnsealedSize(m, "bad\x01id")
	assert.ErrorIs(t, err, message.ErrInvalidProperty)
}

func TestSetQueueIDAndStoreHost(t *testing.T) {
	m := sampleMessage(20)
	rec := encode(t, m, true)
	message.SetQueueID(rec, 7)
	other := netip.MustParseAddrPort("10.1.2.3:10911")
	require.True(t, message.SetStoreHost(rec, other))
	require.NoError(t, message.SealCRC(rec))
	got, _, err := message.Decode(rec)
	require.NoError(t, err)
	assert.Equal(t, int32(7), got.QueueID)
	assert.Equal(t, other, got.StoreHost)
	assert.Equal(t, m.Body, got.Body)
	assert.False(t, message.SetStoreHost(rec, netip.MustParseAddrPort("[::1]:10911")), "the field would change size")
}

// DecodeAliasing decodes what Decode decodes, with the topic and property
// strings aliasing the buffer and the properties carved from one slab,
// each message's clipped so that appending to it leaves the next alone.
func TestDecodeAliasing(t *testing.T) {
	a, b, d, c := sampleMessage(10), sampleMessage(0), sampleMessage(5), sampleMessage(300)
	b.Properties = nil
	for i := range 70 { // more than a fresh slab holds
		c.Properties = append(c.Properties, message.Property{Key: fmt.Sprintf("k%d", i), Value: "v"})
	}
	var buf []byte
	for _, m := range []*message.Message{a, b, d, c} {
		buf = append(buf, encode(t, m, m != b)...) // b: no property at all
	}
	var slab message.Properties
	var got [4]message.Message
	for i, off := 0, 0; i < len(got); i++ {
		want, n, err := message.Decode(buf[off:])
		require.NoError(t, err)
		ns, err := message.DecodeAliasing(&got[i], buf[off:], &slab)
		require.NoError(t, err)
		require.Equal(t, n, ns)
		assert.Equal(t, want, &got[i], "message %d", i)
		off += n
	}
	assert.Nil(t, got[1].Properties, "no properties: nil, as Decode gives")
	at := uintptr(unsafe.Pointer(unsafe.StringData(got[0].Topic))) - uintptr(unsafe.Pointer(&buf[0]))
	assert.Less(t, at, uintptr(len(buf)), "the topic aliases the buffer")
	p0 := got[0].Properties
	require.Equal(t, len(p0), cap(p0), "clipped")
	next := unsafe.Add(unsafe.Pointer(&p0[0]), uintptr(len(p0))*unsafe.Sizeof(p0[0]))
	require.Equal(t, next, unsafe.Pointer(&got[2].Properties[0]), "the next message's properties follow in the slab")
	before := slices.Clone(got[2].Properties)
	_ = append(p0, message.Property{Key: "x", Value: "y"})
	assert.Equal(t, before, got[2].Properties, "appending to one message's properties leaves the others alone")
}
