package epoch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/replication/epoch"
)

func TestWireRoundTrip(t *testing.T) {
	many := make([]epoch.Entry, 1000) // more than one read chunk
	for i := range many {
		many[i] = epoch.Entry{Epoch: int32(i * 2), StartOffset: int64(i) << 30}
	}
	for _, list := range [][]epoch.Entry{nil, es(1, 0), es(1, 0, 4, 0, 1<<31-1, 1<<62), many} {
		b := epoch.AppendWire([]byte("prefix"), list)
		require.Len(t, b, len("prefix")+4+12*len(list))
		r := bytes.NewReader(b[len("prefix"):])
		got, err := epoch.ReadWire(r)
		require.NoError(t, err)
		if len(list) == 0 {
			assert.Empty(t, got)
		} else {
			assert.Equal(t, list, got)
		}
		assert.Zero(t, r.Len(), "reads exactly the list")
	}
}

func TestReadWireRefuses(t *testing.T) {
	good := epoch.AppendWire(nil, es(1, 0, 2, 300, 3, 700))
	count := func(n uint32, rest []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), rest...) }
	tests := []struct {
		name    string
		in      []byte
		wantIs  error
		wantMsg string
	}{
		{"nothing", nil, io.EOF, "read list count"},
		{"torn count", good[:2], io.ErrUnexpectedEOF, "read list count"},
		{"count over the limit", count(epoch.MaxEntries+1, nil), epoch.ErrInvalidEntry, "peer announced 65537 entries, more than MaxEntries (65536)"},
		{"huge count", count(0xFFFFFFFF, nil), epoch.ErrInvalidEntry, "peer announced 4294967295 entries"},
		{"torn entry", good[:4+12+5], io.ErrUnexpectedEOF, "entry 1 of 3"},
		{"missing entries", good[:4+12], io.ErrUnexpectedEOF, "entry 1 of 3"},
		{"limit announced, nothing sent", count(epoch.MaxEntries, nil), io.ErrUnexpectedEOF, "entry 0 of 65536"},
		{"out of order", epoch.AppendWire(nil, []epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 2, StartOffset: 5}}), epoch.ErrInvalidEntry, "peer's entry 1 (epoch 2 at offset 5): epoch 2 is not greater"},
		{"negative start", epoch.AppendWire(nil, []epoch.Entry{{Epoch: 1, StartOffset: -1}}), epoch.ErrInvalidEntry, "start offset -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := epoch.ReadWire(bytes.NewReader(tt.in))
			require.ErrorIs(t, err, tt.wantIs)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.Nil(t, got)
		})
	}
}

// FuzzReadWire: ReadWire accepts exactly the AppendWire encoding of a valid
// list (reading no further), refuses the rest with an error, never panics.
func FuzzReadWire(f *testing.F) {
	f.Add(epoch.AppendWire(nil, es(1, 0, 2, 300, 3, 700)))
	f.Add(epoch.AppendWire(nil, nil))
	f.Add([]byte{0, 1, 0, 0})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3})
	f.Add(epoch.AppendWire(nil, []epoch.Entry{{Epoch: 3, StartOffset: 10}, {Epoch: 2, StartOffset: 20}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		got, err := epoch.ReadWire(r)
		if err != nil {
			require.Nil(t, got)
			require.True(t, errors.Is(err, epoch.ErrInvalidEntry) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
			return
		}
		require.NoError(t, epoch.Validate(got))
		n := len(b) - r.Len()
		require.Equal(t, b[:n], epoch.AppendWire(nil, got))
	})
}

// TestAnnouncedCountAllocatesOnlyWhatArrives: a file header or a peer that
// announces MaxEntries entries and sends none costs a few bytes, not the
// ~1 MiB a list of MaxEntries would take.
func TestAnnouncedCountAllocatesOnlyWhatArrives(t *testing.T) {
	const runs = 50
	wire := binary.BigEndian.AppendUint32(nil, epoch.MaxEntries)
	file := epochHeader(1, 0, epoch.MaxEntries)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		_, err := epoch.ReadWire(bytes.NewReader(wire))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		_, err = epoch.Decode(file)
		require.ErrorIs(t, err, epoch.ErrCorrupt)
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	assert.Less(t, perRun, uint64(64<<10), "bytes allocated per ReadWire and Decode")
}
