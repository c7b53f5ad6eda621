package server

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// keptListener lends a listener to one Server: its Close ends the Server's
// Accept without closing the socket, which the next Server of a Member
// accepts on. A restart for a change of role so keeps its ports, which
// another process could otherwise take between the close and the bind.
type keptListener struct {
	*net.TCPListener
	closed atomic.Bool
}

// keep lends l to a new Server.
func keep(l *net.TCPListener) *keptListener {
	_ = l.SetDeadline(time.Time{}) // undo the previous lender's Close
	return &keptListener{TCPListener: l}
}

func (k *keptListener) Accept() (net.Conn, error) {
	for {
		c, err := k.TCPListener.Accept()
		if k.closed.Load() {
			if c != nil {
				c.Close() // arrived as the Server closed: the client reconnects to the next one
			}
			return nil, net.ErrClosed
		}
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() {
			continue // a Close that raced with the previous lender's
		}
		return c, err
	}
}

// Close ends Accept, now and for good, and leaves the socket open.
func (k *keptListener) Close() error {
	if k.closed.Swap(true) {
		return nil
	}
	return k.TCPListener.SetDeadline(time.Now())
}
