package consumequeue_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
)

// TestDecodeEntryReadsFiles decodes a queue's files byte by byte, as an
// offline checker does, and finds placeholders, the entries appended and
// the unused tail.
func TestDecodeEntryReadsFiles(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			require.NoError(t, q.Append(25, entry(25)))
			appendN(t, q, 26, 32)
			require.NoError(t, q.Close())

			var placeholders, unused int
			var got []int64 // queue offsets of real entries
			for _, base := range []int64{400, 600} {
				raw := readFile(t, e, fileName(base))
				require.Len(t, raw, 10*consumequeue.EntrySize)
				for i := 0; i < len(raw); i += consumequeue.EntrySize {
					b := raw[i:]
					qo := (base + int64(i)) / consumequeue.EntrySize
					en := consumequeue.DecodeEntry(b)
					switch {
					case consumequeue.IsUnusedEntry(b):
						unused++
						assert.False(t, en.Valid())
					case en.IsPlaceholder():
						placeholders++
						assert.True(t, en.Valid())
						assert.Equal(t, int32(math.MaxInt32), en.Size)
					default:
						assert.Equal(t, entry(qo), en, "queue offset %d", qo)
						got = append(got, qo)
					}
				}
			}
			assert.Equal(t, 5, placeholders) // 20..24
			assert.Equal(t, 8, unused)       // 32..39
			assert.Equal(t, []int64{25, 26, 27, 28, 29, 30, 31}, got)
		})
	}
}

func TestIsPlaceholder(t *testing.T) {
	assert.True(t, consumequeue.Entry{Offset: 0, Size: math.MaxInt32}.IsPlaceholder())
	assert.False(t, consumequeue.Entry{Offset: 0, Size: math.MaxInt32, TagsCode: 1}.IsPlaceholder())
	assert.False(t, consumequeue.Entry{Offset: 1, Size: math.MaxInt32}.IsPlaceholder())
	assert.False(t, entry(3).IsPlaceholder())
}

func readFile(t *testing.T, e env, name string) []byte {
	t.Helper()
	b, err := fsx.ReadFile(e.fs, filepath.Join(e.dir, name))
	require.NoError(t, err)
	return b
}
