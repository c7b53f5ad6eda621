package server

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/exposure"
	"github.com/gantrymq/gantry/replication"
)

// The broker among its peers (docs/SECURITY.md, "Cluster"): it signs its
// registrations with the nameservers, its calls to the controllers and,
// as a slave, its hello to its master with its inner credentials (a
// cluster user); as a master with authentication on it admits only the
// slaves a cluster user signed for.

// innerSigner is the signer of the broker's inner credentials
// (innerClientAuthenticationCredentials), nil without them.
func innerSigner(bc broker.Config) (*auth.Signer, error) {
	if bc.InnerAccessKey == "" {
		return nil, nil
	}
	s, err := auth.NewSigner(bc.InnerAccessKey, bc.InnerSecretKey)
	if err != nil {
		return nil, fmt.Errorf("broker: innerClientAuthenticationCredentials: %w", err)
	}
	return s, nil
}

// haAuthenticator admits the slaves whose hello a cluster (or admin) user
// signed within the guard's window (replication.MasterConfig.Authenticate).
func haAuthenticator(g *auth.Guard) func(replication.SignedHello, string) error {
	return func(h replication.SignedHello, from string) error {
		p, err := g.GRPC(h.Content, h.Date, h.Authorization, from)
		if err != nil {
			return err
		}
		return g.Authorize(p, auth.ClassCluster, "HA replication", from)
	}
}

// ErrOpenWithoutAuth is wrapped by the refusal of a broker that would
// listen beyond loopback with authentication off.
var ErrOpenWithoutAuth = errors.New("listening beyond loopback with authentication off")

// checkExposure refuses a broker with authentication off whose gRPC,
// remoting or HA port would listen beyond loopback, unless
// allowRemoteWithoutAuth says so (then it warns): anyone reaching those
// ports could read and change everything, and copy the whole log. The
// HTTP port (metrics, health) is not counted: authentication does not
// cover it either.
func checkExposure(cfg Config, bc broker.Config) error {
	if bc.AuthenticationEnabled {
		if bc.InnerAccessKey == "" && (len(bc.NamesrvAddr) > 0 || bc.EnableControllerMode || bc.BrokerRole == broker.Slave) {
			bc.WithDefaults().Logger.Warn("authenticationEnabled without innerClientAuthenticationCredentials: the broker's registrations, " +
				"controller calls and replication are unsigned, and nameservers, controllers and masters with authentication on refuse them " +
				"(docs/SECURITY.md, \"Cluster\")")
		}
		return nil
	}
	g, _, r := bc.ListenAddrs()
	ports := []struct {
		what, addr string
		lis        net.Listener
	}{
		{"gRPC port (grpcListenAddr)", g, cfg.GRPCListener},
		{"remoting port (bindAddress, listenPort)", r, cfg.RemotingListener},
	}
	if bc.BrokerRole != broker.Slave || cfg.HAListener != nil {
		ports = append(ports, struct {
			what, addr string
			lis        net.Listener
		}{"HA port (bindAddress, haListenPort)", haListenAddr(cfg), cfg.HAListener})
	}
	var open []string
	for _, p := range ports {
		addr, beyond := p.addr, false
		if p.lis != nil {
			addr, beyond = p.lis.Addr().String(), exposure.BeyondAddr(p.lis.Addr())
		} else {
			beyond = exposure.Beyond(addr)
		}
		if beyond {
			open = append(open, fmt.Sprintf("%s on %s", p.what, exposure.Name(addr)))
		}
	}
	if len(open) == 0 {
		return nil
	}
	if bc.AllowRemoteWithoutAuth {
		bc.WithDefaults().Logger.Warn("LISTENING BEYOND LOOPBACK WITH AUTHENTICATION OFF (allowRemoteWithoutAuth=true): "+
			"anyone who reaches these ports can send, read, change and delete everything, and copy the whole log; "+
			"enable authenticationEnabled (docs/SECURITY.md)", "ports", strings.Join(open, "; "))
		return nil
	}
	return fmt.Errorf("broker: %w: %s: anyone who reaches them could send, read, change and delete everything, and copy the whole log. "+
		"Enable authentication (authenticationEnabled=true with users in aclFile, docs/SECURITY.md), listen on loopback only "+
		"(bindAddress=127.0.0.1), or set allowRemoteWithoutAuth=true in broker.conf to run open anyway",
		ErrOpenWithoutAuth, strings.Join(open, "; "))
}
