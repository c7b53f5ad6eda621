package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBodyIsDerivedFromID(t *testing.T) {
	a, b := Body("p0-000001"), Body("p0-000002")
	assert.Equal(t, a, Body("p0-000001"), "deterministic")
	assert.NotEqual(t, a, b)
	id, ok := IDOfBody(a)
	require.True(t, ok)
	assert.Equal(t, "p0-000001", id)
	assert.True(t, Verify("p0-000001", len(a), CRC(a)))
	assert.False(t, Verify("p0-000002", len(a), CRC(a)))
	a[len(a)-1] ^= 1
	assert.False(t, Verify("p0-000001", len(a), CRC(a)))
	for i := range 1000 {
		n := len(Body(string(rune('a'+i%26)) + strings.Repeat("x", i%7)))
		assert.GreaterOrEqual(t, n, 32)
		assert.LessOrEqual(t, n, 8+1+543)
	}
	_, ok = IDOfBody([]byte("no separator"))
	assert.False(t, ok)
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := Create(path)
	require.NoError(t, err)
	want := []Event{
		{Kind: Send, ID: "p0-1", Outcome: Invoke, Time: 1},
		{Kind: Send, ID: "p0-1", Outcome: OK, Queue: 3, Offset: 7, Phys: 1234, Broker: "broker-a", Time: 2},
		{Kind: Drain, ID: "p0-1", Queue: 3, Offset: 7, Len: 10, CRC: 99, Time: 3},
	}
	w.Add(want[:2]...)
	require.NoError(t, w.Sync())
	require.NoError(t, w.Append(want[2]))
	require.NoError(t, w.Close())
	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// A writer killed mid-line leaves a torn last line: skipped.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"kind":"send","id":"p0-2","outc`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err = Read(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Damage in the middle is an error.
	require.NoError(t, os.WriteFile(path, []byte("{\"kind\":\"send\"}\nnot json\n{}\n"), 0o644))
	_, err = Read(path)
	require.ErrorContains(t, err, "line 2")
}
