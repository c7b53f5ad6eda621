package tlsx

import (
	"fmt"
	"strings"
)

// Mode is tls.server.mode: whether a port speaks TLS, and whether it still
// takes plaintext clients.
type Mode uint8

const (
	// Disabled serves plaintext only (the default): a TLS client is
	// closed.
	Disabled Mode = iota
	// Permissive serves TLS and plaintext clients on the same port (the
	// first bytes of a connection tell them apart): the step between
	// plaintext and TLS while clients move.
	Permissive
	// Enforcing serves TLS clients only: a plaintext client is told, in
	// its protocol where the port can, that TLS is required.
	Enforcing
)

var modeNames = []string{"disabled", "permissive", "enforcing"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses disabled, permissive or enforcing (any case).
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Mode(i), nil
		}
	}
	return Disabled, fmt.Errorf("tlsx: mode %q: want disabled, permissive or enforcing", s)
}

// ClientAuth is tls.server.need.client.auth: whether a server asks its
// clients for a certificate (mutual TLS).
type ClientAuth uint8

const (
	// NoClientAuth asks for no client certificate (the default).
	NoClientAuth ClientAuth = iota
	// OptionalClientAuth asks for one and verifies it when one is sent.
	OptionalClientAuth
	// RequireClientAuth refuses a client without a certificate the CA
	// signed.
	RequireClientAuth
)

var clientAuthNames = []string{"none", "optional", "require"}

func (a ClientAuth) String() string {
	if int(a) < len(clientAuthNames) {
		return clientAuthNames[a]
	}
	return fmt.Sprintf("ClientAuth(%d)", uint8(a))
}

// ParseClientAuth parses none, optional or require (any case).
func ParseClientAuth(s string) (ClientAuth, error) {
	for i, n := range clientAuthNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return ClientAuth(i), nil
		}
	}
	return NoClientAuth, fmt.Errorf("tlsx: client auth %q: want none, optional or require", s)
}
