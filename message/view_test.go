package message_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// checkView asserts that a View of b reads what Decode decodes.
func checkView(t *testing.T, b []byte) {
	m, n, err := message.Decode(b)
	v, verr := message.NewView(b)
	if err != nil {
		require.Error(t, verr)
		return
	}
	require.NoError(t, verr)
	assert.Len(t, v.Bytes(), n)
	assert.Equal(t, m.Topic, string(v.Topic()))
	assert.Equal(t, m.QueueID, v.QueueID())
	assert.Equal(t, m.QueueOffset, v.QueueOffset())
	assert.Equal(t, m.SysFlag, v.SysFlag())
	assert.Equal(t, m.StoreTimestamp, v.StoreTimestamp())
	assert.Equal(t, string(m.Body), string(v.Body()))
	keys := []string{message.PropTags, message.PropKeys, message.PropUniqKey, message.PropCRC, "", "nope"}
	for _, kv := range m.Properties {
		keys = append(keys, kv.Key)
	}
	var all message.Properties
	for k, val := range v.All() {
		all = append(all, message.Property{Key: string(k), Value: string(val)})
	}
	assert.Equal(t, m.Properties, all)
	for _, k := range keys {
		want, wantOK := m.Properties.Get(k)
		got, ok := v.Property(k)
		assert.Equal(t, wantOK, ok, "property %q", k)
		assert.Equal(t, want, string(got), "property %q", k)
	}
}

func TestView(t *testing.T) {
	dup := sampleMessage(5)
	dup.Properties = append(dup.Properties, message.Property{Key: message.PropTags, Value: "first"}, message.Property{Key: message.PropTags, Value: "last"})
	noCRC, err := message.Append(nil, sampleMessage(5), false)
	require.NoError(t, err)
	for _, b := range append(goldenRecords(t), encode(t, sampleMessage(40), true), encode(t, dup, true), noCRC, nil, []byte{1, 2, 3}) {
		checkView(t, b)
	}
	rec := encode(t, dup, true)
	assert.Zero(t, testing.AllocsPerRun(10, func() {
		v, _ := message.NewView(rec)
		_, _ = v.Property(message.PropTags)
		_ = v.Topic()
	}))
}

func FuzzView(f *testing.F) {
	for _, s := range seedRecords(f) {
		f.Add(s)
	}
	f.Fuzz(checkView)
}
