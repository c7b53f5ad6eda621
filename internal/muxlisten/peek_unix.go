//go:build unix

package muxlisten

import (
	"io"
	"net"
	"syscall"
)

// peekSyscall reads len(b) bytes with MSG_PEEK, leaving them in the
// socket, waiting in the network poller (under the read deadline) while
// fewer are there. ok is false when c has no file descriptor to peek at.
func peekSyscall(c net.Conn, b []byte) (n int, ok bool, err error) {
	sc, isSC := c.(syscall.Conn)
	if !isSC {
		return 0, false, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var errno error
	rerr := raw.Read(func(fd uintptr) bool {
		for {
			k, _, e := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return false // wait for data
			case e != nil:
				errno = e
				return true
			case k == 0:
				errno = io.EOF
				return true
			}
			n = k
			return k >= len(b) // fewer: wait for more
		}
	})
	if rerr != nil {
		return n, true, rerr
	}
	if errno != nil {
		return n, true, errno
	}
	return n, true, nil
}
