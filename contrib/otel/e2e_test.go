package otelgantry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantrymq/gantry/client"
	otelgantry "github.com/gantrymq/gantry/contrib/otel"
	"github.com/gantrymq/gantry/embedded"
)

// A message's trace crosses a real cluster: the consumer's span is a child
// of the producer's, and a span the handler starts is a child of the
// consumer's.
func TestTraceCrossesFromProducerToConsumer(t *testing.T) {
	const topic, n = "Traced", 5
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })

	// Two providers: the producer's and the consumer's processes.
	prodSpans, consSpans := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	prodTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(prodSpans))
	consTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(consSpans))
	t.Cleanup(func() {
		_ = prodTP.Shutdown(context.Background())
		_ = consTP.Shutdown(context.Background())
	})
	w3c := otelgantry.WithPropagator(propagation.TraceContext{})
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}

	pcfg := cfg
	pcfg.Hooks = []client.Hook{otelgantry.NewHook(otelgantry.WithTracerProvider(prodTP), w3c)}
	p, err := client.NewProducer(t.Context(), pcfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	for i := range n {
		_, err := p.Send(t.Context(), &client.Message{Topic: topic, Body: fmt.Appendf(nil, "m%d", i)})
		require.NoError(t, err)
	}

	ccfg := cfg
	ccfg.Hooks = []client.Hook{otelgantry.NewHook(otelgantry.WithTracerProvider(consTP), w3c)}
	handlerTracer := consTP.Tracer("handler")
	var handled atomic.Int64
	pc, err := client.NewPushConsumer(t.Context(), ccfg, "TracedGroup", func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		_, span := handlerTracer.Start(ctx, "handle "+string(msgs[0].Body))
		span.End()
		handled.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	}, client.WithConsumeFrom(client.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, "*"))
	require.NoError(t, pc.Start(t.Context()))
	require.Eventually(t, func() bool { return handled.Load() >= n }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, pc.Shutdown(t.Context())) // every consumer span has ended

	producers := map[trace.TraceID]sdktrace.ReadOnlySpan{}
	for _, s := range prodSpans.Ended() {
		require.Equal(t, trace.SpanKindProducer, s.SpanKind())
		producers[s.SpanContext().TraceID()] = s
	}
	require.Len(t, producers, n, "one trace per message sent")
	consumers := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var handlers []sdktrace.ReadOnlySpan
	for _, s := range consSpans.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindConsumer:
			consumers[s.SpanContext().SpanID()] = s
		default:
			handlers = append(handlers, s)
		}
	}
	require.Len(t, consumers, n)
	require.Len(t, handlers, n)
	for _, s := range consumers {
		prod, ok := producers[s.SpanContext().TraceID()]
		require.True(t, ok, "consumer span %s is in a producer's trace", s.Name())
		assert.Equal(t, prod.SpanContext().SpanID(), s.Parent().SpanID(), "the consumer span's parent is the producer span")
		assert.Equal(t, "process "+topic, s.Name())
	}
	for _, s := range handlers {
		cons, ok := consumers[s.Parent().SpanID()]
		require.True(t, ok, "handler span %s is a child of a consumer span", s.Name())
		assert.Equal(t, cons.SpanContext().TraceID(), s.SpanContext().TraceID())
	}
}
