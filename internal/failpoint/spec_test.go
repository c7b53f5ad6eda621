package failpoint

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTerm(t *testing.T) {
	tests := []struct {
		name, in string
		want     Term
	}{
		{"plain", "kill", Term{Action: Kill}},
		{"from", "kill@40", Term{Action: Kill, From: 40}},
		{"times and from", "1*kill@40", Term{Action: Kill, Times: 1, From: 40}},
		{"percent", "25%error(EIO)", Term{Action: Error, Arg: "EIO", Percent: 25}},
		{"all", "50%3*sleep(2s)@7", Term{Action: Sleep, Sleep: 2 * time.Second, Percent: 50, Times: 3, From: 7}},
		{"arg with specials", "error(a@b 5% 2*x)", Term{Action: Error, Arg: "a@b 5% 2*x"}},
		{"panic", "panic(boom)", Term{Action: Panic, Arg: "boom"}},
		{"off", " off ", Term{Action: Off}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTerm(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := ParseTerm(got.String())
			require.NoError(t, err, "String() = %q", got.String())
			assert.Equal(t, got, again)
		})
	}
}

func TestParseTermErrors(t *testing.T) {
	for _, in := range []string{"", "explode", "kill@0", "kill@x", "0*kill", "101%kill", "sleep", "sleep(soon)",
		"kill(now)", "error(open", "off(1)"} {
		_, err := ParseTerm(in)
		assert.Error(t, err, "%q", in)
	}
}

func TestParseSpec(t *testing.T) {
	got, err := ParseSpec(" commitlog/flush-before-sync=1*kill@3; ;fsx/atomic-before-rename=error ")
	require.NoError(t, err)
	assert.Equal(t, map[string]Term{
		"commitlog/flush-before-sync": {Action: Kill, Times: 1, From: 3},
		"fsx/atomic-before-rename":    {Action: Error},
	}, got)
	_, err = ParseSpec("a=kill;b;c=nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"b"`)
	assert.Contains(t, err.Error(), `"nope"`)
}

func TestDue(t *testing.T) {
	term := Term{Action: Error, From: 3, Times: 2}
	var fired int64
	var at []int64
	for n := int64(1); n <= 10; n++ {
		if term.due(n, fired, 0) {
			fired++
			at = append(at, n)
		}
	}
	assert.Equal(t, []int64{3, 4}, at)
	half := Term{Action: Error, Percent: 50}
	assert.True(t, half.due(1, 0, 49))
	assert.False(t, half.due(1, 0, 50))
	assert.False(t, Term{Action: Off}.due(1, 0, 0))
}
