package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

func TestStatusErrorKinds(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		msg  string
		want error
	}{
		{"not found", codes.NotFound, "", ErrTopicNotFound},
		{"invalid", codes.InvalidArgument, "", ErrInvalidArgument},
		{"out of range", codes.OutOfRange, "", ErrInvalidArgument},
		{"permission", codes.PermissionDenied, "", ErrNoPermission},
		{"unauthenticated", codes.Unauthenticated, "", ErrNoPermission},
		{"unavailable", codes.Unavailable, "", ErrUnavailable},
		{"disk full", codes.ResourceExhausted, "disk full", ErrDiskFull},
		{"too large", codes.ResourceExhausted, "grpc: received message larger than max (5 vs. 4)", ErrInvalidArgument},
		{"backlog full", codes.ResourceExhausted, `broker: queue backlog full: queue 0 of topic "T" holds 3 messages`, ErrBacklogFull},
		{"unimplemented", codes.Unimplemented, "", ErrUnimplemented},
		{"internal", codes.Internal, "", ErrInternal},
		{"deadline", codes.DeadlineExceeded, "", context.DeadlineExceeded},
		{"canceled", codes.Canceled, "", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := callError("send", "1.2.3.4:5", status.Error(tt.code, tt.msg), ErrTopicNotFound)
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, tt.code, status.Code(err))
			assert.Contains(t, err.Error(), "1.2.3.4:5")
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "1.2.3.4:5", se.Addr)
		})
	}
	assert.ErrorIs(t, ErrTopicNotFound, ErrNotFound)
	assert.NoError(t, callError("send", "x", nil, ErrNotFound))
}

func TestIsRetryable(t *testing.T) {
	unavailable := callError("send", "a", status.Error(codes.Unavailable, "x"), ErrTopicNotFound)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", unavailable, true},
		{"disk full", callError("send", "a", status.Error(codes.ResourceExhausted, "x"), ErrTopicNotFound), true},
		{"topic not found", callError("send", "a", status.Error(codes.NotFound, "x"), ErrTopicNotFound), true},
		{"invalid", callError("send", "a", status.Error(codes.InvalidArgument, "x"), ErrTopicNotFound), false},
		{"permission", callError("send", "a", status.Error(codes.PermissionDenied, "x"), ErrTopicNotFound), false},
		{"indeterminate", &IndeterminateError{Broker: "a", Err: unavailable}, false},
		{"wrapped indeterminate", fmt.Errorf("x: %w", &IndeterminateError{Broker: "a", Err: unavailable}), false},
		{"deadline", context.DeadlineExceeded, false},
		{"closed", ErrClosed, false},
		{"internal", callError("send", "a", status.Error(codes.Internal, "x"), ErrTopicNotFound), false},
		{"backlog full", callError("send", "a", status.Error(codes.ResourceExhausted, "broker: queue backlog full: ..."), ErrTopicNotFound), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsRetryable(tt.err))
		})
	}
}

func TestUnarySendErrorClassification(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		indeterminate bool
		kind          error
	}{
		{"ErrorInfo indeterminate", withErrorInfo(status.New(codes.DeadlineExceeded, "flush timeout"), "INDETERMINATE", nil), true, context.DeadlineExceeded},
		{"ErrorInfo metadata", withErrorInfo(status.New(codes.Internal, "slave timeout"), "X", map[string]string{"indeterminate": "true"}), true, ErrInternal},
		{"ErrorInfo definite unavailable", withErrorInfo(status.New(codes.Unavailable, "not ready"), "DEFINITE", nil), false, ErrUnavailable},
		{"connection refused", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), false, ErrUnavailable},
		{"transport closing", status.Error(codes.Unavailable, "error reading from server: EOF"), true, ErrUnavailable},
		{"deadline without info", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true, context.DeadlineExceeded},
		{"invalid without info", status.Error(codes.InvalidArgument, "bad"), false, ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := unarySendError("b:1", tt.err)
			var ind *IndeterminateError
			assert.Equal(t, tt.indeterminate, errors.As(err, &ind))
			assert.ErrorIs(t, err, tt.kind)
		})
	}
}

func TestStreamError(t *testing.T) {
	err := streamError("b:1", &gantryv1.Error{Code: int32(codes.DeadlineExceeded), Message: "flush", Indeterminate: true})
	var ind *IndeterminateError
	require.ErrorAs(t, err, &ind)
	assert.Equal(t, "b:1", ind.Broker)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	err = streamError("b:1", &gantryv1.Error{Code: int32(codes.PermissionDenied), Message: "not writable"})
	require.NotErrorAs(t, err, &ind)
	assert.ErrorIs(t, err, ErrNoPermission)
}

func TestParseErrorInfoIgnoresGarbage(t *testing.T) {
	reason, md := parseErrorInfo([]byte{0xff, 0xff, 0xff})
	assert.Empty(t, reason)
	assert.Empty(t, md)
}
