package message_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// Offsets in a record with IPv4 hosts.
const (
	v4BodyLenOff = 84
	v4BodyOff    = 88
)

func put32(rec []byte, off int, v int32) { binary.BigEndian.PutUint32(rec[off:], uint32(v)) }

// toV2 rewrites a V1 record with IPv4 hosts as V2 (2-byte topic length),
// resealing its __CRC32# tail if it has one.
func toV2(t testing.TB, rec []byte) []byte {
	t.Helper()
	topicLenOff := v4BodyOff + int(binary.BigEndian.Uint32(rec[v4BodyLenOff:]))
	v2 := append(bytes.Clone(rec[:topicLenOff]), 0)
	v2 = append(v2, rec[topicLenOff:]...)
	put32(v2, 0, int32(len(v2)))
	put32(v2, 4, message.MagicV2)
	if message.HasCRC(v2) {
		require.NoError(t, message.SealCRC(v2))
	}
	return v2
}

func TestCheckErrors(t *testing.T) {
	const physOff = 5<<30 + 1234 // sampleMessage's
	tests := []struct {
		name       string
		mutate     func(rec []byte) []byte
		physOff    int64
		requireCRC bool
		field      string
		kind       error // ErrTruncated, ErrBlank or nil
		reason     string
		decodes    bool // a checksum problem: Decode does not see it
	}{
		{name: "under 8 bytes", mutate: func(r []byte) []byte { return r[:7] }, field: "TOTALSIZE", kind: message.ErrTruncated},
		{name: "TOTALSIZE beyond the buffer", mutate: func(r []byte) []byte { return r[:len(r)-1] }, field: "TOTALSIZE", kind: message.ErrTruncated},
		{name: "TOTALSIZE below the minimum", mutate: func(r []byte) []byte { put32(r, 0, 90); return r }, field: "TOTALSIZE"},
		{name: "negative TOTALSIZE", mutate: func(r []byte) []byte { put32(r, 0, -1); return r }, field: "TOTALSIZE"},
		{name: "TOTALSIZE too small for the lengths", mutate: func(r []byte) []byte { put32(r, 0, int32(len(r)-1)); return r }, field: "PROPERTIESLEN",
			reason: "PROPERTIESLEN"},
		{name: "bad magic", mutate: func(r []byte) []byte { put32(r, 4, 0x12345678); return r }, field: "MAGICCODE", reason: "0x12345678 is not a record magic code"},
		{name: "blank filler", mutate: func(r []byte) []byte { return message.AppendBlank(nil, 1000) }, field: "MAGICCODE", kind: message.ErrBlank},
		{name: "negative BODYLEN", mutate: func(r []byte) []byte { put32(r, v4BodyLenOff, -1); return r }, field: "BODYLEN"},
		{name: "BODYLEN past TOTALSIZE", mutate: func(r []byte) []byte { put32(r, v4BodyLenOff, 1<<30); return r }, field: "BODYLEN"},
		{name: "BODYLEN one short", mutate: func(r []byte) []byte { put32(r, v4BodyLenOff, 99); return r }, field: "TOPICLEN"},
		{name: "V1 TOPICLEN over 127", mutate: func(r []byte) []byte { r[v4BodyOff+100] = 200; return r }, field: "TOPICLEN"},
		{name: "IPv6 born flag on IPv4 hosts", mutate: func(r []byte) []byte { put32(r, 36, message.FlagBornHostV6); return r }, field: "BODYLEN"},
		{name: "born port out of range", mutate: func(r []byte) []byte { put32(r, 52, 70000); return r }, field: "BORNHOST", reason: "port 70000 out of range"},
		{name: "store port negative", mutate: func(r []byte) []byte { put32(r, 68, -1); return r }, field: "STOREHOST"},
		{name: "body CRC", mutate: func(r []byte) []byte { r[v4BodyOff] ^= 1; return r }, field: "BODYCRC",
			reason: "body CRC mismatch: stored 0x", decodes: true},
		{name: "physical offset", physOff: 456, field: "PHYSICALOFFSET", reason: "physical offset 5368710354 != position 456", decodes: true},
		{name: "record CRC", mutate: func(r []byte) []byte { r[13] ^= 1; return r }, field: "__CRC32#", reason: "record CRC mismatch", decodes: true},
		{name: "CRC digit", mutate: func(r []byte) []byte { r[len(r)-2]++; return r }, field: "__CRC32#", reason: "record CRC mismatch", decodes: true},
		{name: "CRC required but absent", mutate: func(r []byte) []byte {
			return encode(t, sampleMessage(100), false)
		}, requireCRC: true, field: "__CRC32#", reason: "no __CRC32# tail", decodes: true},
		{name: "CRC required, tail key damaged", mutate: func(r []byte) []byte { r[len(r)-15] = 'X'; return r },
			requireCRC: true, field: "__CRC32#", reason: "no __CRC32# tail", decodes: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := encode(t, sampleMessage(100), true)
			require.NoError(t, message.Check(rec, physOff, true))
			if tt.mutate != nil {
				rec = tt.mutate(rec)
			}
			off := int64(physOff)
			if tt.physOff != 0 {
				off = tt.physOff
			}
			err := message.Check(rec, off, tt.requireCRC)
			require.ErrorIs(t, err, message.ErrInvalidRecord)
			var ce *message.CheckError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.field, ce.Field, err.Error())
			assert.Contains(t, err.Error(), tt.reason)
			assert.Contains(t, err.Error(), "message: invalid record: ")
			for _, kind := range []error{message.ErrTruncated, message.ErrBlank} {
				assert.Equal(t, kind == tt.kind, errors.Is(err, kind), "errors.Is %v", kind)
			}

			_, _, derr := message.Decode(rec)
			if tt.decodes {
				assert.NoError(t, derr)
			} else {
				assert.Equal(t, err, derr, "Decode reports the same structural error")
			}
		})
	}
}

func TestCheckAcceptsLongerBuffer(t *testing.T) {
	rec := encode(t, sampleMessage(10), true)
	buf := append(bytes.Clone(rec), message.AppendBlank(nil, 100)...)
	require.NoError(t, message.Check(buf, -1, true))
	require.True(t, message.HasCRC(buf))
	require.NoError(t, message.SealCRC(buf))
	assert.Equal(t, rec, buf[:len(rec)])
	m, n, err := message.Decode(buf)
	require.NoError(t, err)
	assert.Equal(t, len(rec), n)
	assert.Equal(t, "Orders", m.Topic)
}

func TestCheckEveryBitFlip(t *testing.T) {
	for _, hosts := range []string{"ipv4", "ipv6"} {
		t.Run(hosts, func(t *testing.T) {
			m := sampleMessage(64)
			if hosts == "ipv6" {
				m.BornHost, m.StoreHost = bornV6, storeV6
			}
			m.PhysicalOffset = 4096
			rec := encode(t, m, true)
			require.Greater(t, len(rec), 180)
			require.NoError(t, message.Check(rec, 4096, true))
			flipped := make([]byte, len(rec))
			for bit := range 8 * len(rec) {
				copy(flipped, rec)
				flipped[bit/8] ^= 1 << (bit % 8)
				err := message.Check(flipped, 4096, true)
				require.ErrorIs(t, err, message.ErrInvalidRecord, "flip of bit %d (byte %d) not detected", bit%8, bit/8)
			}
		})
	}
}

func TestCheckEveryTruncation(t *testing.T) {
	rec := encode(t, sampleMessage(30), true)
	for n := range len(rec) {
		err := message.Check(rec[:n], -1, false)
		require.ErrorIs(t, err, message.ErrTruncated, "cut at %d", n)
		_, _, err = message.Decode(rec[:n])
		require.ErrorIs(t, err, message.ErrTruncated, "cut at %d", n)
		assert.False(t, message.HasCRC(rec[:n]))
	}
}

func TestV2Accepted(t *testing.T) {
	for _, withCRC := range []bool{false, true} {
		t.Run(crcSuffix(withCRC), func(t *testing.T) {
			m := sampleMessage(100)
			v1 := encode(t, m, withCRC)
			v2 := toV2(t, v1)
			require.Len(t, v2, len(v1)+1)
			require.NoError(t, message.Check(v2, m.PhysicalOffset, withCRC))
			assert.Equal(t, withCRC, message.HasCRC(v2))
			_, magic, _ := message.RecordSize(v2)
			assert.Equal(t, message.MagicV2, magic)

			got, n, err := message.Decode(v2)
			require.NoError(t, err)
			assert.Equal(t, len(v2), n)
			want, _, err := message.Decode(v1)
			require.NoError(t, err)
			want.StoreSize++
			if withCRC { // the tail's digits differ
				want.Properties = want.Properties[:len(want.Properties)-1]
				got.Properties = got.Properties[:len(got.Properties)-1]
			}
			assert.Equal(t, want, got)

			// Re-encoding writes V1.
			again := encode(t, got, withCRC)
			_, magic, _ = message.RecordSize(again)
			assert.Equal(t, message.MagicV1, magic)
			assert.Equal(t, v1, again)
		})
	}
}

func TestV2LongTopic(t *testing.T) {
	m := sampleMessage(1)
	m.Topic = "T"
	rec := toV2(t, encode(t, m, false))
	// Grow the topic to 200 bytes: TOPICLEN is at 88+1, the topic at 91.
	topic := bytes.Repeat([]byte("x"), 200)
	long := append(bytes.Clone(rec[:v4BodyOff+1]), 0, 200)
	long = append(long, topic...)
	long = append(long, rec[v4BodyOff+1+2+1:]...)
	put32(long, 0, int32(len(long)))
	require.NoError(t, message.Check(long, -1, false))
	got, _, err := message.Decode(long)
	require.NoError(t, err)
	assert.Equal(t, string(topic), got.Topic)
	_, err = message.Append(nil, got, false)
	require.ErrorIs(t, err, message.ErrTopicTooLong, "V1 cannot carry it")
}

// TestCRCTailIsJavas checks the tail against Java's rule, written out:
// UtilAll.crc32 (CRC-32/IEEE & 0x7FFFFFFF) of every byte before the tail,
// as ten digits least significant first. The body is chosen so that the
// unmasked CRC has its top bit set.
func TestCRCTailIsJavas(t *testing.T) {
	m := sampleMessage(16)
	var rec []byte
	for i := range 1000 {
		m.Body[0] = byte(i)
		m.Body[1] = byte(i >> 8)
		rec = encode(t, m, true)
		if crc32.ChecksumIEEE(rec[:len(rec)-message.CRCTailSize]) >= 1<<31 {
			break
		}
	}
	full := crc32.ChecksumIEEE(rec[:len(rec)-message.CRCTailSize])
	require.GreaterOrEqual(t, full, uint32(1<<31))
	tail := string(rec[len(rec)-message.CRCTailSize:])
	require.True(t, strings.HasPrefix(tail, "__CRC32#\x01") && strings.HasSuffix(tail, "\x02"), "%q", tail)
	digits := []byte(tail[9:19])
	slices.Reverse(digits)
	v, err := strconv.ParseUint(string(digits), 10, 32)
	require.NoError(t, err)
	assert.Equal(t, uint64(full&0x7FFFFFFF), v)

	got, _, err := message.Decode(rec)
	require.NoError(t, err)
	crcValue, ok := got.Properties.Get(message.PropCRC)
	assert.True(t, ok, "Decode keeps the tail as a property")
	assert.Equal(t, tail[9:19], crcValue)
}
