package epoch_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/replication/epoch"
)

// es builds a list from epoch, start pairs.
func es(pairs ...int64) []epoch.Entry {
	var out []epoch.Entry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, epoch.Entry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func TestLastCommonPoint(t *testing.T) {
	tests := []struct {
		name            string
		mine, theirs    []epoch.Entry
		myEnd, theirEnd int64
		wantOff         int64
		wantOK          bool
	}{
		{"both empty", nil, nil, 0, 0, 0, false},
		{"mine empty", nil, es(1, 0), 0, 500, 0, false},
		{"theirs empty", es(1, 0), nil, 500, 0, 0, false},
		{"equal logs", es(1, 0, 2, 300), es(1, 0, 2, 300), 800, 800, 800, true},
		{"I am behind in their current epoch", es(1, 0, 2, 300), es(1, 0, 2, 300), 500, 800, 500, true},
		{"I am ahead in the shared epoch", es(1, 0, 2, 300), es(1, 0, 2, 300), 900, 800, 800, true},
		{"behind by whole epochs", es(1, 0), es(1, 0, 2, 300, 3, 700), 200, 900, 200, true},
		{"ahead in an epoch they ended", es(1, 0), es(1, 0, 2, 300), 500, 900, 300, true},
		// I was master of epoch 3 and wrote 1000..1500 that nobody copied;
		// they were elected for epoch 4 at 1000.
		{"diverged tails, new epoch at my epoch's start", es(1, 0, 2, 500, 3, 1000), es(1, 0, 2, 500, 4, 1000), 1500, 2000, 1000, true},
		{"diverged tails, they ended the shared epoch first", es(1, 0, 2, 500, 3, 1300), es(1, 0, 2, 500, 4, 1200), 1500, 2000, 1200, true},
		{"diverged tails, I ended the shared epoch first", es(1, 0, 2, 500, 3, 1100), es(1, 0, 2, 500, 4, 1200), 1500, 2000, 1100, true},
		{"same epoch at another start is not common", es(1, 0, 2, 500, 3, 900), es(1, 0, 2, 500, 3, 1000), 1500, 2000, 900, true},
		{"skipped epoch numbers", es(1, 0, 3, 400, 7, 900), es(1, 0, 3, 400, 8, 1000, 9, 1200), 1100, 1500, 900, true},
		{"skipped numbers, only the oldest in common", es(2, 0, 5, 100), es(2, 0, 6, 50, 9, 80), 300, 400, 50, true},
		{"no epoch in common", es(2, 0, 4, 100), es(1, 0, 3, 100), 200, 300, 0, false},
		{"same epochs, different starts", es(1, 10, 2, 100), es(1, 0, 2, 50), 200, 300, 0, false},
		{"newest common wins over older ones", es(1, 0, 2, 100, 3, 200), es(1, 0, 2, 100, 3, 200, 4, 250), 240, 400, 240, true},
		{"empty epoch in common", es(1, 0, 2, 300, 3, 300), es(1, 0, 2, 300, 3, 300, 4, 600), 300, 700, 300, true},
		{"my entry lies beyond my log end", es(1, 0, 2, 800), es(1, 0, 2, 800), 600, 1000, 600, true},
		{"an older entry of mine ends beyond my log end", es(1, 0, 2, 800), es(1, 0, 3, 900), 600, 1000, 600, true},
		{"negative end of mine", es(1, 0), es(1, 0), -1, 100, 0, false},
		{"negative end of theirs", es(1, 0), es(1, 0), 100, -1, 0, false},
		{"both ends zero", es(1, 0), es(1, 0), 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, epoch.Validate(tt.mine))
			require.NoError(t, epoch.Validate(tt.theirs))
			off, ok := epoch.LastCommonPoint(tt.mine, tt.theirs, tt.myEnd, tt.theirEnd)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.wantOff, off)
			if ok {
				assert.LessOrEqual(t, off, min(tt.myEnd, tt.theirEnd), "never beyond either log")
			}
		})
	}
}

func TestEndOf(t *testing.T) {
	list := es(1, 0, 2, 300, 3, 300, 4, 700)
	tests := []struct {
		i      int
		logEnd int64
		want   int64
	}{
		{0, 1000, 300},
		{1, 1000, 300}, // an epoch that ended with no data
		{2, 1000, 700},
		{3, 1000, 1000},
		{3, 700, 700},
		{2, 500, 500}, // the log was truncated inside epoch 3
		{3, 500, 500}, // and below epoch 4's start
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, epoch.EndOf(list, tt.i, tt.logEnd), "EndOf(%d, %d)", tt.i, tt.logEnd)
	}
}

func TestIndexAt(t *testing.T) {
	list := es(1, 100, 2, 300, 3, 300, 4, 700)
	tests := []struct {
		offset int64
		want   int
		ok     bool
	}{
		{-1, 0, false},
		{0, 0, false},
		{99, 0, false},
		{100, 0, true},
		{299, 0, true},
		{300, 2, true}, // epoch 2 ended with no data: 300 is epoch 3's
		{699, 2, true},
		{700, 3, true},
		{1 << 40, 3, true},
	}
	for _, tt := range tests {
		i, ok := epoch.IndexAt(list, tt.offset)
		assert.Equal(t, tt.ok, ok, "IndexAt(%d)", tt.offset)
		assert.Equal(t, tt.want, i, "IndexAt(%d)", tt.offset)
	}
	_, ok := epoch.IndexAt(nil, 0)
	assert.False(t, ok, "empty list")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		list    []epoch.Entry
		wantErr string
	}{
		{"empty", nil, ""},
		{"ordered", es(0, 0, 1, 0, 5, 10), ""},
		{"equal epochs", es(1, 0, 1, 10), "entry 1 (epoch 1 at offset 10): epoch 1 is not greater than the previous entry's 1"},
		{"decreasing epochs", es(3, 0, 2, 10), "entry 1 (epoch 2 at offset 10): epoch 2 is not greater"},
		{"decreasing starts", es(1, 10, 2, 5), "entry 1 (epoch 2 at offset 5): start offset 5 is below the previous entry's 10"},
		{"negative epoch", es(-1, 0), "entry 0 (epoch -1 at offset 0): epoch -1 is negative"},
		{"negative start", es(1, -5), "entry 0 (epoch 1 at offset -5): start offset -5 is negative"},
		{"too many", make([]epoch.Entry, epoch.MaxEntries+1), "65537 entries, more than MaxEntries (65536)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := epoch.Validate(tt.list)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, epoch.ErrInvalidEntry)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}
