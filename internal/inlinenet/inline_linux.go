package inlinenet

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"google.golang.org/grpc/mem"
)

// Wrap returns c with inline reads and writes if it is a *net.TCPConn,
// else c.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{TCPConn: tc, raw: raw}
}

// Conn is a TCP connection whose Read, Write and ReadOnReady are inline
// system calls; everything else is the *net.TCPConn's. It is safe for
// concurrent use, as net.Conn is.
type Conn struct {
	*net.TCPConn
	raw syscall.RawConn
}

// maxRW is the most one read or write call moves, as in package net.
const maxRW = 1 << 30

// Read reads into p, waiting in the network poller (and honouring the read
// deadline) while nothing is there.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p = p[:min(len(p), maxRW)]
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		n, errno = readInline(fd, p)
		return errno != syscall.EAGAIN
	})
	return c.result("read", n, errno, err)
}

// ReadOnReady is gRPC's optional read (readyreader.Reader in its
// transport): it waits for data, then takes a buffer of bufSize from pool
// and reads into it. The buffer is the caller's to put back.
func (c *Conn) ReadOnReady(bufSize int, pool mem.BufferPool) (*[]byte, int, error) {
	var buf *[]byte
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		buf = pool.Get(bufSize)
		n, errno = readInline(fd, *buf)
		if errno == 0 && n > 0 {
			return true
		}
		pool.Put(buf)
		buf = nil
		return errno != syscall.EAGAIN
	})
	if buf == nil {
		_, err = c.result("read", 0, errno, err)
		return nil, 0, err
	}
	return buf, n, nil
}

// Write writes all of b, waiting in the network poller (and honouring the
// write deadline) while the socket's buffer is full.
func (c *Conn) Write(b []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			k, e := writeInline(fd, b[n:min(len(b), n+maxRW)])
			switch {
			case e == 0 && k > 0:
				n += k
			case e == 0: // never for a socket; not a loop
				errno = syscall.EIO
				return true
			case e == syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno == 0 {
		return n, nil
	}
	_, err = c.result("write", n, errno, err)
	return n, err
}

// result turns a call's outcome into Read's: n and nil, io.EOF for an
// orderly shutdown by the peer, or a *net.OpError as package net gives.
func (c *Conn) result(op string, n int, errno syscall.Errno, err error) (int, error) {
	switch {
	case err != nil: // from the poller: a deadline, or the connection closed
	case errno != 0:
		err = os.NewSyscallError(op, errno)
	case n > 0 || op == "write":
		return n, nil
	default:
		return 0, io.EOF
	}
	return n, &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// readInline is read(2) as an inline call, retried on EINTR.
func readInline(fd uintptr, p []byte) (int, syscall.Errno) { return inline(syscall.SYS_READ, fd, p) }

// writeInline is write(2) as an inline call, retried on EINTR.
func writeInline(fd uintptr, b []byte) (int, syscall.Errno) { return inline(syscall.SYS_WRITE, fd, b) }

// inline makes the read or write trap on fd over b (not empty).
func inline(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		runtime.KeepAlive(b)
		if e != 0 {
			return 0, e
		}
		return int(r), 0
	}
}
