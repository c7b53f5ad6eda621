// Package otelgantry traces and measures Gantry clients with OpenTelemetry.
//
// NewHook returns a client.Hook: put it in client.Config.Hooks of the
// Producer and of the PushConsumer.
//
//	h := otelgantry.NewHook()
//	p, err := client.NewProducer(ctx, client.Config{NameServers: ns, Hooks: []client.Hook{h}})
//
// Every message sent gets a span of kind Producer ("send <topic>"), and the
// trace context of that span is written into the message's user properties
// by the propagator (W3C Trace Context: "traceparent" and "tracestate", as
// the OpenTelemetry Java agent's instrumentation of the RocketMQ remoting
// client writes them), so a consumer in any language that reads them
// continues the trace. Every message a PushConsumer hands to its handler
// gets a span of kind Consumer ("process <topic>") whose parent is the
// producer's span, read back from the properties. A message without a
// "traceparent" property is read for a TRACE_CONTEXT one, where RocketMQ 5
// stores the traceparent its gRPC clients send. With a consume batch size
// of 1 (the default) the handler's context holds that span, so spans the
// handler starts are its children.
//
// Metrics, by topic (messaging.destination.name) and outcome (error.type,
// absent on success), under the messaging semantic conventions' names:
// messaging.client.sent.messages and messaging.client.operation.duration
// (sends), messaging.client.consumed.messages and
// messaging.process.duration (handling by a push consumer's handler).
//
// Spans and metrics carry messaging.system "rocketmq": Gantry keeps
// RocketMQ's model (topics, queues, tags, keys) and its semantic
// conventions' attributes, so tools that know RocketMQ read them. Give
// WithAttributes(semconv.MessagingSystemKey.String("gantry")) to say
// otherwise.
//
// The propagator defaults to otel.GetTextMapPropagator(), which propagates
// nothing until the application sets one:
//
//	otel.SetTextMapPropagator(propagation.TraceContext{})
//
// A PullConsumer calls no hooks (the application decides what consuming
// a pulled message means): call OnConsume and OnConsumeDone of the Hook
// around the handling of each message to get the same spans and metrics.
package otelgantry

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantrymq/gantry/client"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/gantrymq/gantry/contrib/otel"

// TraceContextProperty is the property in which RocketMQ 5 stores the W3C
// traceparent its gRPC clients send (SystemProperties.trace_context); it is
// read when a message has no "traceparent" property.
const TraceContextProperty = "TRACE_CONTEXT"

// Option sets an option of NewHook.
type Option func(*config)

type config struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	prop  propagation.TextMapPropagator
	attrs []attribute.KeyValue
}

// WithTracerProvider sets where spans go. Default otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets where metrics go. Default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithPropagator sets how the trace context is written into and read from
// message properties. Default otel.GetTextMapPropagator().
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

// WithAttributes adds attributes to every span and measurement (a
// consumer group, say: messaging.consumer.group.name). They come after
// the hook's own, so one with the same key replaces it.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Hook is a client.Hook that implements client.SendHook,
// client.SendDoneHook, client.ConsumeHook and client.ConsumeDoneHook. It
// is safe for concurrent use; one Hook may serve several clients.
type Hook struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	extra  []attribute.KeyValue // WithAttributes: last on every span and measurement

	sent     messagingconv.ClientSentMessages
	sendDur  messagingconv.ClientOperationDuration
	consumed messagingconv.ClientConsumedMessages
	procDur  messagingconv.ProcessDuration
}

var (
	_ client.SendHook        = (*Hook)(nil)
	_ client.SendDoneHook    = (*Hook)(nil)
	_ client.ConsumeHook     = (*Hook)(nil)
	_ client.ConsumeDoneHook = (*Hook)(nil)
)

// NewHook returns a Hook. An instrument the meter cannot make is reported
// to otel.Handle and left out.
func NewHook(opts ...Option) *Hook {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	h := &Hook{
		tracer: c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:   c.prop,
		extra:  c.attrs,
	}
	m := c.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var errs [4]error
	h.sent, errs[0] = messagingconv.NewClientSentMessages(m)
	h.sendDur, errs[1] = messagingconv.NewClientOperationDuration(m)
	h.consumed, errs[2] = messagingconv.NewClientConsumedMessages(m)
	h.procDur, errs[3] = messagingconv.NewProcessDuration(m)
	if err := errors.Join(errs[:]...); err != nil {
		otel.Handle(err)
	}
	return h
}

// started is what OnSend and OnConsume leave in the context for the done
// hooks: the span and when it began. It is keyed by the Hook, so that the
// done hooks find their own span even when another hook, later in
// Config.Hooks, put its own in the context.
type started struct {
	span trace.Span
	at   time.Time
}

type startedKey struct{ h *Hook }

// begin records span in ctx for the done hooks.
func (h *Hook) begin(ctx context.Context, span trace.Span) context.Context {
	return context.WithValue(ctx, startedKey{h}, started{span: span, at: time.Now()})
}

// end ends the span begin recorded in ctx and returns how long ago it
// began; ok is false for a context begin did not make.
func (h *Hook) end(ctx context.Context, status func(trace.Span)) (took time.Duration, ok bool) {
	s, ok := ctx.Value(startedKey{h}).(started)
	if !ok {
		return 0, false
	}
	status(s.span)
	s.span.End()
	return time.Since(s.at), true
}

// OnSend starts the message's producer span and writes its trace context
// into m.Properties (a copy of the map: the caller's map may be shared
// between messages).
func (h *Hook) OnSend(ctx context.Context, m *client.Message) context.Context {
	attrs := h.attrs(6, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(m.Topic), semconv.MessagingMessageBodySize(len(m.Body)))
	if m.Tags != "" {
		attrs = append(attrs, semconv.MessagingRocketMQMessageTag(m.Tags))
	}
	if len(m.Keys) > 0 {
		attrs = append(attrs, semconv.MessagingRocketMQMessageKeys(m.Keys...))
	}
	ctx, span := h.tracer.Start(ctx, "send "+m.Topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(h.last(attrs)...))
	props := make(map[string]string, len(m.Properties)+2)
	maps.Copy(props, m.Properties)
	h.prop.Inject(ctx, propagation.MapCarrier(props))
	m.Properties = props
	return h.begin(ctx, span)
}

// OnSendDone ends the span OnSend started, with the message's id and queue
// or the error, and records the send's metrics.
func (h *Hook) OnSendDone(ctx context.Context, m *client.Message, r client.SendResult, err error) {
	attrs := h.attrs(2, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(m.Topic))
	var et string
	if err != nil {
		et = errorType(err)
		attrs = append(attrs, semconv.ErrorTypeKey.String(et))
	}
	took, ok := h.end(ctx, func(span trace.Span) {
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(et))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			return
		}
		span.SetAttributes(semconv.MessagingMessageID(r.UniqKey),
			semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.QueueID))))
	})
	set := metric.WithAttributeSet(attribute.NewSet(h.last(attrs)...))
	h.sent.Inst().Add(ctx, 1, set)
	if ok {
		h.sendDur.Inst().Record(ctx, took.Seconds(), set)
	}
}

// OnConsume starts the message's consumer span, a child of the producer's
// span read from the message's properties (if it has one).
func (h *Hook) OnConsume(ctx context.Context, m *client.MessageExt) context.Context {
	ctx = h.prop.Extract(ctx, carrier{m})
	attrs := h.attrs(1, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(m.Topic), semconv.MessagingMessageID(m.UniqKey),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(m.Queue.ID))),
		semconv.MessagingMessageBodySize(len(m.Body)))
	if m.Tags != "" {
		attrs = append(attrs, semconv.MessagingRocketMQMessageTag(m.Tags))
	}
	ctx, span := h.tracer.Start(ctx, "process "+m.Topic, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(h.last(attrs)...))
	return h.begin(ctx, span)
}

// OnConsumeDone ends the span OnConsume started, with the handler's result
// (an error status unless ConsumeSuccess), and records the metrics.
func (h *Hook) OnConsumeDone(ctx context.Context, m *client.MessageExt, r client.ConsumeResult) {
	attrs := h.attrs(1, semconv.MessagingOperationName("process"), semconv.MessagingDestinationName(m.Topic))
	if r != client.ConsumeSuccess {
		attrs = append(attrs, semconv.ErrorTypeKey.String(r.String()))
	}
	took, ok := h.end(ctx, func(span trace.Span) {
		if r != client.ConsumeSuccess {
			span.SetAttributes(semconv.ErrorTypeKey.String(r.String()))
			span.SetStatus(codes.Error, "handler returned "+r.String())
		}
	})
	set := metric.WithAttributeSet(attribute.NewSet(h.last(attrs)...))
	h.consumed.Inst().Add(ctx, 1, set)
	if ok {
		h.procDur.Inst().Record(ctx, took.Seconds(), set)
	}
}

// attrs returns messaging.system and kvs, with room for n more and the
// WithAttributes ones (last).
func (h *Hook) attrs(n int, kvs ...attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, 1+len(kvs)+n+len(h.extra))
	out = append(out, semconv.MessagingSystemRocketMQ)
	return append(out, kvs...)
}

// last appends the WithAttributes attributes to attrs, so that they win
// over the hook's own of the same key.
func (h *Hook) last(attrs []attribute.KeyValue) []attribute.KeyValue {
	return append(attrs, h.extra...)
}

// errorType is a send error's error.type: the client's error class, else
// "_OTHER".
func errorType(err error) string {
	var ind *client.IndeterminateError
	switch {
	case errors.As(err, &ind):
		return "indeterminate"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "_OTHER"
}

// errorClasses are the client's sentinel errors, ErrTopicNotFound before
// the ErrNotFound it matches too.
var errorClasses = []struct {
	err  error
	name string
}{
	{client.ErrClosed, "closed"},
	{client.ErrTopicNotFound, "topic_not_found"},
	{client.ErrNotFound, "not_found"},
	{client.ErrInvalidArgument, "invalid_argument"},
	{client.ErrNoPermission, "no_permission"},
	{client.ErrUnavailable, "unavailable"},
	{client.ErrDiskFull, "disk_full"},
	{client.ErrUnimplemented, "unimplemented"},
	{client.ErrInternal, "internal"},
	{client.ErrNoQueue, "no_queue"},
}

// carrier reads a received message's properties for the propagator.
type carrier struct{ m *client.MessageExt }

func (c carrier) Get(key string) string {
	if c.m.Message == nil {
		return ""
	}
	v := c.m.Property(key)
	if v == "" && key == "traceparent" {
		v = c.m.Property(TraceContextProperty)
	}
	return v
}

func (c carrier) Set(string, string) {} // received messages are read only

func (c carrier) Keys() []string {
	if c.m.Message == nil {
		return nil
	}
	keys := make([]string, 0, len(c.m.Message.Properties))
	for _, p := range c.m.Message.Properties {
		keys = append(keys, p.Key)
	}
	return keys
}
