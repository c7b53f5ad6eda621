package auth

import (
	"fmt"
	"strings"
)

// Role is what a user is beyond its rules.
type Role string

// The roles.
const (
	// RoleUser publishes and subscribes as its rules allow.
	RoleUser Role = ""
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleCluster is a broker's, nameserver's or controller's identity:
	// registrations, replication, elections.
	RoleCluster Role = "cluster"
)

func parseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(s)); r {
	case RoleUser, RoleAdmin, RoleCluster:
		return r, nil
	case "user", "normal", "none":
		return RoleUser, nil
	case "super":
		return RoleAdmin, nil
	}
	return "", fmt.Errorf("role %q: want admin, cluster or none (a user)", s)
}

// Class is the kind of right an operation needs. Every remoting request
// code and gRPC method a server answers has one (docs/SECURITY.md,
// "Operations").
type Class uint8

// The classes.
const (
	// ClassPublic needs no credentials: routes, health, a client's own
	// heartbeat.
	ClassPublic Class = iota + 1
	// ClassPub needs PUB on the topics it writes.
	ClassPub
	// ClassSub needs SUB on the topics and groups it reads or moves.
	ClassSub
	// ClassAdmin needs RoleAdmin: topic and group changes, offset resets,
	// dead-letter resend/purge/export, users and rules, elections.
	ClassAdmin
	// ClassCluster needs RoleCluster (or RoleAdmin): registration,
	// replication, controller heartbeats.
	ClassCluster
)

var classNames = [...]string{"", "public", "pub", "sub", "admin", "cluster"}

func (c Class) String() string {
	if int(c) < len(classNames) && c != 0 {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Action is a right on a resource, PUB or SUB; a set is their OR.
type Action uint8

// The actions.
const (
	Pub Action = 1 << iota
	Sub
	AllActions = Pub | Sub
)

func (a Action) String() string {
	switch a {
	case Pub:
		return "PUB"
	case Sub:
		return "SUB"
	case AllActions:
		return "PUB,SUB"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

func parseActions(list []string) (Action, error) {
	if len(list) == 0 {
		return 0, fmt.Errorf("actions: empty; want Pub, Sub or All")
	}
	var a Action
	for _, s := range list {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "pub":
			a |= Pub
		case "sub":
			a |= Sub
		case "all", "*":
			a |= AllActions
		default:
			return 0, fmt.Errorf("action %q: want Pub, Sub or All", s)
		}
	}
	return a, nil
}

// ResourceType is what a resource names.
type ResourceType uint8

// The resource types.
const (
	TopicResource ResourceType = iota + 1
	GroupResource
)

// Resource is a topic or a consumer group a request touches.
type Resource struct {
	Type ResourceType
	Name string
}

// Topic is the topic name as a Resource.
func Topic(name string) Resource { return Resource{TopicResource, name} }

// Group is the consumer group name as a Resource.
func Group(name string) Resource { return Resource{GroupResource, name} }

func (r Resource) String() string {
	if r.Type == GroupResource {
		return "Group:" + r.Name
	}
	return "Topic:" + r.Name
}

// The prefixes of the topics the broker keeps for a group: a right on the
// group is the right on them (retries and dead letters are the group's).
const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
)

// owner maps a group's retry or dead-letter topic to the group.
func owner(r Resource) Resource {
	if r.Type != TopicResource {
		return r
	}
	if g, ok := strings.CutPrefix(r.Name, retryPrefix); ok {
		return Group(g)
	}
	if g, ok := strings.CutPrefix(r.Name, dlqPrefix); ok {
		return Group(g)
	}
	return r
}

// Decision is what a matching rule decides.
type Decision string

// The decisions.
const (
	Allow Decision = "Allow"
	Deny  Decision = "Deny"
)

// Rule gives or refuses actions on resources.
type Rule struct {
	// Resource is "Topic:<name>" or "Group:<name>"; a name ending in '*'
	// is a prefix ("Topic:orders-*"), and "*" alone is every resource of
	// every type ("Topic:*" every topic).
	Resource string `json:"resource"`
	// Actions are "Pub", "Sub" or "All".
	Actions []string `json:"actions"`
	// Decision is "Allow" (the default) or "Deny"; a matching Deny wins.
	Decision Decision `json:"decision,omitempty"`
}

// entry is a Rule compiled.
type entry struct {
	typ     ResourceType // 0: every type
	name    string       // the name, or the prefix
	prefix  bool
	actions Action
	deny    bool
}

func compileRule(r Rule) (entry, error) {
	var e entry
	acts, err := parseActions(r.Actions)
	if err != nil {
		return e, fmt.Errorf("rule %q: %w", r.Resource, err)
	}
	e.actions = acts
	switch Decision(strings.ToLower(string(r.Decision))) {
	case "", "allow":
	case "deny":
		e.deny = true
	default:
		return e, fmt.Errorf("rule %q: decision %q: want Allow or Deny", r.Resource, r.Decision)
	}
	res := strings.TrimSpace(r.Resource)
	if res == "*" {
		e.prefix = true
		return e, nil
	}
	kind, name, ok := strings.Cut(res, ":")
	switch strings.ToLower(kind) {
	case "topic":
		e.typ = TopicResource
	case "group":
		e.typ = GroupResource
	default:
		ok = false
	}
	if !ok || name == "" {
		return e, fmt.Errorf("rule %q: want Topic:<name>, Group:<name>, a prefix such as Topic:orders-*, or *", r.Resource)
	}
	if p, isPrefix := strings.CutSuffix(name, "*"); isPrefix {
		e.name, e.prefix = p, true
	} else {
		e.name = name
	}
	if strings.Contains(e.name, "*") {
		return e, fmt.Errorf("rule %q: '*' only at the end of a name", r.Resource)
	}
	return e, nil
}

func (e *entry) matches(a Action, r Resource) bool {
	if e.actions&a == 0 || (e.typ != 0 && e.typ != r.Type) {
		return false
	}
	if e.prefix {
		return strings.HasPrefix(r.Name, e.name)
	}
	return r.Name == e.name
}
