package verify_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/internal/fsx"
)

// bodyOff is where the body starts in a record with IPv4 hosts.
const bodyOff = 88

// want is a problem a damage case must produce.
type want struct {
	kind     verify.Kind
	file     string
	offset   int64
	contains string // in the message
	queueOff *int64
}

func TestDamage(t *testing.T) {
	ts := makeStore(t, numMessages)
	res := ts.results
	lastSeg := res[len(res)-1].PhysicalOffset / segBytes
	// sealed: a record in segment 0 with another after it; active: one in
	// the last segment with data, not its last record; last: the last record.
	sealed := res[5]
	var active store.PutResult
	for _, r := range res[:len(res)-1] {
		if r.PhysicalOffset/segBytes == lastSeg {
			active = r
			break
		}
	}
	require.Positive(t, lastSeg, "the test wants several segments")
	require.NotZero(t, active.PhysicalOffset)
	last := res[len(res)-1]
	q3 := int64(3)

	tests := []struct {
		name   string
		damage func(t *testing.T, dir string) want
	}{
		{"record body bit flip in a sealed segment", func(t *testing.T, dir string) want {
			p := segPath(dir, sealed.PhysicalOffset)
			mutateFile(t, p, func(b []byte) { b[sealed.PhysicalOffset%segBytes+bodyOff+3] ^= 0x04 })
			return want{verify.KindRecord, p, sealed.PhysicalOffset, "valid data after damage", nil}
		}},
		{"record body bit flip in the active segment", func(t *testing.T, dir string) want {
			p := segPath(dir, active.PhysicalOffset)
			mutateFile(t, p, func(b []byte) { b[active.PhysicalOffset%segBytes+bodyOff+10] ^= 0x80 })
			return want{verify.KindRecord, p, active.PhysicalOffset, "valid data after damage", nil}
		}},
		{"bit flip in the last record", func(t *testing.T, dir string) want {
			p := segPath(dir, last.PhysicalOffset)
			mutateFile(t, p, func(b []byte) { b[last.PhysicalOffset%segBytes+bodyOff] ^= 0x01 })
			return want{verify.KindRecord, p, last.PhysicalOffset, "torn tail", nil}
		}},
		{"garbage after the last record", func(t *testing.T, dir string) want {
			p := segPath(dir, last.PhysicalOffset)
			end := recordEnd(t, dir, last.PhysicalOffset)
			mutateFile(t, p, func(b []byte) { copy(b[end%segBytes+100:], "garbage") })
			return want{verify.KindRecord, p, end, "torn tail", nil}
		}},
		{"zeroed range in a sealed segment", func(t *testing.T, dir string) want {
			p := segPath(dir, sealed.PhysicalOffset)
			mutateFile(t, p, func(b []byte) { clear(b[sealed.PhysicalOffset%segBytes:][:500]) })
			return want{verify.KindRecord, p, sealed.PhysicalOffset, "valid data after damage: zeros", nil}
		}},
		{"truncated segment file", func(t *testing.T, dir string) want {
			p := segPath(dir, 0)
			cut := int64(30_000)
			require.NoError(t, os.Truncate(p, cut))
			return want{verify.KindSegment, p, cut, "truncated", nil}
		}},
		{"truncated segment file cuts a record", func(t *testing.T, dir string) want {
			p := segPath(dir, 0)
			cut := int64(30_000)
			require.NoError(t, os.Truncate(p, cut))
			return want{verify.KindRecord, p, recordAround(t, res, cut), "past the end of the file", nil}
		}},
		{"consume-queue offset bit flip", func(t *testing.T, dir string) want {
			p := cqFile(dir, "Orders", 0, 0)
			mutateFile(t, p, func(b []byte) { b[3*20+7] ^= 0x02 })
			return want{verify.KindConsumeQueue, p, 3 * 20, "no valid record starts there", &q3}
		}},
		{"consume-queue size bit flip", func(t *testing.T, dir string) want {
			p := cqFile(dir, "Orders", 0, 0)
			mutateFile(t, p, func(b []byte) { b[3*20+11] ^= 0x01 })
			return want{verify.KindConsumeQueue, p, 3 * 20, "the record is", &q3}
		}},
		{"consume-queue tags code bit flip", func(t *testing.T, dir string) want {
			p := cqFile(dir, "Orders", 0, 0)
			mutateFile(t, p, func(b []byte) { b[3*20+19] ^= 0x08 })
			return want{verify.KindConsumeQueue, p, 3 * 20, "tags code", &q3}
		}},
		{"consume-queue entry after the zero tail", func(t *testing.T, dir string) want {
			p := cqFile(dir, "Orders", 0, 64*20)
			off := lastEntryOff(t, p) + 3*20
			mutateFile(t, p, func(b []byte) { b[off+7] = 1 })
			qo := 64 + off/20
			return want{verify.KindConsumeQueue, p, off, "after the queue's unused (zero) tail", &qo}
		}},
		{"consume queue ends short of the log", func(t *testing.T, dir string) want {
			qdir := filepath.Join(dir, "consumequeue", "Orders", "0")
			files, err := os.ReadDir(qdir)
			require.NoError(t, err)
			for _, f := range files[1:] {
				require.NoError(t, os.Remove(filepath.Join(qdir, f.Name())))
			}
			mutateFile(t, cqFile(dir, "Orders", 0, 0), func(b []byte) { clear(b[10*20:]) })
			q10 := int64(10)
			return want{verify.KindConsumeQueue, qdir, 0, "ends at queue offset 10, but the commit log holds its messages up to", &q10}
		}},
		{"consume queue missing", func(t *testing.T, dir string) want {
			qdir := filepath.Join(dir, "consumequeue", "Payments", "1")
			require.NoError(t, os.RemoveAll(qdir))
			q0 := int64(0)
			return want{verify.KindConsumeQueue, qdir, 0, "entries missing", &q0}
		}},
		{"index phyOffset points mid-record", func(t *testing.T, dir string) want {
			p, e := indexEntry(t, dir, 7)
			mutateFile(t, p, func(b []byte) { binary.BigEndian.PutUint64(b[e.FileOffset+4:], uint64(e.PhyOffset+17)) })
			return want{verify.KindIndex, p, e.FileOffset, "no valid record starts there", nil}
		}},
		{"index keyHash changed", func(t *testing.T, dir string) want {
			p, e := indexEntry(t, dir, 8)
			mutateFile(t, p, func(b []byte) { binary.BigEndian.PutUint32(b[e.FileOffset:], uint32(e.KeyHash^0x100)) })
			return want{verify.KindIndex, p, e.FileOffset, "matches none of the record's keys", nil}
		}},
		{"index prevIndex not below its entry", func(t *testing.T, dir string) want {
			p, e := indexEntry(t, dir, 9)
			mutateFile(t, p, func(b []byte) { binary.BigEndian.PutUint32(b[e.FileOffset+16:], uint32(e.Number)) })
			return want{verify.KindIndex, p, e.FileOffset, "prevIndex", nil}
		}},
		{"index slot out of range", func(t *testing.T, dir string) want {
			p, _ := indexEntry(t, dir, 1)
			mutateFile(t, p, func(b []byte) { binary.BigEndian.PutUint32(b[40+4*50:], 100_000) })
			return want{verify.KindIndex, p, 40 + 4*50, "hash slot 50", nil}
		}},
		{"index header count impossible", func(t *testing.T, dir string) want {
			p, _ := indexEntry(t, dir, 1)
			mutateFile(t, p, func(b []byte) { binary.BigEndian.PutUint32(b[36:], 1_000_000) })
			return want{verify.KindIndex, p, 0, "indexCount", nil}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDir(t, ts.dir)
			w := tt.damage(t, dir)
			rep := runVerify(t, dir)
			require.False(t, rep.Clean)
			require.Equal(t, len(rep.Errors), rep.ErrorCount)
			p := findProblem(t, rep, w.kind, w.file, w.offset)
			assert.Contains(t, p.Message, w.contains)
			if w.queueOff != nil {
				require.NotNil(t, p.QueueOffset)
				assert.Equal(t, *w.queueOff, *p.QueueOffset)
			}
			if w.kind == verify.KindRecord {
				assert.Equal(t, w.offset%segBytes, p.FileOffset)
			}
		})
	}
}

// recordEnd is the log offset just past the record at off.
func recordEnd(t *testing.T, dir string, off int64) int64 {
	t.Helper()
	b, err := os.ReadFile(segPath(dir, off))
	require.NoError(t, err)
	return off + int64(binary.BigEndian.Uint32(b[off%segBytes:]))
}

// recordAround returns the offset of the record holding log offset off.
func recordAround(t *testing.T, res []store.PutResult, off int64) int64 {
	t.Helper()
	start := int64(-1)
	for _, r := range res {
		if r.PhysicalOffset <= off && r.PhysicalOffset > start {
			start = r.PhysicalOffset
		}
	}
	require.GreaterOrEqual(t, start, int64(0))
	return start
}

func cqFile(dir, topic string, qid int, base int64) string {
	return filepath.Join(dir, "consumequeue", topic, string(rune('0'+qid)), fsx.OffsetName(base))
}

// lastEntryOff is the byte offset of the last non-zero entry of a queue file.
func lastEntryOff(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	last := int64(-1)
	for i := 0; i < len(b); i += 20 {
		for _, c := range b[i : i+20] {
			if c != 0 {
				last = int64(i)
				break
			}
		}
	}
	require.GreaterOrEqual(t, last, int64(0))
	require.Less(t, last+3*20, int64(len(b)), "the test wants a zero tail")
	return last
}

// indexEntry returns the oldest index file and its entry number n.
func indexEntry(t *testing.T, dir string, n int32) (string, index.ScanEntry) {
	t.Helper()
	idir := filepath.Join(dir, "index")
	names, err := os.ReadDir(idir)
	require.NoError(t, err)
	p := filepath.Join(idir, names[0].Name())
	var got index.ScanEntry
	_, err = index.ScanFile(fsx.OS, p, nil, func(e index.ScanEntry) error {
		if e.Number == n {
			got = e
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, n, got.Number)
	return p, got
}
