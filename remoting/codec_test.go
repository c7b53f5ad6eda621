package remoting_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// Every request the official Go client sent decodes to the fields its
// capture lists, from a byte slice and from a stream.
func TestGoldenRequestsDecode(t *testing.T) {
	for _, name := range goldenNames(t, "_request") {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			c, err := remoting.DecodeFrame(g.Bin)
			require.NoError(t, err)
			assertGoldenFields(t, g, c)
			assert.False(t, c.IsResponse())

			r, err := remoting.ReadFrame(bufio.NewReader(bytes.NewReader(g.Bin)), 0)
			require.NoError(t, err)
			assert.Equal(t, c, r)
		})
	}
}

func assertGoldenFields(t *testing.T, g golden, c *remoting.Command) {
	t.Helper()
	assert.Equal(t, remoting.SerializeType(g.SerializeType), c.SerializeType)
	assert.Equal(t, g.Header.Code, c.Code)
	assert.Equal(t, g.Header.Language, c.Language)
	assert.Equal(t, g.Header.Version, c.Version)
	assert.Equal(t, g.Header.Opaque, c.Opaque)
	assert.Equal(t, g.Header.Flag, c.Flag)
	if g.Header.Remark != nil {
		assert.Equal(t, *g.Header.Remark, c.Remark)
	} else {
		assert.Empty(t, c.Remark)
	}
	if len(g.Header.ExtFields) == 0 {
		assert.Empty(t, c.ExtFields)
	} else {
		assert.Equal(t, g.Header.ExtFields, c.ExtFields)
	}
	assert.Len(t, c.Body, g.BodyLength)
	if g.BodyText != nil {
		assert.Equal(t, *g.BodyText, string(c.Body))
	}
	if g.BodyHex != nil {
		assert.Equal(t, strings.ToLower(*g.BodyHex), hex.EncodeToString(c.Body))
	}
}

// Every response of the captures (written the way a Java broker writes
// them, and accepted by the Go client) decodes to its fields and encodes
// back to exactly the captured bytes.
func TestGoldenResponsesRoundTripExactly(t *testing.T) {
	for _, name := range goldenNames(t, "_response") {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			c, err := remoting.DecodeFrame(g.Bin)
			require.NoError(t, err)
			assertGoldenFields(t, g, c)
			assert.True(t, c.IsResponse())

			out, err := c.AppendFrame(nil)
			require.NoError(t, err)
			assert.Equal(t, g.Bin, out)
			hdr, err := c.AppendHeader(nil, remoting.JSON)
			require.NoError(t, err)
			assert.Equal(t, g.HeaderText, string(hdr))
		})
	}
}

// A response built with NewResponse to a captured request is byte for
// byte what the capture's fake broker sent and the client accepted.
func TestNewResponseMatchesCapture(t *testing.T) {
	req, err := remoting.DecodeFrame(loadGolden(t, "frame_send_request").Bin)
	require.NoError(t, err)
	want := loadGolden(t, "frame_send_response")
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	for k, v := range want.Header.ExtFields {
		resp.SetExt(k, v)
	}
	out, err := resp.AppendFrame(nil)
	require.NoError(t, err)
	assert.Equal(t, want.Bin, out)
}

// A Go client's route query for topic T with body "xy", byte for byte.
func TestRouteQueryExampleBytes(t *testing.T) {
	header := `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T"}}`
	require.Len(t, header, 0x64)
	frame := append([]byte{0x00, 0x00, 0x00, 0x6a, 0x00, 0x00, 0x00, 0x64}, header...)
	frame = append(frame, 0x78, 0x79)

	c, err := remoting.DecodeFrame(frame)
	require.NoError(t, err)
	assert.Equal(t, &remoting.Command{
		Code: 105, Language: "GO", Version: 317, Opaque: 1,
		ExtFields: map[string]string{"topic": "T"}, Body: []byte("xy"),
	}, c)
	assert.Equal(t, remoting.ReqGetRouteInfoByTopic, c.RequestCode())
}

// goClientCommand mirrors the official Go client's RemotingCommand as its
// JSON decoder sees it: ext values must be strings, code a number.
type goClientCommand struct {
	Code      int16             `json:"code"`
	Language  json.RawMessage   `json:"language"`
	Version   int16             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark"`
	ExtFields map[string]string `json:"extFields"`
}

// Responses Gantry writes parse with a standard JSON decoder into the
// client's shape, with the same field values, whatever the strings hold.
func TestResponsesParseAsTheGoClientDoes(t *testing.T) {
	tricky := []string{
		"", "plain", `quote " and backslash \`, "ctl \x00\x01\x02\x1f\x7f", "tab\tnl\nret\r",
		"UTF-8 标签 😀", "TAGS\x01TagA\x02KEYS\x01k1 k2\x02", "</script>&", "\u2028\u2029",
	}
	for i, s := range tricky {
		req := &remoting.Command{Code: 10, Opaque: int32(i) - 3}
		resp := remoting.ErrorResponse(req, remoting.ResTopicNotExist, "remark: %s", s)
		resp.SetExt("k"+s, s)
		resp.SetExt("queueOffset", "42")
		frame, err := resp.AppendFrame(nil)
		require.NoError(t, err)

		hlen := int(frame[5])<<16 | int(frame[6])<<8 | int(frame[7])
		var got goClientCommand
		require.NoError(t, json.Unmarshal(frame[8:8+hlen], &got), "%q", frame[8:8+hlen])
		assert.Equal(t, int16(remoting.ResTopicNotExist), got.Code)
		assert.Equal(t, int16(remoting.VersionV5_3_3), got.Version)
		assert.Equal(t, int32(i)-3, got.Opaque)
		assert.Equal(t, remoting.FlagResponse, got.Flag)
		assert.Equal(t, "remark: "+s, got.Remark)
		assert.Equal(t, map[string]string{"k" + s: s, "queueOffset": "42"}, got.ExtFields)
		assert.JSONEq(t, `"JAVA"`, string(got.Language))

		back, err := remoting.DecodeFrame(frame)
		require.NoError(t, err)
		assert.Equal(t, resp, back)
	}
}

// Invalid UTF-8 goes out as U+FFFD, as encoding/json writes it.
func TestJSONInvalidUTF8(t *testing.T) {
	c := &remoting.Command{Remark: "a\xffb\xc3", ExtFields: map[string]string{"k\xfe": "v\xed\xa0\x80"}}
	hdr, err := c.AppendHeader(nil, remoting.JSON)
	require.NoError(t, err)
	var got goClientCommand
	require.NoError(t, json.Unmarshal(hdr, &got))
	assert.Equal(t, "a\uFFFDb\uFFFD", got.Remark)
	assert.Equal(t, map[string]string{"k\uFFFD": "v\uFFFD\uFFFD\uFFFD"}, got.ExtFields)

	back, err := remoting.DecodeHeader(remoting.JSON, hdr)
	require.NoError(t, err)
	assert.Equal(t, got.Remark, back.Remark)
	assert.Equal(t, got.ExtFields, back.ExtFields)
}

func TestDecodeJSONHeader(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   remoting.Command
	}{
		{"minimal", `{"code":0}`, remoting.Command{}},
		{"empty object", `{}`, remoting.Command{}},
		{"nulls", `{"code":1,"language":null,"remark":null,"extFields":null,"version":null}`, remoting.Command{Code: 1}},
		{"whitespace", " {\n\t\"code\" : 34 ,\r\n \"flag\":1 } \n", remoting.Command{Code: 34, Flag: 1}},
		{"negative numbers", `{"code":-1,"opaque":-2147483648,"version":-5}`, remoting.Command{Code: -1, Opaque: -2147483648, Version: -5}},
		{"unknown keys skipped", `{"x":{"a":[1,2.5e3,{"b":null}],"c":"}"},"code":5,"y":[],"z":true,"w":-0.5}`, remoting.Command{Code: 5}},
		{"serializeTypeCurrentRPC ignored", `{"code":0,"serializeTypeCurrentRPC":"ROCKETMQ"}`, remoting.Command{}},
		{"empty ext is nil", `{"extFields":{}}`, remoting.Command{}},
		{"ext null value left out", `{"extFields":{"a":null,"b":"x"}}`, remoting.Command{ExtFields: map[string]string{"b": "x"}}},
		{"ext scalars as text", `{"extFields":{"queueId":1,"big":-12.5e3,"ok":true,"no":false}}`,
			remoting.Command{ExtFields: map[string]string{"queueId": "1", "big": "-12.5e3", "ok": "true", "no": "false"}}},
		{"ext duplicate key: last wins", `{"extFields":{"a":"1","a":"2"}}`, remoting.Command{ExtFields: map[string]string{"a": "2"}}},
		{"escapes", `{"remark":"q\" b\\ s\/ \b\f\n\r\t \u0001 \u00e9 \ud83d\ude00 \ud800x \udc00"}`,
			remoting.Command{Remark: "q\" b\\ s/ \b\f\n\r\t \x01 é 😀 \uFFFDx \uFFFD"}},
		{"escaped key", `{"\u0063ode":7,"extFields":{"t\u006fpic":"T"}}`, remoting.Command{Code: 7, ExtFields: map[string]string{"topic": "T"}}},
		{"raw UTF-8 and control bytes", "{\"remark\":\"标签\x01\"}", remoting.Command{Remark: "标签\x01"}},
		{"language", `{"language":"GO"}`, remoting.Command{Language: "GO"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := remoting.DecodeHeader(remoting.JSON, []byte(tt.header))
			require.NoError(t, err)
			assert.Equal(t, &tt.want, c)
		})
	}
}

func TestDecodeJSONHeaderErrors(t *testing.T) {
	tests := []struct{ name, header string }{
		{"empty", ``},
		{"not an object", `[]`},
		{"quoted code", `{"code":"0"}`},
		{"fraction", `{"code":1.0}`},
		{"exponent", `{"opaque":1e3}`},
		{"leading zero", `{"opaque":01}`},
		{"code over int16", `{"code":32768}`},
		{"opaque over int32", `{"opaque":2147483648}`},
		{"huge number", `{"flag":123456789012345678901234567890}`},
		{"ext not an object", `{"extFields":"a=b"}`},
		{"ext nested object", `{"extFields":{"a":{}}}`},
		{"ext array", `{"extFields":{"a":[]}}`},
		{"remark number", `{"remark":5}`},
		{"trailing data", `{"code":1}x`},
		{"two objects", `{}{}`},
		{"unterminated", `{"code":1`},
		{"unterminated string", `{"remark":"abc`},
		{"unterminated escape", `{"remark":"abc\`},
		{"bad escape", `{"remark":"\x"}`},
		{"bad unicode escape", `{"remark":"\u12g4"}`},
		{"missing colon", `{"code" 1}`},
		{"missing comma", `{"code":1 "flag":1}`},
		{"trailing comma", `{"code":1,}`},
		{"bare key", `{code:1}`},
		{"bad literal", `{"x":nul}`},
		{"too deep", `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := remoting.DecodeHeader(remoting.JSON, []byte(tt.header))
			require.ErrorIs(t, err, remoting.ErrMalformed)
			var he *remoting.HeaderError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, remoting.JSON, he.Type)
		})
	}
}

// The encoder writes Java's key order and leaves out what Java leaves out.
func TestEncodeJSONHeader(t *testing.T) {
	c := &remoting.Command{Code: 17, Opaque: 9, Flag: 1, Version: 479, Language: "JAVA", Remark: "no route",
		ExtFields: map[string]string{"b": "2", "a": "1", "": ""}}
	hdr, err := c.AppendHeader(nil, remoting.JSON)
	require.NoError(t, err)
	assert.Equal(t, `{"code":17,"extFields":{"":"","a":"1","b":"2"},"flag":1,"language":"JAVA","opaque":9,"remark":"no route",`+
		`"serializeTypeCurrentRPC":"JSON","version":479}`, string(hdr))

	hdr, err = (&remoting.Command{}).AppendHeader(nil, remoting.JSON)
	require.NoError(t, err)
	assert.Equal(t, `{"code":0,"flag":0,"opaque":0,"serializeTypeCurrentRPC":"JSON","version":0}`, string(hdr))
}
