package remotingapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleBatch(t testing.TB) []byte {
	b, err := appendBatch(nil, []batchEntry{
		{Flag: 0, Body: []byte("hello"), Properties: []byte("TAGS\x01TagA\x02KEYS\x01k1 k2\x02")},
		{Flag: 7, Body: []byte{}, Properties: nil},
		{Flag: -1, Body: []byte("x"), Properties: []byte("A\x01\x02")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeBatch(t *testing.T) {
	b := sampleBatch(t)
	got, err := decodeBatch(b)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, "hello", string(got[0].Body))
	assert.Equal(t, "TAGS\x01TagA\x02KEYS\x01k1 k2\x02", string(got[0].Properties))
	assert.Equal(t, int32(7), got[1].Flag)
	assert.Empty(t, got[1].Body)
	assert.Equal(t, int32(-1), got[2].Flag)

	for _, bad := range [][]byte{nil, b[:len(b)-1], b[:21], append(append([]byte(nil), b...), 0)} {
		_, err := decodeBatch(bad)
		assert.ErrorIs(t, err, errBadHeader)
	}
	neg := append([]byte(nil), b...)
	neg[16] = 0x80 // bodyLen negative
	_, err = decodeBatch(neg)
	assert.ErrorIs(t, err, errBadHeader)
}

// FuzzDecodeBatch: decoding never panics, and what decodes re-encodes to a
// body that decodes to the same messages.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(sampleBatch(f))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeBatch(b)
		if err != nil {
			return
		}
		again, err := appendBatch(nil, entries)
		require.NoError(t, err)
		entries2, err := decodeBatch(again)
		require.NoError(t, err)
		require.Equal(t, entries, entries2)
		require.Len(t, again, len(b), "magic and CRC aside, the encoding is the input's")
	})
}
