package broker

import (
	"fmt"

	"github.com/gantrymq/gantry/auth"
)

// openAuth opens the users of ACLFile when authentication is on
// (docs/SECURITY.md): a broker with authentication on and nobody able to
// sign in would refuse everyone, so it refuses to start instead.
func (b *Broker) openAuth() error {
	if !b.cfg.AuthenticationEnabled {
		return nil
	}
	st, err := auth.OpenStore(auth.StoreConfig{Path: b.cfg.ACLFile, Logger: b.cfg.Logger})
	if err != nil {
		return fmt.Errorf("broker: authenticationEnabled: %w; want a users file (docs/SECURITY.md, \"Users and rules\")", err)
	}
	if st.Users().Len() == 0 {
		_ = st.Close()
		return fmt.Errorf("%w: authenticationEnabled with no users in aclFile %s: add an admin user (docs/SECURITY.md, \"Users and rules\")",
			ErrInvalidConfig, b.cfg.ACLFile)
	}
	b.users = st
	b.guard = auth.NewGuard(auth.GuardConfig{Users: st.Users, Window: b.cfg.AuthWindow,
		NoAuthorization: b.cfg.SkipAuthorization, Now: b.cfg.Now, Logger: b.cfg.Logger})
	return nil
}

// Guard authenticates and authorizes requests; nil when authentication
// is off (a nil *auth.Guard allows everything).
func (b *Broker) Guard() *auth.Guard { return b.guard }

// Users is the users' store; nil when authentication is off.
func (b *Broker) Users() *auth.Store { return b.users }

// closeUsers stops watching the users' file.
func (b *Broker) closeUsers() {
	if b.users != nil {
		_ = b.users.Close()
	}
}
