package remoting

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON header is written the way a Java broker's
// fastjson writes it: keys in alphabetical order, every ext value a string,
// an empty remark, language or ext map left out (Java's null), and
// "serializeTypeCurrentRPC":"JSON". The encoder and decoder are written by
// hand: a header is encoded and decoded for every request, and reflection
// would cost most of the time and several allocations per field.

// appendJSONHeader appends c's JSON header to dst.
func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	if len(c.ExtFields) > 0 {
		dst = append(dst, `,"extFields":{`...)
		dst = appendJSONExt(dst, c.ExtFields)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	if c.Language != "" {
		dst = append(dst, `,"language":`...)
		dst = appendJSONString(dst, c.Language)
	}
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	if c.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, c.Remark)
	}
	dst = append(dst, `,"serializeTypeCurrentRPC":"JSON","version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	return append(dst, '}')
}

// appendJSONExt appends the members of ext, sorted by key so that a frame's
// bytes depend only on its fields.
func appendJSONExt(dst []byte, ext map[string]string) []byte {
	var small [16]extPair
	for i, p := range sortedExt(small[:0], ext) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, p.k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, p.v)
	}
	return dst
}

// sortedExt appends the members of ext to pairs, sorted by key.
func sortedExt(pairs []extPair, ext map[string]string) []extPair {
	for k, v := range ext {
		pairs = append(pairs, extPair{k, v})
	}
	slices.SortFunc(pairs, func(a, b extPair) int { return strings.Compare(a.k, b.k) })
	return pairs
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the bytes a JSON string carries as they are: printable
// ASCII but '"' and '\\'. Other bytes take appendJSONString's slow path.
var jsonSafe = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string: '"', '\\' and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does), everything else as is.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if jsonSafe[s[i]] {
			i++
			continue
		}
		b := s[i]
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// maxJSONDepth bounds the nesting of unknown values the decoder skips.
const maxJSONDepth = 64

// jsonDecoder scans one JSON header. It works on a string copy of the
// header so that keys and values without escapes are substrings of it: one
// allocation for the text, not one per field.
type jsonDecoder struct {
	s string
	i int
}

// decodeJSONHeader decodes a JSON header. Unknown keys are skipped; remark,
// language and extFields may be null; ext values must be strings, numbers,
// booleans or null (a null value is left out).
func decodeJSONHeader(b []byte) (*Command, error) {
	d := jsonDecoder{s: string(b)}
	c := &Command{SerializeType: JSON}
	if err := d.header(c); err != nil {
		return nil, err
	}
	return c, nil
}

func (d *jsonDecoder) fail(reason string) error {
	return &HeaderError{Type: JSON, Offset: d.i, Reason: reason}
}

func (d *jsonDecoder) header(c *Command) error {
	d.space()
	if !d.consume('{') {
		return d.fail("header is not a JSON object")
	}
	d.space()
	if d.consume('}') {
		return d.end()
	}
	for {
		d.space()
		key, err := d.str()
		if err != nil {
			return err
		}
		d.space()
		if !d.consume(':') {
			return d.fail("expected ':' after a key")
		}
		d.space()
		if err := d.field(c, key); err != nil {
			return err
		}
		d.space()
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return d.end()
		}
		return d.fail("expected ',' or '}' after a value")
	}
}

func (d *jsonDecoder) end() error {
	d.space()
	if d.i != len(d.s) {
		return d.fail("data after the header object")
	}
	return nil
}

func (d *jsonDecoder) field(c *Command, key string) error {
	var err error
	switch key {
	case "code":
		var n int64
		n, err = d.int(math.MinInt16, math.MaxInt16)
		c.Code = int16(n)
	case "version":
		var n int64
		n, err = d.int(math.MinInt32, math.MaxInt32)
		c.Version = int32(n)
	case "opaque":
		var n int64
		n, err = d.int(math.MinInt32, math.MaxInt32)
		c.Opaque = int32(n)
	case "flag":
		var n int64
		n, err = d.int(math.MinInt32, math.MaxInt32)
		c.Flag = int32(n)
	case "language":
		c.Language, err = d.strOrNull()
	case "remark":
		c.Remark, err = d.strOrNull()
	case "extFields":
		c.ExtFields, err = d.ext()
	default:
		err = d.skip(0)
	}
	return err
}

func (d *jsonDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) consume(b byte) bool {
	if d.i < len(d.s) && d.s[d.i] == b {
		d.i++
		return true
	}
	return false
}

// literal consumes lit if the input continues with it.
func (d *jsonDecoder) literal(lit string) bool {
	if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// int decodes an integer in [lo, hi]; null decodes as 0.
func (d *jsonDecoder) int(lo, hi int64) (int64, error) {
	if d.literal("null") {
		return 0, nil
	}
	start := d.i
	if d.i < len(d.s) && d.s[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	if d.i == digits {
		return 0, d.fail("expected an integer")
	}
	if d.i < len(d.s) && (d.s[d.i] == '.' || d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		return 0, d.fail("expected an integer, got a fraction or exponent")
	}
	if d.i-digits > 1 && d.s[digits] == '0' {
		return 0, d.fail("integer with a leading zero")
	}
	n, err := strconv.ParseInt(d.s[start:d.i], 10, 64)
	if err != nil || n < lo || n > hi {
		d.i = start
		return 0, d.fail("integer " + d.s[start:min(start+24, len(d.s))] + " out of range")
	}
	return n, nil
}

func (d *jsonDecoder) strOrNull() (string, error) {
	if d.literal("null") {
		return "", nil
	}
	return d.str()
}

// str decodes a JSON string. Without escapes or invalid UTF-8 the result is
// a substring of the header text.
func (d *jsonDecoder) str() (string, error) {
	if !d.consume('"') {
		return "", d.fail("expected a string")
	}
	start := d.i
	n := strings.IndexByte(d.s[start:], '"')
	if n < 0 {
		return "", d.fail("unterminated string")
	}
	s := d.s[start : start+n]
	if strings.IndexByte(s, '\\') >= 0 || !utf8.ValidString(s) {
		return d.unescape(start) // the quote found may be an escaped one
	}
	d.i = start + n + 1
	return s, nil
}

// unescape decodes the string that starts at start (after its quote) the
// slow way: escapes resolved, invalid UTF-8 and lone surrogates replaced
// by U+FFFD, as encoding/json does.
func (d *jsonDecoder) unescape(start int) (string, error) {
	end := start // the closing quote, to size the result
	for end < len(d.s) && d.s[end] != '"' {
		if d.s[end] == '\\' {
			end++
		}
		end++
	}
	var buf strings.Builder
	buf.Grow(min(end, len(d.s)) - start)
	d.i = start
	for d.i < len(d.s) {
		b := d.s[d.i]
		switch {
		case b == '"':
			d.i++
			return buf.String(), nil
		case b == '\\':
			if err := d.escape(&buf); err != nil {
				return "", err
			}
		case b >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(d.s[d.i:])
			buf.WriteRune(r)
			d.i += size
		default:
			buf.WriteByte(b)
			d.i++
		}
	}
	return "", d.fail("unterminated string")
}

// escape decodes the escape sequence at d.i onto buf.
func (d *jsonDecoder) escape(buf *strings.Builder) error {
	if d.i+1 >= len(d.s) {
		return d.fail("unterminated escape")
	}
	c := d.s[d.i+1]
	d.i += 2
	switch c {
	case '"', '\\', '/':
		buf.WriteByte(c)
	case 'b':
		buf.WriteByte('\b')
	case 'f':
		buf.WriteByte('\f')
	case 'n':
		buf.WriteByte('\n')
	case 'r':
		buf.WriteByte('\r')
	case 't':
		buf.WriteByte('\t')
	case 'u':
		r, ok := d.hex4()
		if !ok {
			return d.fail("bad \\u escape")
		}
		if utf16.IsSurrogate(r) {
			r = d.lowSurrogate(r)
		}
		buf.WriteRune(r)
	default:
		d.i -= 2
		return d.fail("bad escape")
	}
	return nil
}

// lowSurrogate completes the surrogate pair that high starts, or returns
// U+FFFD (leaving the input alone) when none follows.
func (d *jsonDecoder) lowSurrogate(high rune) rune {
	if d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
		save := d.i
		d.i += 2
		if low, ok := d.hex4(); ok {
			if r := utf16.DecodeRune(high, low); r != utf8.RuneError {
				return r
			}
		}
		d.i = save
	}
	return utf8.RuneError
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.s)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(d.s[d.i : d.i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}

// extPair is one ext member, collected before the map is sized.
type extPair struct{ k, v string }

// ext decodes extFields: an object or null. An empty object decodes as nil.
func (d *jsonDecoder) ext() (map[string]string, error) {
	if d.literal("null") {
		return nil, nil
	}
	if !d.consume('{') {
		return nil, d.fail("extFields is not an object")
	}
	var small [24]extPair
	pairs := small[:0]
	d.space()
	if !d.consume('}') {
		for {
			d.space()
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			d.space()
			if !d.consume(':') {
				return nil, d.fail("expected ':' after an ext key")
			}
			d.space()
			v, present, err := d.extValue()
			if err != nil {
				return nil, err
			}
			if present {
				pairs = append(pairs, extPair{k, v})
			}
			d.space()
			if d.consume(',') {
				continue
			}
			if d.consume('}') {
				break
			}
			return nil, d.fail("expected ',' or '}' in extFields")
		}
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.k] = p.v
	}
	return m, nil
}

// extValue decodes an ext value: a string, or a number or boolean taken as
// its text (fastjson's leniency); null reports present=false.
func (d *jsonDecoder) extValue() (v string, present bool, err error) {
	if d.i >= len(d.s) {
		return "", false, d.fail("missing ext value")
	}
	switch c := d.s[d.i]; {
	case c == '"':
		v, err = d.str()
		return v, err == nil, err
	case d.literal("null"):
		return "", false, nil
	case d.literal("true"):
		return "true", true, nil
	case d.literal("false"):
		return "false", true, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.i
		if err := d.number(); err != nil {
			return "", false, err
		}
		return d.s[start:d.i], true, nil
	}
	return "", false, d.fail("ext value is not a string")
}

// number consumes a JSON number.
func (d *jsonDecoder) number() error {
	d.consume('-')
	digits := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.i-digits > 1 && d.s[digits] == '0') {
		return d.fail("bad number")
	}
	if d.consume('.') {
		if !d.digits() {
			return d.fail("bad number")
		}
	}
	if d.consume('e') || d.consume('E') {
		if !d.consume('+') {
			d.consume('-')
		}
		if !d.digits() {
			return d.fail("bad number")
		}
	}
	return nil
}

func (d *jsonDecoder) digits() bool {
	start := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// skip consumes one value of any kind (an unknown key's).
func (d *jsonDecoder) skip(depth int) error {
	if depth > maxJSONDepth {
		return d.fail("nested too deeply")
	}
	if d.i >= len(d.s) {
		return d.fail("missing value")
	}
	switch c := d.s[d.i]; {
	case c == '"':
		_, err := d.str()
		return err
	case c == '{' || c == '[':
		return d.skipContainer(depth)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"), d.literal("false"), d.literal("null"):
		return nil
	}
	return d.fail("unexpected character")
}

func (d *jsonDecoder) skipContainer(depth int) error {
	closer := byte('}')
	if d.s[d.i] == '[' {
		closer = ']'
	}
	d.i++
	d.space()
	if d.consume(closer) {
		return nil
	}
	for {
		d.space()
		if closer == '}' {
			if _, err := d.str(); err != nil {
				return err
			}
			d.space()
			if !d.consume(':') {
				return d.fail("expected ':'")
			}
			d.space()
		}
		if err := d.skip(depth + 1); err != nil {
			return err
		}
		d.space()
		if d.consume(',') {
			continue
		}
		if d.consume(closer) {
			return nil
		}
		return d.fail("expected ',' or the end of a container")
	}
}
