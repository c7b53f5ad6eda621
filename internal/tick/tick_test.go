package tick

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		done := make(chan struct{})
		go func() { Every(ctx, time.Second, func() { n++ }); close(done) }()
		time.Sleep(3500 * time.Millisecond)
		cancel()
		<-done
		if n != 3 {
			t.Fatalf("ran %d times in 3.5 s, want 3", n)
		}
	})
}
