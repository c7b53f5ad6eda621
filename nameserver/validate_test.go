package nameserver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
)

func TestInvalidRegistration(t *testing.T) {
	topic := func(ti nameserver.TopicInfo) func(*nameserver.Registration) {
		return func(rg *nameserver.Registration) { rg.Topics["T"] = ti }
	}
	tests := []struct {
		name   string
		modify func(*nameserver.Registration)
		field  string // the first InvalidError's Field
	}{
		{"empty cluster", func(rg *nameserver.Registration) { rg.Cluster = "" }, "Cluster"},
		{"empty broker name", func(rg *nameserver.Registration) { rg.BrokerName = "" }, "BrokerName"},
		{"negative broker id", func(rg *nameserver.Registration) { rg.BrokerID = -1 }, "BrokerID"},
		{"empty addr", func(rg *nameserver.Registration) { rg.Addr = "" }, "Addr"},
		{"addr without port", func(rg *nameserver.Registration) { rg.Addr = "10.0.0.1" }, "Addr"},
		{"remoting addr without port", func(rg *nameserver.Registration) { rg.RemotingAddr = "10.0.0.1:" }, "RemotingAddr"},
		{"ha addr garbage", func(rg *nameserver.Registration) { rg.HAAddr = "a:b:c" }, "HAAddr"},
		{"topic name with a space", func(rg *nameserver.Registration) { rg.Topics["a b"] = topic8 }, `Topics["a b"]`},
		{"empty topic name", func(rg *nameserver.Registration) { rg.Topics[""] = topic8 }, `Topics[""]`},
		{"topic name of 128 bytes", func(rg *nameserver.Registration) { rg.Topics[strings.Repeat("a", 128)] = topic8 }, `Topics["` + strings.Repeat("a", 128) + `"]`},
		{"read queues above 1024", topic(nameserver.TopicInfo{ReadQueueNums: 1025, WriteQueueNums: 8, Perm: 6}), `Topics["T"].ReadQueueNums`},
		{"negative write queues", topic(nameserver.TopicInfo{ReadQueueNums: 8, WriteQueueNums: -1, Perm: 6}), `Topics["T"].WriteQueueNums`},
		{"no queues at all", topic(nameserver.TopicInfo{Perm: 6}), `Topics["T"]`},
		{"perm above 7", topic(nameserver.TopicInfo{ReadQueueNums: 8, WriteQueueNums: 8, Perm: 8}), `Topics["T"].Perm`},
		{"negative perm", topic(nameserver.TopicInfo{ReadQueueNums: 8, WriteQueueNums: 8, Perm: -1}), `Topics["T"].Perm`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, newClock(), nameserver.Config{})
			mustRegister(t, r, reg("b1", 0, "10.0.0.1:8081", "T"))
			mustRegister(t, r, reg("b2", 0, "10.0.0.2:8081", "T", "U"))
			before := snapshot(t, r)

			bad := reg("b2", 0, "10.0.0.2:8081", "T", "V") // b2 again: a bad refresh must not touch it
			tt.modify(&bad)
			_, err := r.Register(bad)

			require.ErrorIs(t, err, nameserver.ErrInvalid)
			var ie *nameserver.InvalidError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tt.field, ie.Field)
			assert.Contains(t, err.Error(), tt.field)
			assert.Equal(t, before, snapshot(t, r), "state unchanged")
		})
	}
}

func TestValidRegistrationEdges(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	rg := reg("b1", 0, "[::1]:8081")
	rg.Topics["%RETRY%g-1_x"] = nameserver.TopicInfo{ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	rg.Topics[strings.Repeat("z", 127)] = topic8
	rg.Topics["Draining"] = nameserver.TopicInfo{ReadQueueNums: 8, WriteQueueNums: 0, Perm: 4}
	rg.Topics["Filling"] = nameserver.TopicInfo{ReadQueueNums: 0, WriteQueueNums: 1024, Perm: 7}
	rg.Topics["NoPerm"] = nameserver.TopicInfo{ReadQueueNums: 1, WriteQueueNums: 1, Perm: 0}
	mustRegister(t, r, rg)
	assert.Len(t, r.Topics(), 5)
}

func TestInvalidRegistrationReportsEveryProblem(t *testing.T) {
	r := newRegistry(t, newClock(), nameserver.Config{})
	rg := reg("", -2, "", "ok")
	rg.Cluster = ""
	rg.Topics["bad!"] = topic8
	_, err := r.Register(rg)

	var fields []string
	for _, e := range joined(t, err) {
		var ie *nameserver.InvalidError
		require.True(t, errors.As(e, &ie), "%v", e)
		fields = append(fields, ie.Field)
	}
	assert.Equal(t, []string{"Cluster", "BrokerName", "BrokerID", "Addr", `Topics["bad!"]`}, fields)
	assert.Empty(t, r.Brokers())

	many := reg("b1", 0, "10.0.0.1:8081")
	for _, name := range strings.Split("a! b! c! d! e! f! g! h! i! j! k! l! m!", " ") {
		many.Topics[name] = topic8
	}
	_, err = r.Register(many)
	require.ErrorIs(t, err, nameserver.ErrInvalid)
	assert.Len(t, joined(t, err), 11, "10 problems and a note")
	assert.Contains(t, err.Error(), "more problems not listed")
}

func TestValidTopicName(t *testing.T) {
	for name, want := range map[string]bool{
		"T": true, "a-b_c%D9": true, strings.Repeat("x", 127): true,
		"": false, strings.Repeat("x", 128): false, "a.b": false, "a/b": false, "ü": false, "a b": false,
	} {
		assert.Equal(t, want, nameserver.ValidTopicName(name), "%q", name)
	}
}

// joined returns the errors err joins.
func joined(t *testing.T, err error) []error {
	t.Helper()
	var multi interface{ Unwrap() []error }
	require.ErrorAs(t, err, &multi)
	return multi.Unwrap()
}

// state is what the registry answers, for before/after comparisons.
type state struct {
	Brokers []nameserver.BrokerInfo
	Topics  []string
	Routes  map[string]nameserver.TopicRoute
	Cluster nameserver.ClusterInfo
}

func snapshot(t *testing.T, r *nameserver.Registry) state {
	t.Helper()
	s := state{Brokers: r.Brokers(), Topics: r.Topics(), Routes: map[string]nameserver.TopicRoute{}, Cluster: r.ClusterInfo()}
	for _, topic := range s.Topics {
		s.Routes[topic] = mustRoute(t, r, topic)
	}
	return s
}
