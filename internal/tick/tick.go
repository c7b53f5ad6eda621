// Package tick runs periodic work for the background loops of several
// components.
package tick

import (
	"context"
	"time"
)

// Every calls f every d until ctx ends. It returns when ctx ends; f runs on
// the caller's goroutine, never concurrently with itself.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
