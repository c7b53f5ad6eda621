package nameserver

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/auth/grpcauth"
	"github.com/gantrymq/gantry/remoting"
)

// grpcClasses is the right each method of the NameServer service needs
// with authentication on (docs/SECURITY.md, "Cluster"): a route change
// needs a cluster (or admin) user, a query nothing. A method missing here
// is refused (a test checks that none is).
var grpcClasses = map[string]auth.Class{
	gantryv1.NameServer_RegisterBroker_FullMethodName:   auth.ClassCluster,
	gantryv1.NameServer_UnregisterBroker_FullMethodName: auth.ClassCluster,
	gantryv1.NameServer_GetRoute_FullMethodName:         auth.ClassPublic,
	gantryv1.NameServer_GetClusterInfo_FullMethodName:   auth.ClassPublic,
	gantryv1.NameServer_ListTopics_FullMethodName:       auth.ClassPublic,
}

// MethodClass returns the right a NameServer gRPC method needs; ok is
// false for a method the nameserver does not classify (another service's:
// answered Unimplemented).
func MethodClass(fullMethod string) (c auth.Class, ok bool) {
	c, ok = grpcClasses[fullMethod]
	return c, ok
}

// RemotingClass returns the right a remoting request code needs; ok is
// false for a code the nameserver does not handle (answered
// REQUEST_CODE_NOT_SUPPORTED).
func RemotingClass(code remoting.RequestCode) (c auth.Class, ok bool) {
	for _, r := range remotingRoutes {
		if r.code == code {
			return r.class, true
		}
	}
	return 0, false
}

// openAuth opens cfg's users when authentication is on: a nameserver
// nobody can sign in to would refuse every broker, so it refuses to
// start instead.
func openAuth(cfg Config) (*auth.Store, *auth.Guard, error) {
	if !cfg.AuthenticationEnabled {
		return nil, nil, nil
	}
	st, err := auth.OpenStore(auth.StoreConfig{Path: cfg.ACLFile, Logger: cfg.Logger})
	if err != nil {
		return nil, nil, fmt.Errorf("nameserver: authentication: %w; want a users file (docs/SECURITY.md, \"Users and rules\")", err)
	}
	if st.Users().Len() == 0 {
		_ = st.Close()
		return nil, nil, fmt.Errorf("nameserver: authentication on with no users in %s: add a cluster user for the brokers and an admin (docs/SECURITY.md, \"Users and rules\")", cfg.ACLFile)
	}
	return st, auth.NewGuard(auth.GuardConfig{Users: st.Users, Window: cfg.AuthWindow, Now: cfg.Now, Logger: cfg.Logger}), nil
}

// grpcClass is the class of a method called on the nameserver: its
// table's, public for another service's (answered Unimplemented), a
// refusal for a NameServer method missing from the table.
func grpcClass(method string) (auth.Class, error) {
	if class, ok := grpcClasses[method]; ok {
		return class, nil
	}
	if isNameServerMethod(method) {
		return 0, status.Errorf(codes.PermissionDenied, "nameserver: %s has no access class: refused", method)
	}
	return auth.ClassPublic, nil
}

// isNameServerMethod reports whether method is one of the NameServer
// service's.
func isNameServerMethod(method string) bool {
	desc := gantryv1.NameServer_ServiceDesc
	for _, m := range desc.Methods {
		if method == "/"+desc.ServiceName+"/"+m.MethodName {
			return true
		}
	}
	for _, s := range desc.Streams {
		if method == "/"+desc.ServiceName+"/"+s.StreamName {
			return true
		}
	}
	return false
}

// stillCluster checks, at each registration of a stream, that the user
// who opened it is still a cluster user of the current ACL file: a
// revoked broker's stream ends at its next registration.
func (s *Server) stillCluster(ctx context.Context) error {
	p := auth.FromContext(ctx)
	if s.users == nil || p == nil {
		return nil
	}
	from := grpcauth.PeerAddr(ctx)
	cur, ok := s.users.Users().Lookup(p.AccessKey())
	if !ok {
		return grpcauth.Status(&auth.Error{Kind: auth.ErrUnauthenticated, Reason: auth.ReasonUnknownKey, AccessKey: p.AccessKey(),
			Detail: "the user was removed from the ACL file: registration stream ended"})
	}
	if err := s.guard.Authorize(cur, auth.ClassCluster, gantryv1.NameServer_RegisterBroker_FullMethodName, from); err != nil {
		return grpcauth.Status(err)
	}
	return nil
}

// guardedRemoting authenticates every remoting request (a present but
// wrong signature is refused whatever the code) and authorizes its code's
// class before the handler runs; a refusal is NO_PERMISSION naming why.
type guardedRemoting struct {
	next  remoting.Handler
	guard *auth.Guard
}

func (g guardedRemoting) ServeRemoting(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	from := ""
	if c != nil {
		from = c.RemoteAddr().String()
	}
	p, err := g.guard.Remoting(req.ExtFields, req.Body, from)
	if err == nil {
		class, ok := RemotingClass(req.RequestCode())
		if !ok {
			class = auth.ClassPublic // answered REQUEST_CODE_NOT_SUPPORTED
		}
		err = g.guard.Authorize(p, class, req.RequestCode().String(), from)
	}
	if err != nil {
		return remoting.ErrorResponse(req, remoting.ResNoPermission, "%s", err)
	}
	return g.next.ServeRemoting(ctx, c, req)
}
