package remoting_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// binaryHeader builds a ROCKETMQ header field by field, the way Java's
// RocketMQSerializable (and the Go client's rmqCodec) lay it out.
func binaryHeader(code int16, lang byte, version int16, opaque, flag int32, remark string, ext [][2]string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	b = append(b, lang)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(opaque))
	b = binary.BigEndian.AppendUint32(b, uint32(flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(remark)))
	b = append(b, remark...)
	var e []byte
	for _, kv := range ext {
		e = binary.BigEndian.AppendUint16(e, uint16(len(kv[0])))
		e = append(e, kv[0]...)
		e = binary.BigEndian.AppendUint32(e, uint32(len(kv[1])))
		e = append(e, kv[1]...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(e)))
	return append(b, e...)
}

func TestBinaryHeaderLayout(t *testing.T) {
	want := binaryHeader(105, 0, 479, 7, 1, "oops", [][2]string{{"queueId", "3"}, {"topic", "T"}})
	c := &remoting.Command{Code: 105, Language: "JAVA", Version: 479, Opaque: 7, Flag: 1, Remark: "oops",
		ExtFields: map[string]string{"topic": "T", "queueId": "3"}, SerializeType: remoting.RocketMQ}
	got, err := c.AppendHeader(nil, remoting.RocketMQ)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	back, err := remoting.DecodeHeader(remoting.RocketMQ, got)
	require.NoError(t, err)
	assert.Equal(t, c, back)

	frame, err := c.AppendFrame(nil)
	require.NoError(t, err)
	assert.Equal(t, byte(1), frame[4], "serialize type byte")
	fromFrame, err := remoting.DecodeFrame(frame)
	require.NoError(t, err)
	assert.Equal(t, c, fromFrame)
}

func TestBinaryHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    remoting.Command
	}{
		{"empty", remoting.Command{Language: "JAVA"}},
		{"go client", remoting.Command{Code: 10, Language: "GO", Version: 317, Opaque: -1, Flag: 2,
			ExtFields: map[string]string{"properties": "TAGS\x01a\x02", "": "empty key", "v": ""}}},
		{"response", remoting.Command{Code: 22, Language: "RUST", Version: -1, Flag: 1, Remark: "not found 标签"}},
		{"body", remoting.Command{Code: 11, Language: "NODE_JS", Body: []byte{0, 1, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.SerializeType = remoting.RocketMQ
			frame, err := tt.c.AppendFrame(nil)
			require.NoError(t, err)
			back, err := remoting.DecodeFrame(frame)
			require.NoError(t, err)
			assert.Equal(t, &tt.c, back)
		})
	}
}

func TestBinaryLanguageCodes(t *testing.T) {
	for code, name := range []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"} {
		c, err := remoting.DecodeHeader(remoting.RocketMQ, binaryHeader(0, byte(code), 0, 0, 0, "", nil))
		require.NoError(t, err)
		assert.Equal(t, name, c.Language)
		hdr, err := c.AppendHeader(nil, remoting.RocketMQ)
		require.NoError(t, err)
		assert.Equal(t, byte(code), hdr[2], name)
	}
	c, err := remoting.DecodeHeader(remoting.RocketMQ, binaryHeader(0, 99, 0, 0, 0, "", nil))
	require.NoError(t, err)
	assert.Equal(t, "OTHER", c.Language, "a code Java does not know")

	hdr, err := (&remoting.Command{Language: "COBOL"}).AppendHeader(nil, remoting.RocketMQ)
	require.NoError(t, err)
	assert.Equal(t, byte(7), hdr[2], "a name Java does not know is OTHER")
	hdr, err = (&remoting.Command{}).AppendHeader(nil, remoting.RocketMQ)
	require.NoError(t, err)
	assert.Equal(t, byte(0), hdr[2], "no language is JAVA")
}

func TestBinaryHeaderErrors(t *testing.T) {
	good := binaryHeader(1, 0, 1, 1, 0, "rem", [][2]string{{"k", "v"}})
	setU32 := func(b []byte, at int, v int32) []byte {
		b = append([]byte(nil), b...)
		binary.BigEndian.PutUint32(b[at:], uint32(v))
		return b
	}
	const remarkAt, extAt = 13, 13 + 4 + 3
	tests := []struct {
		name   string
		header []byte
	}{
		{"empty", nil},
		{"short", good[:20]},
		{"negative remark length", setU32(good, remarkAt, -1)},
		{"remark past the end", setU32(good, remarkAt, 1000)},
		{"negative ext length", setU32(good, extAt, -1)},
		{"ext past the end", setU32(good, extAt, 100)},
		{"ext shorter than the rest", setU32(good, extAt, 3)},
		{"truncated ext key length", append(setU32(binaryHeader(0, 0, 0, 0, 0, "", nil), extAt-3, 1), 0x00)},
		{"truncated ext value length", append(setU32(binaryHeader(0, 0, 0, 0, 0, "", nil), extAt-3, 5), 0, 1, 'k', 0, 0)},
		{"ext key past the end", append(setU32(binaryHeader(0, 0, 0, 0, 0, "", nil), extAt-3, 2), 0x00, 0x05)},
		{"negative ext key length", append(setU32(binaryHeader(0, 0, 0, 0, 0, "", nil), extAt-3, 2), 0xff, 0xff)},
		{"negative value length", append(setU32(binaryHeader(0, 0, 0, 0, 0, "", nil), extAt-3, 7), 0, 1, 'k', 0xff, 0xff, 0xff, 0xff)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := remoting.DecodeHeader(remoting.RocketMQ, tt.header)
			require.ErrorIs(t, err, remoting.ErrMalformed)
			var he *remoting.HeaderError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, remoting.RocketMQ, he.Type)
		})
	}
}

func TestBinaryHeaderEncodeErrors(t *testing.T) {
	_, err := (&remoting.Command{Version: 40000}).AppendHeader(nil, remoting.RocketMQ)
	require.Error(t, err, "version over int16")
	long := string(make([]byte, 1<<15))
	dst := []byte("keep")
	out, err := (&remoting.Command{ExtFields: map[string]string{long: "v"}}).AppendHeader(dst, remoting.RocketMQ)
	require.Error(t, err, "ext key over int16")
	assert.Equal(t, []byte("keep"), out)
}
