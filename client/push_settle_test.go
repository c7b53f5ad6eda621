package client

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// RetryAfter's d maps to the smallest level of the default ladder whose
// delay is d or more, the last level beyond it.
func TestDelayLevelFor(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int32
	}{
		{-time.Second, 1}, {0, 1}, {time.Millisecond, 1}, {time.Second, 1},
		{time.Second + 1, 2}, {2 * time.Second, 2}, {5 * time.Second, 2}, {6 * time.Second, 3},
		{30 * time.Second, 4}, {90 * time.Second, 6}, {10 * time.Minute, 14}, {11 * time.Minute, 15},
		{time.Hour, 17}, {2 * time.Hour, 18}, {48 * time.Hour, 18},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, delayLevelFor(tt.d), "d %s", tt.d)
	}
	assert.Len(t, defaultDelayLevels, 18)
}

// A dead letter's reason is what the broker accepts: without the property
// separators, at most 1 KiB, not cut inside a character.
func TestDeadLetterReason(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "bad payload", "bad payload"},
		{"separators", "a\x01b\x02c", "a b c"},
		{"long", strings.Repeat("x", 2000), strings.Repeat("x", maxDeadLetterReason)},
		{"cut character", strings.Repeat("x", maxDeadLetterReason-1) + "é", strings.Repeat("x", maxDeadLetterReason-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, deadLetterReason(tt.in))
		})
	}
}

// RetryAfter and DeadLetter mark the message; the last call wins.
func TestSettlementMarks(t *testing.T) {
	m := &MessageExt{}
	assert.False(t, anySettled([]*MessageExt{m}))
	m.RetryAfter(3 * time.Second)
	assert.Equal(t, &settlement{after: 3 * time.Second}, m.settle)
	m.DeadLetter("x")
	assert.Equal(t, &settlement{dead: true, reason: "x"}, m.settle)
	m.RetryAfter(-time.Second)
	assert.Equal(t, &settlement{}, m.settle, "a negative delay is none")
	assert.True(t, anySettled([]*MessageExt{{}, m}))
	assert.Equal(t, ConsumeRetryLater, m.settledAs(ConsumeSuccess))
	m.DeadLetter("x")
	assert.Equal(t, ConsumeDeadLetter, m.settledAs(ConsumeSuccess))
	assert.Equal(t, ConsumeSuspend, (&MessageExt{}).settledAs(ConsumeSuspend), "unmarked: the batch's")
}
