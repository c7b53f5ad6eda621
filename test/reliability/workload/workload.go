// Package workload holds the reliability suite's workers: a producer that
// records every send attempt and its outcome, a push consumer that records
// every message it handles, and the final drain that reads every queue
// back. Each writes a history (package history) that the checker reads.
// The workers run in child processes (package reliability starts them) so
// that they can be killed, but nothing here depends on that.
package workload

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/test/reliability/history"
)

// ClientConfig returns a client configuration for the nameservers whose
// connections to any address in dial go to the address it maps to (a
// fault proxy in front of a broker). Routes are refreshed at the client's
// default period.
func ClientConfig(nameServers []string, dial map[string]string) client.Config {
	cfg := client.Config{NameServers: nameServers}
	if len(dial) > 0 {
		var d net.Dialer
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			if to, ok := dial[addr]; ok {
				addr = to
			}
			return d.DialContext(ctx, "tcp", addr)
		}))
	}
	return cfg
}

// Outcome classifies a send error as the client's contract does: nil is
// OK, an *IndeterminateError indeterminate, anything else definite.
func Outcome(err error) history.Outcome {
	if err == nil {
		return history.OK
	}
	var ind *client.IndeterminateError
	if errors.As(err, &ind) {
		return history.Indeterminate
	}
	return history.Definite
}

// Message returns the message a producer sends for id.
func Message(topic, id string) *client.Message {
	return &client.Message{Topic: topic, Body: history.Body(id), Keys: []string{id}}
}

// IDOf returns the id a read message carries: its first key, else the id
// its body starts with, else "".
func IDOf(m *client.MessageExt) string {
	if ks := m.Keys(); len(ks) > 0 && ks[0] != "" {
		return ks[0]
	}
	if id, ok := history.IDOfBody(m.Body); ok {
		return id
	}
	return ""
}

// ReadEvent describes a message read, as kind (Recv or Drain).
func ReadEvent(kind history.Kind, worker string, m *client.MessageExt) history.Event {
	return history.Event{Kind: kind, ID: IDOf(m), Worker: worker, Topic: m.Topic, Broker: m.Queue.BrokerName,
		Queue: m.Queue.ID, Offset: m.QueueOffset, Phys: m.PhysicalOffset, Len: len(m.Body), CRC: history.CRC(m.Body),
		Redelivery: m.ReconsumeTimes, Time: history.Now()}
}

// ackEvent is the outcome event of a successful send.
func ackEvent(worker, topic, id string, r client.SendResult) history.Event {
	e := history.Event{Kind: history.Send, ID: id, Outcome: history.OK, Worker: worker, Topic: topic,
		Broker: r.Broker, Queue: r.QueueID, Offset: r.QueueOffset, Time: history.Now()}
	if _, phys, err := message.DecodeOffsetMsgID(r.MsgID); err == nil {
		e.Phys = phys
	} else {
		e.Err = fmt.Sprintf("bad offset message id %q: %v", r.MsgID, err)
	}
	return e
}
