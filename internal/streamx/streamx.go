// Package streamx helps gRPC stream handlers that must wait for more than
// the next message (a shutdown, say): Recv reads the stream on a goroutine
// of its own.
package streamx

import "context"

// Msg is what one Recv call returned.
type Msg[T any] struct {
	Value T
	Err   error
}

// Recv calls recv until it fails, sending each result on the returned
// channel. The goroutine ends after the first error, or when ctx (the
// stream's context, which ends with the handler) is done; the channel is
// never closed, so select on ctx too.
func Recv[T any](ctx context.Context, recv func() (T, error)) <-chan Msg[T] {
	ch := make(chan Msg[T])
	go func() {
		for {
			v, err := recv()
			select {
			case ch <- Msg[T]{v, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}
