package nameserver

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
)

// maxProblems caps how many problems one registration reports.
const maxProblems = 10

// validate reports every problem with reg (up to maxProblems), each an
// *InvalidError, joined.
func (reg Registration) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if reg.Cluster == "" {
		bad("Cluster", "is required")
	}
	if reg.BrokerName == "" {
		bad("BrokerName", "is required")
	}
	if reg.BrokerID < 0 {
		bad("BrokerID", "%d is negative", reg.BrokerID)
	}
	if reg.Addr == "" {
		bad("Addr", "is required")
	} else if err := checkHostPort(reg.Addr); err != nil {
		bad("Addr", "%q: %v", reg.Addr, err)
	}
	if reg.RemotingAddr != "" {
		if err := checkHostPort(reg.RemotingAddr); err != nil {
			bad("RemotingAddr", "%q: %v", reg.RemotingAddr, err)
		}
	}
	if reg.HAAddr != "" {
		if err := checkHostPort(reg.HAAddr); err != nil {
			bad("HAAddr", "%q: %v", reg.HAAddr, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(reg.Topics)) {
		if len(errs) > maxProblems {
			break
		}
		validateTopic(name, reg.Topics[name], bad)
	}
	if len(errs) > maxProblems {
		errs = append(errs[:maxProblems], fmt.Errorf("%w: more problems not listed", ErrInvalid))
	}
	return errors.Join(errs...)
}

func validateTopic(name string, ti TopicInfo, bad func(field, format string, args ...any)) {
	field := fmt.Sprintf("Topics[%q]", name)
	if !ValidTopicName(name) {
		bad(field, "name must match ^[a-zA-Z0-9_%%-]{1,127}$")
		return
	}
	for _, n := range []struct {
		what string
		v    int32
	}{{"ReadQueueNums", ti.ReadQueueNums}, {"WriteQueueNums", ti.WriteQueueNums}} {
		if n.v < 0 || n.v > MaxQueueNums {
			bad(field+"."+n.what, "%d is outside 0..%d", n.v, MaxQueueNums)
		}
	}
	if ti.ReadQueueNums == 0 && ti.WriteQueueNums == 0 {
		bad(field, "has no queues: ReadQueueNums and WriteQueueNums are both 0")
	}
	if ti.Perm < 0 || ti.Perm > PermRead|PermWrite|PermInherit {
		bad(field+".Perm", "%d is outside 0..7", ti.Perm)
	}
}

// ValidTopicName reports whether name matches ^[a-zA-Z0-9_%-]{1,127}$,
// RocketMQ's rule for topic names.
func ValidTopicName(name string) bool {
	if len(name) == 0 || len(name) > 127 {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '%', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	if port == "" {
		return errors.New("want host:port, port is empty")
	}
	return nil
}
