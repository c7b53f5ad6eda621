package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/internal/exposure"
)

// authFlags are the authentication flags of gantry namesrv and gantry
// controller (docs/SECURITY.md, "Cluster").
type authFlags struct {
	enabled   bool
	aclFile   string
	allowOpen bool
}

func (a *authFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&a.enabled, "auth", false, "authentication on: route changes and controller calls need a cluster user of --acl-file, "+
		"topic deletion and elections an admin; refuses to start with no users")
	f.StringVar(&a.aclFile, "acl-file", "", "the users' file (JSON, docs/SECURITY.md), reloaded when it changes; required with --auth")
	f.BoolVar(&a.allowOpen, "allow-remote-without-auth", false, "listen beyond loopback with authentication off (anyone who reaches "+
		"the ports may change the routes and the elections; a warning is logged)")
}

// check refuses --auth without a file, and a file without --auth: users
// that would check nothing.
func (a authFlags) check() error {
	switch {
	case a.enabled && a.aclFile == "":
		return errors.New("--auth needs --acl-file: the users' file (docs/SECURITY.md, \"Users and rules\")")
	case !a.enabled && a.aclFile != "":
		return fmt.Errorf("--acl-file %s without --auth: the users would check nothing; add --auth", a.aclFile)
	}
	return nil
}

// open opens the users' file with --auth, refusing one with no users; nil
// without --auth.
func (a authFlags) open(logger *slog.Logger) (*auth.Store, *auth.Guard, error) {
	if !a.enabled {
		return nil, nil, nil
	}
	st, err := auth.OpenStore(auth.StoreConfig{Path: a.aclFile, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("--acl-file: %w", err)
	}
	if st.Users().Len() == 0 {
		_ = st.Close()
		return nil, nil, fmt.Errorf("--auth with no users in %s: add a cluster user for the brokers and an admin (docs/SECURITY.md, \"Users and rules\")", a.aclFile)
	}
	return st, auth.NewGuard(auth.GuardConfig{Users: st.Users, Logger: logger}), nil
}

// listenAddr is a listen address and the flag that sets it.
type listenAddr struct{ flag, addr string }

// checkOpen refuses, with authentication off, listen addresses beyond
// loopback unless --allow-remote-without-auth (then it warns loudly):
// risk says what anyone reaching them could do. With authentication on it
// warns of a raft address beyond loopback, which authentication does not
// cover.
func (a authFlags) checkOpen(logger *slog.Logger, who, risk string, addrs []listenAddr, raft string) error {
	if a.enabled {
		if raft != "" && exposure.Beyond(raft) {
			logger.Warn("the controller's raft port is not covered by authentication: protect it with mutual TLS or a private network "+
				"(docs/SECURITY.md, \"Cluster\")", "raft", raft)
		}
		return nil
	}
	var open []string
	for _, la := range addrs {
		if exposure.Beyond(la.addr) {
			open = append(open, la.flag+" "+exposure.Name(la.addr))
		}
	}
	if len(open) == 0 {
		return nil
	}
	if a.allowOpen {
		logger.Warn("LISTENING BEYOND LOOPBACK WITH AUTHENTICATION OFF (--allow-remote-without-auth): anyone who reaches these ports "+
			risk+"; run with --auth --acl-file (docs/SECURITY.md)", "ports", strings.Join(open, ", "))
		return nil
	}
	return fmt.Errorf("%s: refusing to listen beyond loopback with authentication off (%s): anyone who reaches these ports %s. "+
		"Run with --auth --acl-file FILE (docs/SECURITY.md, \"Cluster\"), listen on loopback addresses (127.0.0.1:port), "+
		"or pass --allow-remote-without-auth to run open anyway", who, strings.Join(open, ", "), risk)
}
