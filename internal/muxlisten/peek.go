package muxlisten

import (
	"io"
	"net"
)

// peek fills b with the connection's first bytes and returns the
// connection to hand on: c itself when the bytes could be read without
// consuming them (peekSyscall), else a wrapper that replays them. n is
// how many arrived before an error (the read deadline, the peer's EOF).
func peek(c net.Conn, b []byte) (net.Conn, int, error) {
	if n, ok, err := peekSyscall(c, b); ok {
		return c, n, err
	}
	n, err := io.ReadFull(c, b)
	if err != nil {
		return c, n, err
	}
	return &replayConn{Conn: c, head: append([]byte(nil), b...)}, n, nil
}

// replayConn returns head before reading the connection.
type replayConn struct {
	net.Conn
	head []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
