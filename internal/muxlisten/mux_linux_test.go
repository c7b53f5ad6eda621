//go:build linux

package muxlisten_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/internal/inlinenet"
	"github.com/gantrymq/gantry/internal/muxlisten"
)

// The connection handed on is the accepted TCP connection itself (its
// first bytes peeked, not read), so inlinenet still wraps it.
func TestHandsOnTheTCPConn(t *testing.T) {
	m, _, rem := startMux(t, muxlisten.Config{})
	c := dial(t, m.Addr())
	_, err := c.Write(remotingFrame)
	assert.NoError(t, err)
	s, err := inlinenet.Listen(rem).Accept()
	assert.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	assert.IsType(t, &inlinenet.Conn{}, s)
	assert.Equal(t, remotingFrame, readN(t, s, len(remotingFrame)))
}
