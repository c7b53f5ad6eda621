package client

import (
	"context"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// The user and ACL calls of Admin (docs/SECURITY.md, "Users and rules"):
// the users of brokers with authentication on, by default of every master
// of the cluster (a master's slaves copy its users). A broker with
// authentication off refuses them (FAILED_PRECONDITION).

// Roles of a User.
const (
	RoleAdmin   = "admin"   // may do everything
	RoleCluster = "cluster" // a broker's, nameserver's or controller's identity
	RoleNone    = "none"    // publishes and subscribes as its rules allow
)

// User is a user to create or update. SecretKey is never answered back.
type User struct {
	// AccessKey and SecretKey: 6 to 128 printable ASCII characters
	// without spaces, ',' or '='.
	AccessKey, SecretKey string
	// Role is RoleAdmin, RoleCluster or RoleNone ("" is RoleNone for a new
	// user, and keeps the role in UpdateUser).
	Role string
}

// ACLRule gives or refuses actions on a resource.
type ACLRule struct {
	// Resource is "Topic:<name>", "Group:<name>", a prefix
	// ("Topic:orders-*") or "*" (every topic and group).
	Resource string
	// Actions are "Pub", "Sub" or "All".
	Actions []string
	// Decision is "Allow" ("" too) or "Deny"; a matching Deny wins.
	Decision string
}

// UserInfo is a user as a broker lists it, without its secret key.
type UserInfo struct {
	// Broker is the gRPC address of the broker that answered.
	Broker    string
	AccessKey string
	// Role is RoleAdmin, RoleCluster or RoleNone.
	Role  string
	Rules []ACLRule
}

// ACLEntry is one rule of one user on one broker.
type ACLEntry struct {
	Broker    string
	AccessKey string
	ACLRule
}

// CreateUser creates a user on the given brokers' gRPC addresses, by
// default on every master of the cluster. A broker that has the user
// already answers ErrAlreadyExists.
func (a *Admin) CreateUser(ctx context.Context, u User, brokers ...string) error {
	req := &gantryv1.CreateUserRequest{AccessKey: u.AccessKey, SecretKey: u.SecretKey, Role: u.Role}
	return a.eachUserCall(ctx, brokers, "create user", func(ac gantryv1.AdminClient) error {
		_, err := ac.CreateUser(ctx, req)
		return err
	})
}

// UpdateUser changes a user's secret key (unless empty) and role (unless
// empty) on the given brokers, by default on every master; its rules
// stay.
func (a *Admin) UpdateUser(ctx context.Context, u User, brokers ...string) error {
	req := &gantryv1.UpdateUserRequest{AccessKey: u.AccessKey, SecretKey: u.SecretKey, Role: u.Role}
	return a.eachUserCall(ctx, brokers, "update user", func(ac gantryv1.AdminClient) error {
		_, err := ac.UpdateUser(ctx, req)
		return err
	})
}

// DeleteUser deletes a user and its rules from the given brokers, by
// default from every master. A broker without the user answers
// ErrNotFound. A broker refuses to delete its last admin user.
func (a *Admin) DeleteUser(ctx context.Context, accessKey string, brokers ...string) error {
	req := &gantryv1.DeleteUserRequest{AccessKey: accessKey}
	return a.eachUserCall(ctx, brokers, "delete user", func(ac gantryv1.AdminClient) error {
		_, err := ac.DeleteUser(ctx, req)
		return err
	})
}

// ListUsers returns the users whose access key contains filter ("" for
// all) of the given brokers, by default of every master, by broker then
// access key.
func (a *Admin) ListUsers(ctx context.Context, filter string, brokers ...string) ([]UserInfo, error) {
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return nil, err
	}
	var out []UserInfo
	err = a.each(refs, "list users", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.ListUsers(ctx, &gantryv1.ListUsersRequest{Filter: filter})
		for _, u := range resp.GetUsers() {
			out = append(out, userInfoFrom(r.addr, u))
		}
		return err
	})
	return out, err
}

// GetUser returns a user of the broker at addr (ErrNotFound without it).
func (a *Admin) GetUser(ctx context.Context, accessKey, addr string) (UserInfo, error) {
	ac, err := a.c.admin(addr)
	if err != nil {
		return UserInfo{}, err
	}
	resp, err := ac.GetUser(ctx, &gantryv1.GetUserRequest{AccessKey: accessKey})
	if err != nil {
		return UserInfo{}, callError("get user", addr, err, ErrNotFound)
	}
	return userInfoFrom(addr, resp.GetUser()), nil
}

// CreateACL adds rules to a user on the given brokers, by default on
// every master. A resource the user has a rule on already is
// ErrAlreadyExists (UpdateACL replaces it).
func (a *Admin) CreateACL(ctx context.Context, accessKey string, rules []ACLRule, brokers ...string) error {
	req := &gantryv1.CreateAclRequest{AccessKey: accessKey, Rules: aclRulesProto(rules)}
	return a.eachUserCall(ctx, brokers, "create acl", func(ac gantryv1.AdminClient) error {
		_, err := ac.CreateAcl(ctx, req)
		return err
	})
}

// UpdateACL sets a user's rules on their resources (replacing the rule a
// resource has, adding the others) on the given brokers, by default on
// every master.
func (a *Admin) UpdateACL(ctx context.Context, accessKey string, rules []ACLRule, brokers ...string) error {
	req := &gantryv1.UpdateAclRequest{AccessKey: accessKey, Rules: aclRulesProto(rules)}
	return a.eachUserCall(ctx, brokers, "update acl", func(ac gantryv1.AdminClient) error {
		_, err := ac.UpdateAcl(ctx, req)
		return err
	})
}

// DeleteACL removes a user's rules on resources (all its rules when none
// is given) on the given brokers, by default on every master. A resource
// the user has no rule on is ErrNotFound, and that broker removes nothing.
func (a *Admin) DeleteACL(ctx context.Context, accessKey string, resources []string, brokers ...string) error {
	req := &gantryv1.DeleteAclRequest{AccessKey: accessKey, Resources: resources}
	return a.eachUserCall(ctx, brokers, "delete acl", func(ac gantryv1.AdminClient) error {
		_, err := ac.DeleteAcl(ctx, req)
		return err
	})
}

// ListACL returns the rules of the user of accessKey (every user's when
// "") whose resource contains resource ("" for all), of the given
// brokers, by default of every master.
func (a *Admin) ListACL(ctx context.Context, accessKey, resource string, brokers ...string) ([]ACLEntry, error) {
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return nil, err
	}
	var out []ACLEntry
	err = a.each(refs, "list acl", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.ListAcl(ctx, &gantryv1.ListAclRequest{AccessKey: accessKey, Resource: resource})
		for _, e := range resp.GetEntries() {
			out = append(out, ACLEntry{Broker: r.addr, AccessKey: e.GetAccessKey(), ACLRule: aclRuleFrom(e.GetRule())})
		}
		return err
	})
	return out, err
}

// eachUserCall runs call on every target broker, joining the failures.
func (a *Admin) eachUserCall(ctx context.Context, brokers []string, op string, call func(gantryv1.AdminClient) error) error {
	refs, err := a.targets(ctx, brokers)
	if err != nil {
		return err
	}
	return a.each(refs, op, func(_ brokerRef, ac gantryv1.AdminClient) error { return call(ac) })
}

func userInfoFrom(addr string, u *gantryv1.UserInfo) UserInfo {
	info := UserInfo{Broker: addr, AccessKey: u.GetAccessKey(), Role: u.GetRole()}
	if info.Role == "" {
		info.Role = RoleNone
	}
	for _, r := range u.GetRules() {
		info.Rules = append(info.Rules, aclRuleFrom(r))
	}
	return info
}

func aclRuleFrom(r *gantryv1.AclRule) ACLRule {
	return ACLRule{Resource: r.GetResource(), Actions: r.GetActions(), Decision: r.GetDecision()}
}

func aclRulesProto(rules []ACLRule) []*gantryv1.AclRule {
	out := make([]*gantryv1.AclRule, len(rules))
	for i, r := range rules {
		out[i] = &gantryv1.AclRule{Resource: r.Resource, Actions: r.Actions, Decision: r.Decision}
	}
	return out
}
