package remoting

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// The ROCKETMQ binary header, Java's RocketMQSerializable:
//
//	code int16 | language uint8 | version int16 | opaque int32 | flag int32 |
//	remarkLen int32 | remark | extLen int32 | ext
//
// with ext a run of [keyLen int16][key][valueLen int32][value].

// binaryFixedLen is the size of a binary header with no remark and no ext.
const binaryFixedLen = 2 + 1 + 2 + 4 + 4 + 4 + 4

// languageCodes is Java's LanguageCode enum, by code.
var languageCodes = [...]string{
	0: "JAVA", 1: "CPP", 2: "DOTNET", 3: "PYTHON", 4: "DELPHI", 5: "ERLANG", 6: "RUBY",
	7: "OTHER", 8: "HTTP", 9: "GO", 10: "PHP", 11: "OMS", 12: "RUST", 13: "NODE_JS",
}

const languageOther = 7

// languageByte is the code of a language name: "" is JAVA, a name Java
// does not know is OTHER.
func languageByte(name string) byte {
	if name == "" {
		return 0
	}
	if i := slices.Index(languageCodes[:], name); i >= 0 {
		return byte(i)
	}
	return languageOther
}

// languageName is the name of a language code; a code Java does not know
// is OTHER (clients ignore the language).
func languageName(b byte) string {
	if int(b) < len(languageCodes) {
		return languageCodes[b]
	}
	return languageCodes[languageOther]
}

// appendBinaryHeader appends c's binary header to dst.
func appendBinaryHeader(dst []byte, c *Command) ([]byte, error) {
	if c.Version < math.MinInt16 || c.Version > math.MaxInt16 {
		return dst, fmt.Errorf("remoting: version %d does not fit a ROCKETMQ header (int16)", c.Version)
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, languageByte(c.Language))
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Version)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var small [16]extPair
	for _, p := range sortedExt(small[:0], c.ExtFields) {
		k, v := p.k, p.v
		if len(k) > math.MaxInt16 {
			return dst[:start], fmt.Errorf("remoting: ext key of %d bytes does not fit a ROCKETMQ header", len(k))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst, nil
}

// binaryDecoder reads a binary header; like jsonDecoder it takes strings
// as substrings of one copy of the header.
type binaryDecoder struct {
	s string
	i int
}

func (d *binaryDecoder) fail(reason string) error {
	return &HeaderError{Type: RocketMQ, Offset: d.i, Reason: reason}
}

func (d *binaryDecoder) u16() uint16 {
	v := uint16(d.s[d.i])<<8 | uint16(d.s[d.i+1])
	d.i += 2
	return v
}

func (d *binaryDecoder) u32() uint32 {
	v := uint32(d.s[d.i])<<24 | uint32(d.s[d.i+1])<<16 | uint32(d.s[d.i+2])<<8 | uint32(d.s[d.i+3])
	d.i += 4
	return v
}

// bytes reads a string of n bytes, n from a length field of the header.
func (d *binaryDecoder) bytes(n int64, what string) (string, error) {
	if n < 0 {
		return "", d.fail(fmt.Sprintf("negative %s length %d", what, n))
	}
	if n > int64(len(d.s)-d.i) {
		return "", d.fail(fmt.Sprintf("%s length %d exceeds the %d bytes left", what, n, len(d.s)-d.i))
	}
	s := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return s, nil
}

// decodeBinaryHeader decodes a binary header. An empty ext decodes as nil.
func decodeBinaryHeader(b []byte) (*Command, error) {
	d := binaryDecoder{s: string(b)}
	if len(d.s) < binaryFixedLen {
		return nil, d.fail(fmt.Sprintf("header of %d bytes is shorter than %d", len(d.s), binaryFixedLen))
	}
	c := &Command{SerializeType: RocketMQ}
	c.Code = int16(d.u16())
	c.Language = languageName(d.s[d.i])
	d.i++
	c.Version = int32(int16(d.u16()))
	c.Opaque = int32(d.u32())
	c.Flag = int32(d.u32())
	var err error
	if c.Remark, err = d.bytes(int64(int32(d.u32())), "remark"); err != nil {
		return nil, err
	}
	if len(d.s)-d.i < 4 {
		return nil, d.fail("missing ext length")
	}
	extLen := int64(int32(d.u32()))
	if extLen < 0 || extLen > int64(len(d.s)-d.i) {
		return nil, d.fail(fmt.Sprintf("ext length %d does not fit the %d bytes left", extLen, len(d.s)-d.i))
	}
	if int64(len(d.s)-d.i) != extLen {
		return nil, d.fail(fmt.Sprintf("%d bytes after the ext fields", int64(len(d.s)-d.i)-extLen))
	}
	c.ExtFields, err = d.ext()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ext reads ext entries up to the end of the header.
func (d *binaryDecoder) ext() (map[string]string, error) {
	if d.i == len(d.s) {
		return nil, nil
	}
	var m map[string]string
	for d.i < len(d.s) {
		if len(d.s)-d.i < 2 {
			return nil, d.fail("truncated ext key length")
		}
		k, err := d.bytes(int64(int16(d.u16())), "ext key")
		if err != nil {
			return nil, err
		}
		if len(d.s)-d.i < 4 {
			return nil, d.fail("truncated ext value length")
		}
		v, err := d.bytes(int64(int32(d.u32())), "ext value")
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = make(map[string]string, 8)
		}
		m[k] = v
	}
	return m, nil
}
