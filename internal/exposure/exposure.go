// Package exposure tells a listen address reachable only from this
// machine (loopback) from one reachable beyond it, for the servers' safe
// defaults: a broker, nameserver or controller with authentication off
// refuses to listen beyond loopback unless told to (docs/SECURITY.md,
// "Cluster").
package exposure

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// resolveTimeout bounds the lookup of a host name in a listen address.
const resolveTimeout = 5 * time.Second

// Beyond reports whether listening on addr (host:port) accepts
// connections from beyond this machine: an empty or unspecified host
// (0.0.0.0, ::: every interface), a non-loopback IP, or a name that
// resolves to one. A name that does not resolve, or an address that does
// not parse, counts as beyond.
func Beyond(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return !ip.IsLoopback()
	}
	if host == "" {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return true
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return true
		}
	}
	return false
}

// BeyondAddr is Beyond for a listener's address: anything but a loopback
// TCP address counts as beyond.
func BeyondAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return true
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	return !ok || !ip.Unmap().IsLoopback()
}

// Name is addr as a refusal names it: a wildcard one says it listens on
// every interface.
func Name(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
		return addr + " (every interface)"
	}
	return addr
}
