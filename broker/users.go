package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/gantrymq/gantry/auth"
)

// The users and rules of the broker's aclFile, changed by an admin
// (gantry admin createUser ... listAcl, docs/SECURITY.md "Users and
// rules"): the changes are a master's, whose slaves copy its users with
// the metadata (replicameta.go); a slave refuses them with ErrNotMaster.

// ErrAuthenticationOff: a user or rule call on a broker without users.
var ErrAuthenticationOff = errors.New("broker: authentication is off on this broker (authenticationEnabled=false)")

// ErrLastAdmin: a change would leave the users without an admin, and
// nobody could change them again but by editing the file.
var ErrLastAdmin = errors.New("broker: no admin user would be left")

// ACLEntry is one rule of one user.
type ACLEntry struct {
	AccessKey string
	auth.Rule
}

// placeholderSecret stands for a user's secret key when only its rules
// are checked.
const placeholderSecret = "placeholder"

// parseUserRole reads a role as gantry admin takes it: admin, cluster, or
// none (also "" and RocketMQ's Normal) for a user of its rules; Super is
// admin.
func parseUserRole(s string) (auth.Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "user", "normal":
		return auth.RoleUser, nil
	case "admin", "super":
		return auth.RoleAdmin, nil
	case "cluster":
		return auth.RoleCluster, nil
	}
	return "", fmt.Errorf("%w: role %q: want admin, cluster or none", ErrInvalidArgument, s)
}

// canonicalRule writes a rule as the file keeps it: "Topic:" and
// "Group:" capitalized, actions "Pub", "Sub" or "All" once each, decision
// "Allow" or "Deny". What it does not recognize it leaves for the checks
// to name.
func canonicalRule(r auth.Rule) auth.Rule {
	out := auth.Rule{Resource: strings.TrimSpace(r.Resource), Decision: r.Decision}
	if kind, name, ok := strings.Cut(out.Resource, ":"); ok {
		switch strings.ToLower(strings.TrimSpace(kind)) {
		case "topic":
			out.Resource = "Topic:" + strings.TrimSpace(name)
		case "group":
			out.Resource = "Group:" + strings.TrimSpace(name)
		}
	}
	switch strings.ToLower(strings.TrimSpace(string(r.Decision))) {
	case "", "allow":
		out.Decision = auth.Allow
	case "deny":
		out.Decision = auth.Deny
	}
	seen := map[string]bool{}
	for _, a := range r.Actions {
		switch strings.ToLower(strings.TrimSpace(a)) {
		case "pub":
			a = "Pub"
		case "sub":
			a = "Sub"
		case "all", "*":
			a = "All"
		}
		if !seen[a] {
			seen[a] = true
			out.Actions = append(out.Actions, a)
		}
	}
	if seen["All"] || (seen["Pub"] && seen["Sub"] && len(seen) == 2) {
		out.Actions = []string{"All"}
	}
	return out
}

// userStore returns the broker's users, or ErrAuthenticationOff.
func (b *Broker) userStore() (*auth.Store, error) {
	if b.users == nil {
		return nil, ErrAuthenticationOff
	}
	return b.users, nil
}

// changeUsers runs change on the users of a master under usersMu, and has
// the slaves copy the result at once.
func (b *Broker) changeUsers(change func(st *auth.Store, f auth.File) error) error {
	st, err := b.userStore()
	if err != nil {
		return err
	}
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.writable(); err != nil {
		return err
	}
	b.usersMu.Lock()
	f, err := canonicalFile(st)
	if err == nil {
		err = change(st, f)
	}
	b.usersMu.Unlock()
	if err != nil {
		return err
	}
	b.metaChanged()
	return nil
}

// canonicalFile returns the users, first rewriting a hand-written file
// whose roles or rules are spelt otherwise ("Super", "topic:orders",
// "deny") as the changes spell them, so that a rule is found by its
// resource.
func canonicalFile(st *auth.Store) (auth.File, error) {
	f := st.Users().File()
	canon := auth.File{Users: make([]auth.User, len(f.Users))}
	for i, u := range f.Users {
		c := canonicalUser(u)
		c.SecretKey = u.SecretKey
		canon.Users[i] = c
	}
	if reflect.DeepEqual(f, canon) {
		return f, nil
	}
	data, err := json.Marshal(canon)
	if err == nil {
		err = st.Replace(data)
	}
	if err != nil {
		return f, fmt.Errorf("broker: rewrite the ACL file's roles and rules as the admin verbs spell them: %w", err)
	}
	return canon, nil
}

// CreateUser adds a user with its role and rules.
func (b *Broker) CreateUser(u auth.User) error {
	role, err := parseUserRole(string(u.Role))
	if err != nil {
		return err
	}
	u.Role = role
	if u.Rules, err = canonicalRules(u.AccessKey, u.Rules); err != nil {
		return err
	}
	if err := u.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return b.changeUsers(func(st *auth.Store, _ auth.File) error {
		if err := st.CreateUser(u); err != nil {
			return err
		}
		b.log.Info("user created", "accessKey", u.AccessKey, "role", roleName(u.Role), "rules", len(u.Rules))
		return nil
	})
}

// UpdateUser changes a user's secret key (unless secretKey is empty) and
// role (unless role is empty; "none" makes it a user of its rules). The
// last admin user keeps its role (ErrLastAdmin).
func (b *Broker) UpdateUser(accessKey, secretKey, role string) error {
	if secretKey == "" && strings.TrimSpace(role) == "" {
		return fmt.Errorf("%w: update user %q: nothing to change: give a secret key, a role or both", ErrInvalidArgument, accessKey)
	}
	var newRole auth.Role
	if strings.TrimSpace(role) != "" {
		r, err := parseUserRole(role)
		if err != nil {
			return err
		}
		newRole = r
	}
	if secretKey != "" {
		if err := (auth.User{AccessKey: accessKey, SecretKey: secretKey}).Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	return b.changeUsers(func(st *auth.Store, f auth.File) error {
		cur, err := userOf(f, accessKey)
		if err != nil {
			return err
		}
		if strings.TrimSpace(role) == "" {
			newRole = cur.Role
		}
		if cur.Role == auth.RoleAdmin && newRole != auth.RoleAdmin && admins(f) == 1 { // f is canonical
			return fmt.Errorf("%w: user %q is the only admin: make another user admin before changing its role", ErrLastAdmin, accessKey)
		}
		if err := st.UpdateUser(accessKey, secretKey, newRole); err != nil {
			return err
		}
		b.log.Info("user updated", "accessKey", accessKey, "role", roleName(newRole), "secretKeyChanged", secretKey != "")
		return nil
	})
}

// DeleteUser removes a user and its rules; the last admin user stays
// (ErrLastAdmin).
func (b *Broker) DeleteUser(accessKey string) error {
	return b.changeUsers(func(st *auth.Store, f auth.File) error {
		cur, err := userOf(f, accessKey)
		if err != nil {
			return err
		}
		if cur.Role == auth.RoleAdmin && admins(f) == 1 {
			return fmt.Errorf("%w: user %q is the only admin: create another admin user before deleting it", ErrLastAdmin, accessKey)
		}
		if err := st.DeleteUser(accessKey); err != nil {
			return err
		}
		b.log.Info("user deleted", "accessKey", accessKey)
		return nil
	})
}

// ListUsers returns the users whose access key contains filter, sorted by
// access key, without their secret keys.
func (b *Broker) ListUsers(filter string) ([]auth.User, error) {
	st, err := b.userStore()
	if err != nil {
		return nil, err
	}
	var out []auth.User
	for _, u := range st.Users().File().Users {
		if strings.Contains(u.AccessKey, filter) {
			out = append(out, canonicalUser(u))
		}
	}
	return out, nil
}

// GetUser returns a user without its secret key.
func (b *Broker) GetUser(accessKey string) (auth.User, error) {
	st, err := b.userStore()
	if err != nil {
		return auth.User{}, err
	}
	u, err := userOf(st.Users().File(), accessKey)
	if err != nil {
		return auth.User{}, err
	}
	return canonicalUser(u), nil
}

// CreateACL adds rules to a user; a resource it has a rule on already is
// auth.ErrExists (UpdateACL replaces it).
func (b *Broker) CreateACL(accessKey string, rules []auth.Rule) error {
	return b.putRules(accessKey, rules, true)
}

// UpdateACL sets a user's rules on their resources: the rule a resource
// has is replaced, the others added.
func (b *Broker) UpdateACL(accessKey string, rules []auth.Rule) error {
	return b.putRules(accessKey, rules, false)
}

func (b *Broker) putRules(accessKey string, rules []auth.Rule, create bool) error {
	if len(rules) == 0 {
		return fmt.Errorf("%w: user %q: no rule given", ErrInvalidArgument, accessKey)
	}
	rules, err := canonicalRules(accessKey, rules)
	if err != nil {
		return err
	}
	return b.changeUsers(func(st *auth.Store, f auth.File) error {
		if _, err := userOf(f, accessKey); err != nil {
			return err
		}
		if err := (auth.User{AccessKey: accessKey, SecretKey: placeholderSecret, Rules: rules}).Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		if err := st.PutRules(accessKey, rules, create); err != nil {
			return err
		}
		b.log.Info("user rules set", "accessKey", accessKey, "rules", len(rules), "create", create)
		return nil
	})
}

// DeleteACL removes a user's rules on resources, or all its rules when
// resources is empty; a resource it has no rule on is auth.ErrNotFound
// and nothing is removed.
func (b *Broker) DeleteACL(accessKey string, resources []string) error {
	canon := make([]string, len(resources))
	for i, r := range resources {
		canon[i] = canonicalRule(auth.Rule{Resource: r}).Resource
	}
	return b.changeUsers(func(st *auth.Store, _ auth.File) error {
		if err := st.DeleteRules(accessKey, canon); err != nil {
			return err
		}
		b.log.Info("user rules deleted", "accessKey", accessKey, "resources", canon)
		return nil
	})
}

// ListACL returns the rules of the user of accessKey (every user's when
// empty) whose resource contains resource, by user then in the user's
// order.
func (b *Broker) ListACL(accessKey, resource string) ([]ACLEntry, error) {
	st, err := b.userStore()
	if err != nil {
		return nil, err
	}
	f := st.Users().File()
	if accessKey != "" {
		if _, err := userOf(f, accessKey); err != nil {
			return nil, err
		}
	}
	var out []ACLEntry
	for _, u := range f.Users {
		if accessKey != "" && u.AccessKey != accessKey {
			continue
		}
		for _, r := range canonicalUser(u).Rules {
			if strings.Contains(r.Resource, resource) {
				out = append(out, ACLEntry{AccessKey: u.AccessKey, Rule: r})
			}
		}
	}
	return out, nil
}

// canonicalRules writes rules as the file keeps them, refusing a resource
// given twice.
func canonicalRules(accessKey string, rules []auth.Rule) ([]auth.Rule, error) {
	out := make([]auth.Rule, len(rules))
	seen := map[string]bool{}
	for i, r := range rules {
		out[i] = canonicalRule(r)
		if seen[out[i].Resource] {
			return nil, fmt.Errorf("%w: user %q: resource %s given twice", ErrInvalidArgument, accessKey, out[i].Resource)
		}
		seen[out[i].Resource] = true
	}
	return out, nil
}

// canonicalUser is u redacted, its role and rules as the file keeps them
// (a hand-written file may say "Super" or "deny").
func canonicalUser(u auth.User) auth.User {
	u = u.Redacted()
	if r, err := parseUserRole(string(u.Role)); err == nil {
		u.Role = r
	}
	for i, r := range u.Rules {
		u.Rules[i] = canonicalRule(r)
	}
	return u
}

func userOf(f auth.File, accessKey string) (auth.User, error) {
	for _, u := range f.Users {
		if u.AccessKey == accessKey {
			return u, nil
		}
	}
	return auth.User{}, fmt.Errorf("%w: user %q", auth.ErrNotFound, accessKey)
}

// admins counts the admin users of f, canonical.
func admins(f auth.File) int {
	n := 0
	for _, u := range f.Users {
		if u.Role == auth.RoleAdmin {
			n++
		}
	}
	return n
}

// roleName is a role as the admin verbs print it.
func roleName(r auth.Role) string {
	if r == auth.RoleUser {
		return "none"
	}
	return string(r)
}
