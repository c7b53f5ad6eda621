package message_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// seedRecords returns the golden records plus Gantry's own: CRC-sealed,
// IPv6, V2 and a filler.
func seedRecords(f *testing.F) [][]byte {
	f.Helper()
	seeds := goldenRecords(f)
	seeds = append(seeds, readGolden(f, "record_pullbody3.bin"))
	sealed := encode(f, sampleMessage(40), true)
	seeds = append(seeds, sealed, toV2(f, sealed))
	m := sampleMessage(3)
	m.BornHost, m.StoreHost = bornV6, storeV6
	m.Properties = append(m.Properties, message.Property{Key: "", Value: ""})
	seeds = append(seeds, encode(f, m, true), message.AppendBlank(nil, 64), nil)
	return seeds
}

// normalize drops what Append derives or rewrites: StoreSize, BodyCRC and
// the __CRC32# pairs.
func normalize(m *message.Message) message.Message {
	n := *m
	n.StoreSize, n.BodyCRC = 0, 0
	n.Properties = nil
	for _, kv := range m.Properties {
		if kv.Key != message.PropCRC {
			n.Properties = append(n.Properties, kv)
		}
	}
	return n
}

func FuzzDecode(f *testing.F) {
	for _, s := range seedRecords(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := message.Decode(b)
		if err != nil {
			require.ErrorIs(t, err, message.ErrInvalidRecord)
			require.Error(t, message.Check(b, -1, false), "Check must reject what Decode rejects")
			return
		}
		require.GreaterOrEqual(t, n, message.MinRecordSize)
		require.LessOrEqual(t, n, len(b))
		var shared message.Message
		var slab message.Properties
		ns, err := message.DecodeAliasing(&shared, bytes.Clone(b), &slab)
		require.NoError(t, err, "DecodeAliasing takes what Decode takes")
		require.Equal(t, n, ns)
		require.Equal(t, m, &shared, "DecodeAliasing decodes what Decode decodes")
		withCRC := message.HasCRC(b)
		rec, err := message.Append(nil, m, withCRC)
		if err != nil {
			switch {
			case errors.Is(err, message.ErrEmptyTopic):
				require.Empty(t, m.Topic)
			case errors.Is(err, message.ErrTopicTooLong):
				_, magic, _ := message.RecordSize(b)
				require.Equal(t, message.MagicV2, magic, "only V2 carries long topics")
			case errors.Is(err, message.ErrPropertiesTooLarge):
				// A final 0x02 added to properties that had none.
			default:
				t.Fatalf("a decoded message must re-encode: %v", err)
			}
			return
		}
		require.NoError(t, message.Check(rec, m.PhysicalOffset, withCRC))
		m2, n2, err := message.Decode(rec)
		require.NoError(t, err)
		require.Equal(t, len(rec), n2)
		require.Equal(t, normalize(m), normalize(m2))
		rec2, err := message.Append(nil, m2, withCRC)
		require.NoError(t, err)
		require.Equal(t, rec, rec2, "encoding a decoded record is a fixed point")
	})
}

func FuzzCheck(f *testing.F) {
	for _, s := range seedRecords(f) {
		f.Add(s, int64(-1), false)
		f.Add(s, int64(0), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, physOff int64, requireCRC bool) {
		err := message.Check(b, physOff, requireCRC)
		if err == nil {
			_, _, derr := message.Decode(b)
			require.NoError(t, derr, "a record that passes Check decodes")
			require.True(t, !requireCRC || message.HasCRC(b))
		} else {
			require.ErrorIs(t, err, message.ErrInvalidRecord)
			var ce *message.CheckError
			require.ErrorAs(t, err, &ce)
			require.NotEmpty(t, ce.Field)
		}
		if message.HasCRC(b) {
			c := bytes.Clone(b)
			require.NoError(t, message.SealCRC(c))
			d := bytes.Clone(b)
			require.NoError(t, message.SealTail(d), "SealTail seals what HasCRC accepts")
			require.Equal(t, c, d, "SealTail writes what SealCRC writes")
			if err := message.Check(c, -1, true); err != nil {
				var ce *message.CheckError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, "BODYCRC", ce.Field, "after SealCRC only the body CRC can be wrong")
			}
		}
	})
}

func FuzzDecodeProperties(f *testing.F) {
	for _, s := range []string{
		"", "TAGS\x01TagA\x02", "A\x01\x02B\x01b\x02", "\x01v\x02K\x01k\x02", "A\x01x\x01y\x02B\x01b",
		"\x02\x02", "garbage", "A\x01a\x02__CRC32#\x010123456789\x02",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := message.DecodeProperties(b)
		if err != nil {
			require.ErrorIs(t, err, message.ErrPropertiesTooLarge)
			require.Greater(t, len(b), message.MaxPropertiesLen)
			return
		}
		for _, kv := range p {
			require.False(t, strings.ContainsAny(kv.Key+kv.Value, "\x01\x02"), "decoded pairs hold no separators")
		}
		enc := message.AppendProperties(nil, p)
		require.LessOrEqual(t, len(enc), len(b)+1)
		p2, err := message.DecodeProperties(enc)
		require.NoError(t, err)
		require.Equal(t, p, p2)
	})
}

func FuzzDecodeOffsetMsgID(f *testing.F) {
	for _, s := range []string{
		"C0A8010A00002A9F00000000000003E8", "c0a8010a00002a9f00000001400004d2",
		"20010DB800000000000000000000000100002A9F0000000000002000", "", "XYZ",
		"C0A8010A0001000000000000000003E8",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		host, off, err := message.DecodeOffsetMsgID(id)
		if err != nil {
			require.ErrorIs(t, err, message.ErrInvalidMsgID)
			return
		}
		require.Equal(t, strings.ToUpper(id), message.EncodeOffsetMsgID(host, off))
	})
}
