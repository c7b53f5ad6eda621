package streamx

import (
	"context"
	"errors"
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestRecv(t *testing.T) {
	defer goleak.VerifyNone(t)
	vals := []int{1, 2, 3}
	i := 0
	ch := Recv(t.Context(), func() (int, error) {
		if i == len(vals) {
			return 0, io.EOF
		}
		i++
		return vals[i-1], nil
	})
	for _, want := range vals {
		if m := <-ch; m.Err != nil || m.Value != want {
			t.Fatalf("got %+v, want %d", m, want)
		}
	}
	if m := <-ch; !errors.Is(m.Err, io.EOF) {
		t.Fatalf("got %+v, want EOF", m)
	}

	ctx, cancel := context.WithCancel(t.Context())
	block := make(chan struct{})
	ch = Recv(ctx, func() (int, error) { <-block; return 0, nil })
	cancel()
	close(block) // the goroutine sees ctx done and ends without a reader
	_ = ch
}
