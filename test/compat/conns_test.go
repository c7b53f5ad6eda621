package compat

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// tcpConn is one IPv4 TCP socket of this machine, from /proc/net/tcp.
type tcpConn struct {
	localPort, remotePort int
	state                 string // hex state: 01 ESTABLISHED, 08 CLOSE_WAIT, ...
}

// tcpStates names the states counted as open.
var tcpStates = map[string]string{"01": "ESTABLISHED", "08": "CLOSE_WAIT"}

// readTCP lists the IPv4 TCP sockets of the machine (loopback included).
// ok is false where /proc/net/tcp cannot be read (not Linux).
func readTCP() (conns []tcpConn, ok bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan() // header
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 4 {
			continue
		}
		lp, lok := hexPort(fields[1])
		rp, rok := hexPort(fields[2])
		if lok && rok {
			conns = append(conns, tcpConn{localPort: lp, remotePort: rp, state: fields[3]})
		}
	}
	return conns, s.Err() == nil
}

// hexPort parses the port of a /proc/net/tcp address (0100007F:2710).
func hexPort(addr string) (int, bool) {
	_, p, ok := strings.Cut(addr, ":")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(p, 16, 16)
	return int(v), err == nil
}

// openConns describes the open sockets at either end of connections to
// port: the clients' (remote port = port) and the server's (local port =
// port, the listener aside).
func openConns(port int) (clients, servers []string, ok bool) {
	conns, ok := readTCP()
	if !ok {
		return nil, nil, false
	}
	for _, c := range conns {
		name, isOpen := tcpStates[c.state]
		switch {
		case !isOpen:
		case c.remotePort == port:
			clients = append(clients, fmt.Sprintf("client :%d -> :%d %s", c.localPort, port, name))
		case c.localPort == port:
			servers = append(servers, fmt.Sprintf("server :%d <- :%d %s", port, c.remotePort, name))
		}
	}
	return clients, servers, true
}

func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(p)
	return n
}

// waitConns polls openConns(port) until done says the sockets are as
// wanted or 10 s passed, and returns the last answer.
func waitConns(port int, done func(clients, servers []string) bool) (clients, servers []string, ok bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		clients, servers, ok = openConns(port)
		if !ok || done(clients, servers) || time.Now().After(deadline) {
			return clients, servers, ok
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkBrokerConns checks, once the official clients of the test are shut
// down (the test's cleanups ran), that no connection to the broker's
// remoting port is left open at either end: the clients closed theirs and
// the broker closed its own. The official client never closes its
// nameserver connection (its route client is not shut down with it), so
// those are only logged.
func (e *env) checkBrokerConns() {
	port := portOf(e.c.BrokerRemotingAddr())
	clients, servers, ok := waitConns(port, func(c, s []string) bool { return len(c)+len(s) == 0 })
	if !ok {
		e.t.Log("connection check skipped: /proc/net/tcp is not readable")
		return
	}
	if len(clients)+len(servers) > 0 {
		e.t.Errorf("after every official client shut down, connections to the broker's remoting port are still open: %v %v", clients, servers)
	}
	if clients, _, _ := openConns(portOf(e.ns)); len(clients) > 0 {
		e.t.Logf("the official clients left %d nameserver connections open (their route client is never shut down)", len(clients))
	}
}

// checkServerConns checks, once the cluster is closed, that the broker
// and the nameserver closed every connection they had accepted.
func (e *env) checkServerConns(brokerPort int) {
	for _, port := range []int{brokerPort, portOf(e.ns)} {
		_, servers, ok := waitConns(port, func(_, s []string) bool { return len(s) == 0 })
		if ok && len(servers) > 0 {
			e.t.Errorf("after the cluster closed, its remoting port %d still has connections open: %v", port, servers)
		}
	}
}
