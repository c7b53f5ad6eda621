package otelgantry_test

import (
	"context"
	"fmt"
	"log"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gantrymq/gantry/client"
	otelgantry "github.com/gantrymq/gantry/contrib/otel"
	"github.com/gantrymq/gantry/embedded"
)

// One hook in the producer's and the consumer's Config.Hooks: the
// consumer's span continues the producer's trace. Here the spans go to an
// in-memory recorder; an application gives its own TracerProvider and
// MeterProvider (or sets the global ones).
func Example() {
	ctx := context.Background()
	cluster, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(ctx)

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)
	otel.SetTextMapPropagator(propagation.TraceContext{}) // W3C traceparent and tracestate
	cfg := client.Config{
		NameServers: []string{cluster.NameServerAddr()},
		Hooks:       []client.Hook{otelgantry.NewHook(otelgantry.WithTracerProvider(tp))},
	}

	p, err := client.NewProducer(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.Send(ctx, &client.Message{Topic: "Orders", Body: []byte("order 1")}); err != nil {
		log.Fatal(err)
	}

	handled := make(chan struct{})
	c, err := client.NewPushConsumer(ctx, cfg, "billing", func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		close(handled) // ctx holds the consumer's span: spans started from it are its children
		return client.ConsumeSuccess
	}, client.WithConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("Orders", "*"); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-handled
	if err := c.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}

	ended := spans.Ended()
	send, process := ended[0], ended[1]
	fmt.Println(send.Name(), send.SpanKind())
	fmt.Println(process.Name(), process.SpanKind())
	fmt.Println("same trace:", process.SpanContext().TraceID() == send.SpanContext().TraceID())
	fmt.Println("child of the send:", process.Parent().SpanID() == send.SpanContext().SpanID())
	// Output:
	// send Orders producer
	// process Orders consumer
	// same trace: true
	// child of the send: true
}
