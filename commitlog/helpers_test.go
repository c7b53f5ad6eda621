package commitlog_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

var (
	bornHost  = netip.MustParseAddrPort("10.0.0.5:53211")
	storeHost = netip.MustParseAddrPort("192.168.1.10:10911")
)

// record encodes message i with a body of bodySize bytes derived from i.
func record(tb testing.TB, i, bodySize int) []byte {
	tb.Helper()
	b, err := message.Append(nil, messageFor(i, bodySize), true)
	require.NoError(tb, err)
	return b
}

func messageFor(i, bodySize int) *message.Message {
	body := make([]byte, bodySize)
	for j := range body {
		body[j] = byte(i*31 + j)
	}
	return &message.Message{
		Topic:         "T",
		QueueID:       int32(i % 4),
		Flag:          int32(i),
		BornTimestamp: 1_700_000_000_000 + int64(i),
		BornHost:      bornHost,
		StoreHost:     storeHost,
		Body:          body,
		Properties:    message.Properties{{Key: message.PropUniqKey, Value: fmt.Sprintf("ID%08d", i)}},
	}
}

// expected returns rec as the log stores it at off with store time ts.
func expected(tb testing.TB, rec []byte, off, ts int64) []byte {
	tb.Helper()
	b := bytes.Clone(rec)
	message.SetPhysicalOffset(b, off)
	message.SetStoreTimestamp(b, ts)
	require.NoError(tb, message.SealCRC(b))
	return b
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func open(t *testing.T, cfg commitlog.Config) *commitlog.Log {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	l, err := commitlog.Open(t.Context(), cfg)
	require.NoError(t, err)
	return l
}

type stored struct {
	off int64
	b   []byte
}

// readAll walks the log from MinOffset to MaxOffset.
func readAll(tb testing.TB, l *commitlog.Log) []stored {
	tb.Helper()
	var out []stored
	off := l.MinOffset()
	for {
		r, next, err := l.ReadRecord(off)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			return out
		}
		require.NoError(tb, err, "read at %d", off)
		// ReadRecord may step over a filler: the record starts at next-len.
		out = append(out, stored{off: next - int64(len(r.B)), b: bytes.Clone(r.B)})
		r.Release()
		off = next
	}
}

// copyAll walks the log from MinOffset to MaxOffset with CopyRecords and
// a buffer of bufSize bytes, checking that each call returns whole records.
func copyAll(tb testing.TB, l *commitlog.Log, bufSize int) []stored {
	tb.Helper()
	var out []stored
	buf := make([]byte, bufSize)
	off := l.MinOffset()
	for {
		recs, start, next, err := l.CopyRecords(off, buf)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			return out
		}
		require.NoError(tb, err, "copy at %d", off)
		require.NotEmpty(tb, recs, "copy at %d", off)
		require.GreaterOrEqual(tb, start, off)
		require.Equal(tb, start+int64(len(recs)), next)
		for p := 0; p < len(recs); {
			size, _, _ := message.RecordSize(recs[p:])
			require.GreaterOrEqual(tb, int(size), message.MinRecordSize)
			require.LessOrEqual(tb, p+int(size), len(recs))
			out = append(out, stored{off: start + int64(p), b: bytes.Clone(recs[p : p+int(size)])})
			p += int(size)
		}
		off = next
	}
}

// appendN appends n records of bodySize, one per Append, and returns what
// the log stored.
func appendN(t *testing.T, l *commitlog.Log, from, n, bodySize int) []stored {
	t.Helper()
	var out []stored
	for i := from; i < from+n; i++ {
		rec := record(t, i, bodySize)
		res, err := l.Append(t.Context(), rec, nil)
		require.NoError(t, err)
		require.Equal(t, 1, res.Records)
		out = append(out, stored{off: res.Offset, b: expected(t, rec, res.Offset, res.StoreTimestamp)})
	}
	return out
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if _, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && len(e.Name()) == 20 {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// appendUntil appends rec until the log ends at or after end, and returns
// where it ends.
func appendUntil(tb testing.TB, l *commitlog.Log, rec []byte, end int64) int64 {
	tb.Helper()
	var r commitlog.AppendResult
	for r.End < end {
		var err error
		r, err = l.Append(tb.Context(), rec, nil)
		require.NoError(tb, err)
	}
	return r.End
}

// pageCount turns a page counter of the log (MappedPages, ResidentPages)
// into one that fails the test on an error.
func pageCount(tb testing.TB, count func(off, n int64) (int, error)) func(off, n int64) int {
	return func(off, n int64) int {
		tb.Helper()
		r, err := count(off, n)
		require.NoError(tb, err)
		return r
	}
}
