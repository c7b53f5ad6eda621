package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"sort"
	"sync"
)

// Key lengths, as RocketMQ's ACL checks them.
const (
	MinKeyLen = 6
	MaxKeyLen = 128
)

// User is a user as the ACL file holds it.
type User struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	// Role is "admin", "cluster" or empty (a user of its Rules).
	Role Role `json:"role,omitempty"`
	// Rules are checked all: a matching Deny wins, then a matching Allow;
	// nothing matching is denied.
	Rules []Rule `json:"rules,omitempty"`
}

// Redacted returns u without its secret key, for listings and logs.
func (u User) Redacted() User {
	u.SecretKey = ""
	u.Rules = append([]Rule(nil), u.Rules...)
	return u
}

func checkKey(what, k string) error {
	if len(k) < MinKeyLen || len(k) > MaxKeyLen {
		return fmt.Errorf("%s: want %d to %d characters, got %d", what, MinKeyLen, MaxKeyLen, len(k))
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ',' || c == '=' {
			return fmt.Errorf("%s: want printable ASCII without spaces, ',' or '='; got byte %#x at %d", what, c, i)
		}
	}
	return nil
}

// Validate reports what is wrong with u.
func (u User) Validate() error {
	_, err := compileUser(u)
	return err
}

// Principal is an authenticated user: what checks decide from. Safe for
// concurrent use; immutable but for its pools.
type Principal struct {
	accessKey string
	role      Role
	entries   []entry
	sha1      sync.Pool // *macState of HMAC-SHA1 keyed with the secret: remoting
	sha256    sync.Pool // *macState of HMAC-SHA256 keyed with the secret: gRPC
}

// macState is a keyed HMAC with buffers of its own, so that a check
// allocates nothing: what is written through the hash.Hash interface
// escapes, so it is copied into buf first.
type macState struct {
	h   hash.Hash
	buf []byte
	sum []byte
}

// write writes s into the HMAC through buf.
func (m *macState) write(s string) {
	for len(s) > 0 {
		n := copy(m.buf[:cap(m.buf)], s)
		m.h.Write(m.buf[:n])
		s = s[n:]
	}
}

// digest is the HMAC's sum, valid until the state is reused.
func (m *macState) digest() []byte {
	m.sum = m.h.Sum(m.sum[:0])
	return m.sum
}

func compileUser(u User) (*Principal, error) {
	if err := checkKey("accessKey", u.AccessKey); err != nil {
		return nil, err
	}
	if err := checkKey(fmt.Sprintf("user %q: secretKey", u.AccessKey), u.SecretKey); err != nil {
		return nil, err
	}
	role, err := parseRole(string(u.Role))
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", u.AccessKey, err)
	}
	p := &Principal{accessKey: u.AccessKey, role: role}
	for _, r := range u.Rules {
		e, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("user %q: %w", u.AccessKey, err)
		}
		p.entries = append(p.entries, e)
	}
	secret := []byte(u.SecretKey)
	p.sha1.New = func() any {
		return &macState{h: hmac.New(sha1.New, secret), buf: make([]byte, 0, 256), sum: make([]byte, 0, sha256.Size)}
	}
	p.sha256.New = func() any {
		return &macState{h: hmac.New(sha256.New, secret), buf: make([]byte, 0, 256), sum: make([]byte, 0, sha256.Size)}
	}
	return p, nil
}

// AccessKey is the user's access key.
func (p *Principal) AccessKey() string { return p.accessKey }

// Role is the user's role.
func (p *Principal) Role() Role { return p.role }

// mac runs f with the user's HMAC from pool, reset.
func mac(pool *sync.Pool, f func(m *macState)) {
	m := pool.Get().(*macState)
	m.h.Reset()
	f(m)
	pool.Put(m)
}

// can reports whether the user's rules let it do a on r.
func (p *Principal) can(a Action, r Resource) bool {
	allowed := false
	for i := range p.entries {
		if e := &p.entries[i]; e.matches(a, r) {
			if e.deny {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

// Authorize decides whether p (nil: no credentials) may run an operation
// of class c touching rs: with ClassPub, each is needed with PUB, with
// ClassSub with SUB. A group's retry and dead-letter topics are the
// group's. The error is an *Error wrapping ErrDenied or
// ErrUnauthenticated.
func Authorize(p *Principal, c Class, rs ...Resource) error {
	if c == ClassPublic {
		return nil
	}
	if p == nil {
		return &Error{Kind: ErrUnauthenticated, Reason: ReasonNoCredentials, Detail: c.String() + " operations need credentials"}
	}
	if p.role == RoleAdmin {
		return nil
	}
	switch c {
	case ClassCluster:
		if p.role == RoleCluster {
			return nil
		}
		return p.denied("cluster operations need a cluster or admin user")
	case ClassPub, ClassSub:
		a := Pub
		if c == ClassSub {
			a = Sub
		}
		for _, r := range rs {
			if !p.can(a, owner(r)) {
				return p.denied(fmt.Sprintf("%s on %s not allowed", a, r))
			}
		}
		return nil
	case ClassAdmin:
		return p.denied("admin operations need an admin user")
	}
	return p.denied(fmt.Sprintf("operations of %s not allowed", c))
}

func (p *Principal) denied(detail string) error {
	return &Error{Kind: ErrDenied, Reason: ReasonDenied, AccessKey: p.accessKey, Detail: detail}
}

// Users is a set of users, immutable.
type Users struct {
	byKey map[string]*Principal
	file  File
}

// NewUsers checks and compiles f's users.
func NewUsers(f File) (*Users, error) {
	u := &Users{byKey: make(map[string]*Principal, len(f.Users)), file: f.clone()}
	var errs []error
	for _, user := range f.Users {
		p, err := compileUser(user)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := u.byKey[user.AccessKey]; dup {
			errs = append(errs, fmt.Errorf("user %q: listed twice", user.AccessKey))
			continue
		}
		u.byKey[user.AccessKey] = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return u, nil
}

// Lookup returns the user of an access key.
func (u *Users) Lookup(accessKey string) (*Principal, bool) {
	p, ok := u.byKey[accessKey]
	return p, ok
}

// Len is the number of users.
func (u *Users) Len() int { return len(u.byKey) }

// File returns a copy of the users as the ACL file holds them, sorted by
// access key.
func (u *Users) File() File {
	f := u.file.clone()
	sort.Slice(f.Users, func(i, j int) bool { return f.Users[i].AccessKey < f.Users[j].AccessKey })
	return f
}

// File is the ACL file's content (docs/SECURITY.md, "Users and rules").
type File struct {
	Users []User `json:"users"`
}

func (f File) clone() File {
	out := File{Users: make([]User, len(f.Users))}
	for i, u := range f.Users {
		u.Rules = append([]Rule(nil), u.Rules...)
		out.Users[i] = u
	}
	return out
}
