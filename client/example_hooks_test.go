package client_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"sync/atomic"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// tagger stamps every message sent with the sending service's name, and
// counts outcomes: a SendHook and a SendDoneHook in one value.
type tagger struct {
	service    string
	ok, failed atomic.Int64
}

func (t *tagger) OnSend(ctx context.Context, m *client.Message) context.Context {
	props := maps.Clone(m.Properties) // the caller's map may be shared
	if props == nil {
		props = map[string]string{}
	}
	props["origin"] = t.service
	m.Properties = props
	return ctx
}

func (t *tagger) OnSendDone(_ context.Context, _ *client.Message, _ client.SendResult, err error) {
	if err != nil {
		t.failed.Add(1)
		return
	}
	t.ok.Add(1)
}

// Hooks in Config.Hooks see every message a client sends (and, for a push
// consumer, every message it handles): here one adds a property to each
// message sent and counts the outcomes.
func ExampleHook() {
	ctx := context.Background()
	cluster, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(ctx)

	hook := &tagger{service: "checkout"}
	p, err := client.NewProducer(ctx, client.Config{NameServers: []string{cluster.NameServerAddr()}, Hooks: []client.Hook{hook}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	res, err := p.Send(ctx, &client.Message{Topic: "Orders", Body: []byte("order 1")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.Send(ctx, &client.Message{Topic: "Orders"}) // no body: refused before sending
	fmt.Println("second send refused:", err != nil)

	adm, err := client.NewAdmin(ctx, client.Config{NameServers: []string{cluster.NameServerAddr()}})
	if err != nil {
		log.Fatal(err)
	}
	defer adm.Close()
	stored, err := adm.QueryMessageByID(ctx, res.MsgID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("origin:", stored.Property("origin"))
	fmt.Println("sent:", hook.ok.Load(), "failed:", hook.failed.Load())
	// Output:
	// second send refused: true
	// origin: checkout
	// sent: 1 failed: 1
}
