//go:build !unix

package muxlisten

import "net"

// peekSyscall is Unix-only: elsewhere peek reads and replays.
func peekSyscall(net.Conn, []byte) (int, bool, error) { return 0, false, nil }
