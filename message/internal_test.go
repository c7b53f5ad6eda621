package message

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStoredMagics(t *testing.T) {
	v1, blank := magicV1, magicBlank // variables: the conversions wrap
	assert.Equal(t, MagicV1, int32(v1))
	assert.Equal(t, MagicBlank, int32(blank))
	assert.Len(t, crcTailTemplate, CRCTailSize)
}

func TestWriteCRCDigits(t *testing.T) {
	tests := []struct {
		crc  uint32
		want string
	}{
		{0, "0000000000"},
		{7, "7000000000"},
		{12345, "5432100000"}, // least significant digit first, zero padded
		{2147483647, "7463847412"},
		{4294967295, "5927694924"},
	}
	for _, tt := range tests {
		tail := []byte(crcTailTemplate)
		writeCRCDigits(tail, tt.crc)
		assert.Equal(t, PropCRC+"\x01"+tt.want+"\x02", string(tail))
	}
}
