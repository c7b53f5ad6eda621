package muxlisten

import (
	"bytes"
	"fmt"
)

// Protocol is what a connection's first bytes announce.
type Protocol uint8

const (
	// Unknown is anything else.
	Unknown Protocol = iota
	// HTTP2 is the HTTP/2 client preface ("PRI * HTTP/2.0"): gRPC
	// without TLS.
	HTTP2
	// Remoting is a RocketMQ remoting frame: a 4-byte big-endian length
	// whose first byte is below 0x16 (frames under 352 MiB; the remoting
	// limit is 16 MiB). Its first byte is never a letter.
	Remoting
	// HTTP1 is an HTTP/1.x request line (GET, POST, HEAD, ...).
	HTTP1
	// TLS is a TLS handshake record: a client configured for TLS on a
	// plaintext port.
	TLS
	numProtocols
)

var protocolNames = [numProtocols]string{"unknown", "gRPC (HTTP/2)", "RocketMQ remoting", "HTTP/1", "TLS"}

func (p Protocol) String() string {
	if p < numProtocols {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint8(p))
}

// PeekLen is the number of first bytes Detect looks at.
const PeekLen = 4

// http1Methods are the first PeekLen bytes of HTTP/1 request lines.
var http1Methods = [][]byte{
	[]byte("GET "), []byte("HEAD"), []byte("POST"), []byte("PUT "), []byte("DELE"),
	[]byte("OPTI"), []byte("PATC"), []byte("CONN"), []byte("TRAC"),
}

// Detect tells the protocol from a connection's first bytes; fewer than
// PeekLen are Unknown.
func Detect(b []byte) Protocol {
	if len(b) < PeekLen {
		return Unknown
	}
	b = b[:PeekLen]
	switch {
	case bytes.Equal(b, []byte("PRI ")):
		return HTTP2
	case b[0] == 0x16 && b[1] == 0x03:
		return TLS
	case b[0] < 0x16:
		return Remoting
	}
	for _, m := range http1Methods {
		if bytes.Equal(b, m) {
			return HTTP1
		}
	}
	return Unknown
}
