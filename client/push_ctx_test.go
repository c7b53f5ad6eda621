package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A handler call's context carries the consume timeout: its deadline, a
// Done channel that closes then with DeadlineExceeded, the parent's
// values and cancellation; after the call it is canceled.
func TestCallCtx(t *testing.T) {
	type key struct{}
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancelParent()

	c := &callCtx{Context: parent, deadline: time.Now().Add(30 * time.Millisecond)}
	d, ok := c.Deadline()
	assert.True(t, ok)
	assert.Equal(t, c.deadline, d)
	assert.Equal(t, "v", c.Value(key{}))
	assert.NoError(t, c.Err())
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
	c.release()

	c2 := &callCtx{Context: parent, deadline: time.Now().Add(time.Hour)}
	c2.release() // never asked for Done during the call
	require.ErrorIs(t, c2.Err(), context.Canceled, "used after its call")

	c3 := &callCtx{Context: parent, deadline: time.Now().Add(time.Hour)}
	done := c3.Done()
	cancelParent()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the parent's cancellation did not reach the call")
	}
	c3.release()
}
