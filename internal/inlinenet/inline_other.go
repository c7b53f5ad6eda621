//go:build !linux

package inlinenet

import "net"

// Wrap returns c: inline calls are made on Linux only.
func Wrap(c net.Conn) net.Conn { return c }
