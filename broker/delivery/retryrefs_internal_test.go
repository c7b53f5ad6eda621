package delivery

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetryRefsRoundTrip(t *testing.T) {
	refs := []RetryRef{{Phys: 0, Size: 90, MaxTimes: 16}, {Phys: 1 << 40, Size: 4 << 20, MaxTimes: 1}}
	body := appendRetryRefs(nil, refs)
	assert.Len(t, body, len(retryRefsMagic)+2*retryRefSize)
	got, err := parseRetryRefs(body)
	require.NoError(t, err)
	assert.Equal(t, refs, got)

	for name, bad := range map[string][]byte{
		"empty":         nil,
		"magic only":    []byte(retryRefsMagic),
		"wrong version": append([]byte("GRR\x02"), body[len(retryRefsMagic):]...),
		"torn":          body[:len(body)-1],
		"negative":      appendRetryRefs(nil, []RetryRef{{Phys: -1, Size: 90, MaxTimes: 16}}),
		"no size":       appendRetryRefs(nil, []RetryRef{{Phys: 0, Size: 0, MaxTimes: 16}}),
		"no max":        appendRetryRefs(nil, []RetryRef{{Phys: 0, Size: 90, MaxTimes: 0}}),
	} {
		_, err := parseRetryRefs(bad)
		assert.Error(t, err, name)
	}
}

// FuzzParseRetryRefs: any body parses or fails with an error, and what
// parses encodes back to the same bytes.
func FuzzParseRetryRefs(f *testing.F) {
	f.Add(appendRetryRefs(nil, []RetryRef{{Phys: 7, Size: 90, MaxTimes: 16}}))
	f.Add([]byte("GRR\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		refs, err := parseRetryRefs(body)
		if err != nil {
			return
		}
		assert.Equal(t, body, appendRetryRefs(nil, refs))
	})
}
