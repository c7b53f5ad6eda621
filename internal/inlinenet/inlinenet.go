package inlinenet

import (
	"context"
	"net"
)

// Dial connects to the TCP address addr (host:port) and wraps the
// connection. Its signature is grpc.WithContextDialer's.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

// Listen returns a listener whose accepted connections are wrapped.
func Listen(l net.Listener) net.Listener { return listener{l} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
