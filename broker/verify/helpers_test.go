package verify_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const segBytes = 64 << 10

var topics = []string{"Orders", "Payments", "Audit"}

// msg is message i of a test store: 3 topics × 2 queues, 3 tags, two KEYS
// (and the UNIQ_KEY the store adds), and a body large enough that a few
// hundred records fill several 64 KiB segments.
func msg(i int) *message.Message {
	return &message.Message{
		Topic: topics[i%3], QueueID: int32(i % 2), BornTimestamp: int64(i),
		Body: fmt.Appendf(nil, "body-%d-%s", i, strings.Repeat("x", 300)),
		Properties: message.Properties{
			{Key: message.PropTags, Value: []string{"TagA", "TagB", "TagC"}[(i/3)%3]},
			{Key: message.PropKeys, Value: fmt.Sprintf("k%d order-%d", i, i/10)},
		},
	}
}

func storeConfig(t *testing.T, dir string) store.Config {
	return store.Config{
		Root: dir, QueueEntriesPerFile: 64, IndexSlots: 101, IndexEntries: 400,
		Log:    commitlog.Config{SegmentBytes: segBytes, CleanInterval: -1},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// testStore is a closed store written by the real broker store.
type testStore struct {
	dir     string
	results []store.PutResult // one per message, in order
}

// makeStore writes n messages (msg(0..n-1)) in batches of up to 4 and
// closes the store.
func makeStore(t *testing.T, n int) testStore {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := store.Open(t.Context(), storeConfig(t, dir))
	require.NoError(t, err)
	var out []store.PutResult
	for i := 0; i < n; {
		k := min(1+i%4, n-i)
		batch := make([]*message.Message, k)
		for j := range batch {
			batch[j] = msg(i + j)
		}
		res, err := putMsgs(t.Context(), s, batch)
		require.NoError(t, err)
		out = append(out, res...)
		i += k
	}
	require.NoError(t, s.Close())
	return testStore{dir: dir, results: out}
}

// copyDir copies the tree at src to a fresh directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	require.NoError(t, err)
	return dst
}

// treeHash describes every file under dir: path, mode, size and content hash.
func treeHash(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = "dir " + info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%s %d %x", info.Mode(), info.Size(), sha256.Sum256(b))
		return nil
	})
	require.NoError(t, err)
	return out
}

func runVerify(t *testing.T, dir string) verify.Report {
	t.Helper()
	rep, err := verify.Run(t.Context(), fsx.OS, dir, verify.Options{MaxErrors: -1})
	require.NoError(t, err)
	return rep
}

// segPath is the path of the segment holding log offset off.
func segPath(dir string, off int64) string {
	return filepath.Join(dir, "commitlog", fsx.OffsetName(off/segBytes*segBytes))
}

// mutateFile changes a file's bytes in place.
func mutateFile(t *testing.T, path string, f func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	f(b)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// findProblem returns the first problem of kind in file at offset, or fails.
func findProblem(t *testing.T, rep verify.Report, kind verify.Kind, file string, off int64) verify.Problem {
	t.Helper()
	for _, p := range rep.Errors {
		if p.Kind == kind && p.File == file && p.Offset == off {
			return p
		}
	}
	require.Failf(t, "problem not reported", "want %s problem in %s at offset %d; got:\n%s", kind, file, off, describe(rep))
	return verify.Problem{}
}

func describe(rep verify.Report) string {
	var b strings.Builder
	for _, p := range rep.Errors {
		fmt.Fprintf(&b, "  %s %s\n", p.Kind, p)
	}
	return b.String()
}

// putMsgs stores msgs as the broker stores message structs: encoded once
// (store.Encode), then put (PutBatch).
func putMsgs(ctx context.Context, s *store.Store, msgs []*message.Message) ([]store.PutResult, error) {
	b, err := s.Encode(msgs)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return s.PutBatch(ctx, b)
}
