package remotingapi

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAlterAttributes(t *testing.T) {
	cur := map[string]string{"a": "1", "b": "2"}
	got, err := alterAttributes(cur, "+c=3,-a,+b=x=y")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"b": "x=y", "c": "3"}, got)
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, cur, "the current map is not changed")
	got, err = alterAttributes(nil, "")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{}, got)
	for _, bad := range []string{"a=1", "+a", "-a=1", "+=1", "-", ",", "+a=1,", "+a+b=1"} {
		_, err := alterAttributes(cur, bad)
		assert.ErrorIs(t, err, errBadHeader, bad)
	}
}

// Any input either fails or yields attributes that, written back as
// "+k=v" changes, give the same attributes.
func FuzzAlterAttributes(f *testing.F) {
	for _, s := range []string{"", "+a=1", "+a=1,-b", "+message.type=NORMAL,+x=a=b", "-a", "a", ",,", "+=", "+a=1,+a=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, changes string) {
		got, err := alterAttributes(map[string]string{"b": "2"}, changes)
		if err != nil {
			return
		}
		var items []string
		for _, k := range slices.Sorted(maps.Keys(got)) {
			items = append(items, "+"+k+"="+got[k])
		}
		again, err := alterAttributes(nil, strings.Join(items, ","))
		require.NoError(t, err, "%q", items)
		require.Equal(t, got, again)
	})
}

// Any body either fails or decodes to a group whose own JSON decodes to
// it again (Gantry's jitter and a CUSTOMIZED policy aside: the wire has
// neither).
func FuzzDecodeGroupConfig(f *testing.F) {
	f.Add([]byte(`{"groupName":"g","retryMaxTimes":3,"groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000]}}}`))
	f.Add([]byte(`{"groupName":"g","groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1,"max":2,"multiplier":3}}}`))
	f.Add([]byte(`{"groupName":"g","consumeEnable":false,"brokerId":1,"retryQueueNums":2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := decodeGroupConfig(body)
		if err != nil {
			return
		}
		b, err := json.Marshal(g)
		require.NoError(t, err)
		g2, err := decodeGroupConfig(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, g, g2)
	})
}

func TestOffsetTableBody(t *testing.T) {
	b, err := offsetTableBody("b1", []queueEntry{{"U", 0, 7}, {"T", 1, int64(3)}, {"T", 0, topicOffset{MaxOffset: 2}}})
	require.NoError(t, err)
	assert.Equal(t, `{"offsetTable":{{"topic":"T","brokerName":"b1","queueId":0}:{"lastUpdateTimestamp":0,"maxOffset":2,"minOffset":0},`+
		`{"topic":"T","brokerName":"b1","queueId":1}:3,{"topic":"U","brokerName":"b1","queueId":0}:7}}`, string(b))
	b, err = offsetTableBody("b1", nil)
	require.NoError(t, err)
	assert.Equal(t, `{"offsetTable":{}}`, string(b))
}

func TestJavaFormats(t *testing.T) {
	assert.Equal(t, "[ 1 days, 2 hours, 3 minutes, 4 seconds ]", javaRuntime(26*time.Hour+3*time.Minute+4*time.Second+time.Millisecond))
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 3 << 30: "3.0 GiB", 1 << 62: "4.0 EiB"} {
		assert.Equal(t, want, humanBytes(n), "%d", n)
	}
}
