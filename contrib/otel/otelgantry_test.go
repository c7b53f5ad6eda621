package otelgantry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantrymq/gantry/client"
	otelgantry "github.com/gantrymq/gantry/contrib/otel"
	"github.com/gantrymq/gantry/message"
)

// telemetry is an SDK tracer provider with an in-memory span recorder and
// a meter provider with a manual reader.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	hook   *otelgantry.Hook
}

func newTelemetry(t *testing.T, opts ...otelgantry.Option) *telemetry {
	t.Helper()
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	opts = append([]otelgantry.Option{otelgantry.WithTracerProvider(tp), otelgantry.WithMeterProvider(mp),
		otelgantry.WithPropagator(propagation.TraceContext{})}, opts...)
	tel.hook = otelgantry.NewHook(opts...)
	return tel
}

// sums returns the data points of a counter, as "attr=value,..." → value.
func (tel *telemetry) sums(t *testing.T, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				out[key(dp.Attributes)] += dp.Value
			}
		}
	}
	return out
}

// histogramCounts returns the counts of a histogram by attributes.
func (tel *telemetry) histogramCounts(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				out[key(dp.Attributes)] += dp.Count
			}
		}
	}
	return out
}

func key(s attribute.Set) string {
	var out string
	for _, kv := range s.ToSlice() {
		if out != "" {
			out += ","
		}
		out += fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit())
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

func TestSendSpanAndTraceContext(t *testing.T) {
	tel := newTelemetry(t)
	shared := map[string]string{"a": "1"}
	m := &client.Message{Topic: "T", Body: []byte("hello"), Tags: "TagA", Keys: []string{"k1", "k2"}, Properties: shared}
	ctx := tel.hook.OnSend(t.Context(), m)
	tel.hook.OnSendDone(ctx, m, client.SendResult{UniqKey: "U1", QueueID: 3}, nil)

	assert.Equal(t, map[string]string{"a": "1"}, shared, "the caller's map is not written")
	require.Contains(t, m.Properties, "traceparent")
	assert.Equal(t, "1", m.Properties["a"])

	ended := tel.spans.Ended()
	require.Len(t, ended, 1)
	s := ended[0]
	assert.Equal(t, "send T", s.Name())
	assert.Equal(t, trace.SpanKindProducer, s.SpanKind())
	assert.Equal(t, codes.Unset, s.Status().Code)
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", s.SpanContext().TraceID(), s.SpanContext().SpanID()), m.Properties["traceparent"],
		"the message carries the producer span's context")
	assert.Equal(t, map[string]string{
		"messaging.system": "rocketmq", "messaging.operation.name": "send", "messaging.operation.type": "send",
		"messaging.destination.name": "T", "messaging.message.body.size": "5", "messaging.rocketmq.message.tag": "TagA",
		"messaging.rocketmq.message.keys": `["k1","k2"]`, "messaging.message.id": "U1", "messaging.destination.partition.id": "3",
	}, attrs(s))
	assert.Equal(t, map[string]int64{
		"messaging.destination.name=T,messaging.operation.name=send,messaging.operation.type=send,messaging.system=rocketmq": 1,
	}, tel.sums(t, "messaging.client.sent.messages"))
	assert.Equal(t, map[string]uint64{
		"messaging.destination.name=T,messaging.operation.name=send,messaging.operation.type=send,messaging.system=rocketmq": 1,
	}, tel.histogramCounts(t, "messaging.client.operation.duration"))
}

func TestSendErrorOutcome(t *testing.T) {
	tel := newTelemetry(t)
	for i, err := range []error{
		fmt.Errorf("send: %w", client.ErrUnavailable), fmt.Errorf("x: %w", client.ErrTopicNotFound), client.ErrClosed,
		&client.IndeterminateError{Err: errors.New("lost")}, context.DeadlineExceeded, errors.New("odd"), nil,
	} {
		m := &client.Message{Topic: "T", Body: []byte{byte(i)}}
		tel.hook.OnSendDone(tel.hook.OnSend(t.Context(), m), m, client.SendResult{}, err)
	}
	base := "messaging.destination.name=T,messaging.operation.name=send,messaging.operation.type=send,messaging.system=rocketmq"
	assert.Equal(t, map[string]int64{
		"error.type=unavailable," + base: 1, "error.type=topic_not_found," + base: 1, "error.type=closed," + base: 1,
		"error.type=indeterminate," + base: 1, "error.type=timeout," + base: 1, "error.type=_OTHER," + base: 1, base: 1,
	}, tel.sums(t, "messaging.client.sent.messages"))
	ended := tel.spans.Ended()
	require.Len(t, ended, 7)
	assert.Equal(t, codes.Error, ended[0].Status().Code)
	assert.Equal(t, "unavailable", attrs(ended[0])["error.type"])
	require.Len(t, ended[0].Events(), 1, "the error is recorded")
	assert.Equal(t, codes.Unset, ended[6].Status().Code)
}

// received returns a MessageExt as a consumer gets it, with props stored.
func received(topic string, props ...message.Property) *client.MessageExt {
	m := &message.Message{Topic: topic, Body: []byte("body"), Properties: props}
	return &client.MessageExt{Message: m, Topic: topic, Body: m.Body, UniqKey: "U1", Queue: client.Queue{Topic: topic, ID: 2}}
}

func TestConsumeSpanIsChildOfProducerSpan(t *testing.T) {
	tel := newTelemetry(t)
	sent := &client.Message{Topic: "T", Body: []byte("x")}
	tel.hook.OnSendDone(tel.hook.OnSend(t.Context(), sent), sent, client.SendResult{}, nil)
	producer := tel.spans.Ended()[0].SpanContext()

	for _, tc := range []struct {
		name  string
		props []message.Property
	}{
		{"traceparent property", []message.Property{{Key: "traceparent", Value: sent.Properties["traceparent"]}}},
		{"RocketMQ 5 TRACE_CONTEXT", []message.Property{{Key: otelgantry.TraceContextProperty, Value: sent.Properties["traceparent"]}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel.spans.Reset()
			m := received("T", tc.props...)
			ctx := tel.hook.OnConsume(t.Context(), m)
			assert.Equal(t, producer.TraceID(), trace.SpanContextFromContext(ctx).TraceID(), "the handler's context is in the trace")
			tel.hook.OnConsumeDone(ctx, m, client.ConsumeSuccess)
			ended := tel.spans.Ended()
			require.Len(t, ended, 1)
			s := ended[0]
			assert.Equal(t, "process T", s.Name())
			assert.Equal(t, trace.SpanKindConsumer, s.SpanKind())
			assert.Equal(t, producer.TraceID(), s.SpanContext().TraceID())
			assert.Equal(t, producer.SpanID(), s.Parent().SpanID())
			assert.True(t, s.Parent().IsRemote())
			assert.Equal(t, "U1", attrs(s)["messaging.message.id"])
			assert.Equal(t, "2", attrs(s)["messaging.destination.partition.id"])
		})
	}
}

func TestConsumeWithoutTraceContextStartsATrace(t *testing.T) {
	tel := newTelemetry(t)
	m := received("T")
	tel.hook.OnConsumeDone(tel.hook.OnConsume(t.Context(), m), m, client.ConsumeSuccess)
	ended := tel.spans.Ended()
	require.Len(t, ended, 1)
	assert.False(t, ended[0].Parent().IsValid())
	assert.True(t, ended[0].SpanContext().IsValid())
}

func TestConsumeOutcomeAndAttributes(t *testing.T) {
	tel := newTelemetry(t, otelgantry.WithAttributes(attribute.String("messaging.consumer.group.name", "G"),
		attribute.String("messaging.system", "gantry")))
	for _, r := range []client.ConsumeResult{client.ConsumeSuccess, client.ConsumeSuccess, client.ConsumeRetryLater} {
		m := received("T")
		tel.hook.OnConsumeDone(tel.hook.OnConsume(t.Context(), m), m, r)
	}
	base := "messaging.consumer.group.name=G,messaging.destination.name=T,messaging.operation.name=process,messaging.system=gantry"
	assert.Equal(t, map[string]int64{base: 2, "error.type=RETRY_LATER," + base: 1}, tel.sums(t, "messaging.client.consumed.messages"))
	assert.Equal(t, map[string]uint64{base: 2, "error.type=RETRY_LATER," + base: 1}, tel.histogramCounts(t, "messaging.process.duration"))
	ended := tel.spans.Ended()
	require.Len(t, ended, 3)
	assert.Equal(t, "gantry", attrs(ended[0])["messaging.system"], "WithAttributes wins over the hook's own")
	assert.Equal(t, codes.Error, ended[2].Status().Code)
	assert.Equal(t, "RETRY_LATER", attrs(ended[2])["error.type"])
}

// The hook is a valid client.Hook.
func TestHookValidates(t *testing.T) {
	require.NoError(t, client.Config{Hooks: []client.Hook{otelgantry.NewHook()}}.Validate())
}

// Two tracing hooks in one Config.Hooks: each done hook ends its own span,
// though the context holds the later hook's.
func TestHooksEndTheirOwnSpans(t *testing.T) {
	tel := newTelemetry(t)
	inner := otelgantry.NewHook(otelgantry.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))))
	m := &client.Message{Topic: "T", Body: []byte("x")}
	ctx := inner.OnSend(tel.hook.OnSend(t.Context(), m), m)
	tel.hook.OnSendDone(ctx, m, client.SendResult{}, nil)
	inner.OnSendDone(ctx, m, client.SendResult{}, nil)
	ended := tel.spans.Ended()
	require.Len(t, ended, 2)
	assert.NotEqual(t, ended[0].SpanContext().SpanID(), ended[1].SpanContext().SpanID(), "two spans ended, once each")
	assert.Equal(t, ended[0].SpanContext().SpanID(), ended[1].Parent().SpanID())
}
