package message_test

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// The golden vectors are copies of shared/testdata/rocketmq (see
// testdata/rocketmq/README.md), checked against the official Go client.
const goldenDir = "testdata/rocketmq"

type goldenHost struct {
	Address      string `json:"address"`
	BytesHex     string `json:"bytesHex"`
	ClientString string `json:"clientString"`
}

type goldenRecord struct {
	OffsetInBody              int               `json:"offsetInBody"`
	TotalSize                 int32             `json:"totalSize"`
	MagicCodeInt32            int32             `json:"magicCodeInt32"`
	BodyCRC                   int32             `json:"bodyCRC"`
	QueueID                   int32             `json:"queueId"`
	Flag                      int32             `json:"flag"`
	QueueOffset               int64             `json:"queueOffset"`
	CommitLogOffset           int64             `json:"commitLogOffset"`
	SysFlag                   int32             `json:"sysFlag"`
	BornTimestamp             int64             `json:"bornTimestamp"`
	BornHost                  goldenHost        `json:"bornHost"`
	StoreTimestamp            int64             `json:"storeTimestamp"`
	StoreHost                 goldenHost        `json:"storeHost"`
	ReconsumeTimes            int32             `json:"reconsumeTimes"`
	PreparedTransactionOffset int64             `json:"preparedTransactionOffset"`
	BodyLength                int               `json:"bodyLength"`
	StoredBodyLength          int               `json:"storedBodyLength"`
	Compressed                bool              `json:"compressed"`
	BodyHex                   string            `json:"bodyHex"`
	StoredBodyHex             string            `json:"storedBodyHex"`
	TopicLength               int               `json:"topicLength"`
	Topic                     string            `json:"topic"`
	PropertiesLength          int               `json:"propertiesLength"`
	PropertiesRaw             string            `json:"propertiesRaw"`
	Properties                map[string]string `json:"properties"`
	Tags                      string            `json:"tags"`
	Keys                      string            `json:"keys"`
	MsgID                     string            `json:"msgId"`
	OffsetMsgID               string            `json:"offsetMsgId"`
	FieldOffsets              []struct {
		Field  string `json:"field"`
		Offset int    `json:"offset"`
		Size   int    `json:"size"`
	} `json:"fieldOffsets"`
}

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	require.NoError(t, err)
	return b
}

func readGoldenJSON(t testing.TB, name string, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(readGolden(t, name), v))
}

// singleRecordVectors are the record_*.bin files holding one record each.
var singleRecordVectors = []string{
	"record_minimal", "record_typical", "record_ipv6", "record_compressed", "record_topic127", "record_retry",
}

// goldenRecords returns the bytes of every single-record vector, for seeds
// and benchmarks.
func goldenRecords(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, name := range singleRecordVectors {
		out = append(out, readGolden(t, name+".bin"))
	}
	return out
}

func TestGoldenRecords(t *testing.T) {
	for _, name := range singleRecordVectors {
		t.Run(name, func(t *testing.T) {
			bin := readGolden(t, name+".bin")
			var want goldenRecord
			readGoldenJSON(t, name+".json", &want)

			m, n, err := message.Decode(bin)
			require.NoError(t, err)
			assert.Equal(t, len(bin), n)
			assertGoldenFields(t, want, m)

			require.NoError(t, message.Check(bin, want.CommitLogOffset, false))
			assert.False(t, message.HasCRC(bin), "golden records carry no __CRC32#")
			assertGoldenAccessors(t, want, bin)
			assertFieldOffsets(t, want, bin)

			re, err := message.Append(nil, m, false)
			require.NoError(t, err)
			assert.Equal(t, bin, re, "re-encoding must give the golden bytes")
		})
	}
}

func TestGoldenPullBody(t *testing.T) {
	bin := readGolden(t, "record_pullbody3.bin")
	var want struct {
		Count       int            `json:"count"`
		TotalLength int            `json:"totalLength"`
		Records     []goldenRecord `json:"records"`
	}
	readGoldenJSON(t, "record_pullbody3.json", &want)
	require.Len(t, bin, want.TotalLength)

	msgs, err := message.DecodeAll(bin)
	require.NoError(t, err)
	require.Len(t, msgs, want.Count)
	var re []byte
	for i, m := range msgs {
		w := want.Records[i]
		assertGoldenFields(t, w, m)
		rec := bin[w.OffsetInBody : w.OffsetInBody+int(w.TotalSize)]
		assert.NoError(t, message.Check(bin[w.OffsetInBody:], w.CommitLogOffset, false), "record %d", i)
		assertGoldenAccessors(t, w, rec)
		re, err = message.Append(re, m, false)
		require.NoError(t, err)
	}
	assert.Equal(t, bin, re)
}

func assertGoldenFields(t *testing.T, want goldenRecord, m *message.Message) {
	t.Helper()
	assert.Equal(t, want.TotalSize, m.StoreSize, "StoreSize")
	assert.Equal(t, want.BodyCRC, m.BodyCRC, "BodyCRC")
	assert.Equal(t, want.QueueID, m.QueueID, "QueueID")
	assert.Equal(t, want.Flag, m.Flag, "Flag")
	assert.Equal(t, want.QueueOffset, m.QueueOffset, "QueueOffset")
	assert.Equal(t, want.CommitLogOffset, m.PhysicalOffset, "PhysicalOffset")
	assert.Equal(t, want.SysFlag, m.SysFlag, "SysFlag")
	assert.Equal(t, want.BornTimestamp, m.BornTimestamp, "BornTimestamp")
	assert.Equal(t, netip.MustParseAddrPort(want.BornHost.Address), m.BornHost, "BornHost")
	assert.Equal(t, want.StoreTimestamp, m.StoreTimestamp, "StoreTimestamp")
	assert.Equal(t, netip.MustParseAddrPort(want.StoreHost.Address), m.StoreHost, "StoreHost")
	assert.Equal(t, want.ReconsumeTimes, m.ReconsumeTimes, "ReconsumeTimes")
	assert.Equal(t, want.PreparedTransactionOffset, m.PreparedTransactionOffset, "PreparedTransactionOffset")
	assert.Equal(t, want.Topic, m.Topic, "Topic")
	assert.Len(t, m.Topic, want.TopicLength)

	stored := want.BodyHex
	if want.Compressed {
		stored = want.StoredBodyHex
		require.NotZero(t, m.SysFlag&message.FlagCompressed)
		zr, err := zlib.NewReader(bytes.NewReader(m.Body))
		require.NoError(t, err)
		inflated, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.Equal(t, want.BodyHex, strings.ToUpper(hex.EncodeToString(inflated)), "inflated body")
		assert.Len(t, inflated, want.BodyLength)
	}
	assert.Equal(t, stored, strings.ToUpper(hex.EncodeToString(m.Body)), "Body")

	assert.Equal(t, want.PropertiesRaw, string(message.AppendProperties(nil, m.Properties)), "Properties order")
	assert.Len(t, m.Properties, len(want.Properties))
	for k, v := range want.Properties {
		got, ok := m.Properties.Get(k)
		assert.True(t, ok, "property %s", k)
		assert.Equal(t, v, got, "property %s", k)
	}
	assert.Equal(t, want.Tags, m.Tags(), "Tags")
	assert.Equal(t, strings.Fields(want.Keys), nilIfEmpty(m.Keys()), "Keys")
	assert.Equal(t, want.Properties[message.PropUniqKey], m.UniqKey(), "UniqKey")
	assert.Equal(t, want.MsgID, m.MsgID(), "MsgID")
	assert.Equal(t, want.OffsetMsgID, m.OffsetMsgID(), "OffsetMsgID")
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return []string{}
	}
	return s
}

func assertGoldenAccessors(t *testing.T, want goldenRecord, rec []byte) {
	t.Helper()
	size, magic, ok := message.RecordSize(rec)
	require.True(t, ok)
	assert.Equal(t, want.TotalSize, size)
	assert.Equal(t, message.MagicV1, magic)
	assert.Equal(t, want.MagicCodeInt32, magic)
	assert.Equal(t, want.QueueID, message.QueueIDOf(rec))
	assert.Equal(t, want.SysFlag, message.SysFlagOf(rec))
	assert.Equal(t, want.QueueOffset, message.QueueOffsetOf(rec))
	assert.Equal(t, want.CommitLogOffset, message.PhysicalOffsetOf(rec))
	assert.Equal(t, want.BornTimestamp, message.BornTimestampOf(rec))
	assert.Equal(t, want.StoreTimestamp, message.StoreTimestampOf(rec))
	assert.Equal(t, want.ReconsumeTimes, message.ReconsumeTimesOf(rec))
}

// assertFieldOffsets checks the layout against the vector's field table by
// stamping distinctive values through the setters and finding them at the
// offsets the vector gives.
func assertFieldOffsets(t *testing.T, want goldenRecord, bin []byte) {
	t.Helper()
	at := map[string][2]int{}
	for _, f := range want.FieldOffsets {
		at[f.Field] = [2]int{f.Offset, f.Size}
	}
	rec := bytes.Clone(bin)
	message.SetQueueOffset(rec, 0x0102030405060708)
	message.SetPhysicalOffset(rec, 0x1112131415161718)
	message.SetStoreTimestamp(rec, 0x2122232425262728)
	message.SetReconsumeTimes(rec, 0x31323334)
	message.SetPreparedTransactionOffset(rec, 0x4142434445464748)
	for field, v := range map[string]uint64{
		"QUEUEOFFSET":               0x0102030405060708,
		"PHYSICALOFFSET":            0x1112131415161718,
		"STORETIMESTAMP":            0x2122232425262728,
		"RECONSUMETIMES":            0x31323334,
		"PREPAREDTRANSACTIONOFFSET": 0x4142434445464748,
	} {
		loc, ok := at[field]
		require.True(t, ok, field)
		b := rec[loc[0] : loc[0]+loc[1]]
		var got uint64
		if loc[1] == 8 {
			got = binary.BigEndian.Uint64(b)
		} else {
			got = uint64(binary.BigEndian.Uint32(b))
		}
		assert.Equal(t, v, got, field)
	}
	for _, f := range []string{"BODY", "TOPIC", "PROPERTIES"} {
		loc := at[f]
		assert.Equal(t, bin[loc[0]:loc[0]+loc[1]], rec[loc[0]:loc[0]+loc[1]], "%s unchanged by the setters", f)
	}
	assert.Equal(t, bin[at["STOREHOST"][0]:][:at["STOREHOST"][1]], rec[at["STOREHOST"][0]:][:at["STOREHOST"][1]])
	assert.Equal(t, want.StoreHost.BytesHex, strings.ToUpper(hex.EncodeToString(bin[at["STOREHOST"][0]:][:at["STOREHOST"][1]-4])))
	assert.Equal(t, want.BornHost.BytesHex, strings.ToUpper(hex.EncodeToString(bin[at["BORNHOST"][0]:][:at["BORNHOST"][1]-4])))
}

func TestGoldenMsgIDs(t *testing.T) {
	for _, name := range []string{"msgid_ipv4", "msgid_ipv4_big_offset", "msgid_ipv6"} {
		t.Run(name, func(t *testing.T) {
			var want struct {
				StoreHost       string `json:"storeHost"`
				CommitLogOffset int64  `json:"commitLogOffset"`
				LengthBytes     int    `json:"lengthBytes"`
				Hex             string `json:"hex"`
			}
			readGoldenJSON(t, name+".json", &want)
			raw := readGolden(t, name+".bin")
			require.Len(t, raw, want.LengthBytes)
			assert.Equal(t, want.Hex, strings.ToUpper(hex.EncodeToString(raw)))

			host := netip.MustParseAddrPort(want.StoreHost)
			assert.Equal(t, want.Hex, message.EncodeOffsetMsgID(host, want.CommitLogOffset))
			assert.Equal(t, []byte("x"+want.Hex), message.AppendOffsetMsgID([]byte("x"), host, want.CommitLogOffset))

			for _, id := range []string{want.Hex, strings.ToLower(want.Hex)} {
				gotHost, gotOff, err := message.DecodeOffsetMsgID(id)
				require.NoError(t, err)
				assert.Equal(t, host, gotHost)
				assert.Equal(t, want.CommitLogOffset, gotOff)
			}
		})
	}
}

func TestGoldenTagHash(t *testing.T) {
	var want struct {
		Entries []struct {
			Tag          string `json:"tag"`
			JavaHashCode int32  `json:"javaHashCode"`
			TagsCode     int64  `json:"tagsCode"`
			TagsCodeHex  string `json:"tagsCodeHex"`
		} `json:"entries"`
	}
	readGoldenJSON(t, "taghash.json", &want)
	bin := readGolden(t, "taghash.bin")
	require.Len(t, want.Entries, 7)
	require.Len(t, bin, 8*len(want.Entries))
	for i, e := range want.Entries {
		t.Run(e.Tag, func(t *testing.T) {
			fromBin := int64(binary.BigEndian.Uint64(bin[8*i:]))
			assert.Equal(t, e.TagsCode, fromBin)
			assert.Equal(t, e.JavaHashCode, message.JavaHashCode(e.Tag))
			assert.Equal(t, e.TagsCode, message.TagsCode(e.Tag))
			assert.Equal(t, e.TagsCodeHex, strings.ToUpper(hex.EncodeToString(binary.BigEndian.AppendUint64(nil, uint64(message.TagsCode(e.Tag))))))
		})
	}
}
