package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/embedded"
)

// devAdmin is the access key of the admin user gantry dev --auth makes.
const devAdmin = "devadmin"

// devUsers returns the users of gantry dev --auth: those of DIR/acl.json
// from an earlier run (changed with gantry admin createUser ...), or else
// one admin user with a new random secret key. dev's brokers sign their
// own calls (a slave's replication) as the first admin.
func devUsers(dir string) ([]auth.User, auth.User, error) {
	data, err := os.ReadFile(filepath.Join(dir, "acl.json"))
	switch {
	case err == nil:
		users, err := auth.ParseFile(data)
		if err != nil {
			return nil, auth.User{}, fmt.Errorf("--auth: %w; remove it to start with a new admin user", err)
		}
		f := users.File()
		for _, u := range f.Users {
			if u.Role == auth.RoleAdmin {
				return f.Users, u, nil
			}
		}
		return nil, auth.User{}, fmt.Errorf("--auth: %s has no admin user; remove it to start with a new one", filepath.Join(dir, "acl.json"))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, auth.User{}, fmt.Errorf("--auth: %w", err)
	}
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, auth.User{}, err
	}
	admin := auth.User{AccessKey: devAdmin, SecretKey: base64.RawURLEncoding.EncodeToString(b[:]), Role: auth.RoleAdmin}
	return []auth.User{admin}, admin, nil
}

// devSecurity sets dev's TLS (--tls: throw-away certificates in DIR/tls)
// and authentication (--auth: devUsers) in o.
func devSecurity(o *embedded.Options, dir string, withTLS, withAuth bool) (certs embedded.DevCerts, admin auth.User, err error) {
	if withTLS {
		if certs, err = embedded.DevTLS(filepath.Join(dir, "tls")); err != nil {
			return certs, admin, err
		}
		o.TLS = certs.Options()
	}
	if withAuth {
		var users []auth.User
		if users, admin, err = devUsers(dir); err != nil {
			return certs, admin, err
		}
		withDevAuth(o, users, admin)
	}
	return certs, admin, nil
}

// withDevAuth turns authentication on in o with users, the brokers'
// own calls signed as admin.
func withDevAuth(o *embedded.Options, users []auth.User, admin auth.User) {
	o.Users = users
	adjust := o.Broker
	o.Broker = func(bc *broker.Config) {
		if adjust != nil {
			adjust(bc)
		}
		bc.InnerAccessKey, bc.InnerSecretKey = admin.AccessKey, admin.SecretKey
	}
}

// printDevAuth prints the admin user's keys and how clients use them.
func printDevAuth(out io.Writer, c *embedded.Cluster, admin auth.User) {
	fmt.Fprintf(out, `Authentication on (docs/SECURITY.md): every request but routes must be signed; admin user %s, secret key %s
  export GANTRY_ACCESS_KEY=%s GANTRY_SECRET_KEY=%s   # gantry admin and gantry bench sign with them
  gantry admin createUser -n %s -u app001 -p <secret>; gantry admin createAcl -n %s -s app001 -r Topic:Orders --actions Pub,Sub
  Gantry's Go client: client.Config{NameServers: []string{%q}, Credentials: client.Credentials{AccessKey: ..., SecretKey: ...}}
  RocketMQ's Go client: producer.WithCredentials(primitive.Credentials{AccessKey: ..., SecretKey: ...}) (consumer. likewise)
`, admin.AccessKey, admin.SecretKey, admin.AccessKey, admin.SecretKey, c.NameServerAddr(), c.NameServerAddr(), c.NameServerAddr())
}
