package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/client"
)

// The environment variables of the admin user's keys (docs/SECURITY.md):
// better than the flags, which other users of the machine can read in the
// process list.
const (
	envAccessKey = "GANTRY_ACCESS_KEY"
	envSecretKey = "GANTRY_SECRET_KEY"
)

// credentialsFlags adds --access-key and --secret-key to cmd and its
// verbs: the keys of the user every call is signed as (who: "the admin
// user's"), for clusters with authentication on. The returned func reads
// them, or else the environment.
func credentialsFlags(cmd *cobra.Command, who string) func() (client.Credentials, error) {
	var c client.Credentials
	f := cmd.PersistentFlags()
	f.StringVar(&c.AccessKey, "access-key", "", who+" access key, for clusters with authentication on (default $"+envAccessKey+")")
	f.StringVar(&c.SecretKey, "secret-key", "", who+" secret key (default $"+envSecretKey+", which others cannot read in the process list)")
	return func() (client.Credentials, error) {
		if !f.Changed("access-key") {
			c.AccessKey = os.Getenv(envAccessKey)
		}
		if !f.Changed("secret-key") {
			c.SecretKey = os.Getenv(envSecretKey)
		}
		switch {
		case c.AccessKey != "" && c.SecretKey == "":
			return c, usageError("--secret-key (or $%s) is missing: give both keys, or neither", envSecretKey)
		case c.AccessKey == "" && c.SecretKey != "":
			return c, usageError("--access-key (or $%s) is missing: give both keys, or neither", envAccessKey)
		}
		return c, nil
	}
}

// userFlags are the flags of the user and ACL verbs.
type userFlags struct {
	user, secret, role, filter string
	subject, resources         string
	actions, decision          string
	brokerAddr, cluster        string
}

// addTargets adds -b and -c: one broker, or the masters of a cluster
// (default: every master).
func (f *userFlags) addTargets(c *cobra.Command) {
	c.Flags().StringVarP(&f.brokerAddr, "brokerAddr", "b", "", "only this broker, a master (either of its addresses)")
	c.Flags().StringVarP(&f.cluster, "clusterName", "c", "", "only the masters of this cluster")
}

// addUserVerbs adds createUser, updateUser, deleteUser, listUser, getUser,
// createAcl, updateAcl, deleteAcl, listAcl, and initAcl, which writes a
// new ACL file with the admin user of creds.
func addUserVerbs(cmd *cobra.Command, verb addVerb, creds func() (client.Credentials, error)) {
	f := &userFlags{}
	targets := func(ctx context.Context, a *client.Admin) ([]string, error) {
		return pickBrokers(ctx, a, f.brokerAddr, f.cluster)
	}
	addUserChanges(verb, f, targets)
	addUserLists(verb, f, targets)
	addACLVerbs(verb, f, targets)
	cmd.AddCommand(initACLCmd(creds))
}

type targetsFunc func(ctx context.Context, a *client.Admin) ([]string, error)

// addUserChanges adds createUser, updateUser and deleteUser.
func addUserChanges(verb addVerb, f *userFlags, targets targetsFunc) {
	c := verb("createUser", "Create a user on every master (or -b / -c) with authentication on", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := targets(ctx, a)
		if err != nil {
			return err
		}
		if err := a.CreateUser(ctx, client.User{AccessKey: f.user, SecretKey: f.secret, Role: f.role}, brokers...); err != nil {
			return err
		}
		fmt.Fprintf(out, "create user %s success: role %s\n", f.user, orNone(f.role))
		return nil
	})
	c.Flags().StringVarP(&f.user, "user", "u", "", "the user's access key (required)")
	c.Flags().StringVarP(&f.secret, "user-secret", "p", "", "the user's secret key (required)")
	c.Flags().StringVarP(&f.role, "role", "t", "", "admin, cluster, or none (the default): a user of its rules (createAcl)")
	f.addTargets(c)
	_ = c.MarkFlagRequired("user")
	_ = c.MarkFlagRequired("user-secret")

	c = verb("updateUser", "Change a user's secret key, role or both on every master (or -b / -c)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if f.secret == "" && f.role == "" {
			return usageError("updateUser: nothing to change: give -p (a new secret key), -t (a new role) or both")
		}
		brokers, err := targets(ctx, a)
		if err != nil {
			return err
		}
		if err := a.UpdateUser(ctx, client.User{AccessKey: f.user, SecretKey: f.secret, Role: f.role}, brokers...); err != nil {
			return err
		}
		var changed []string
		if f.secret != "" {
			changed = append(changed, "secret key changed")
		}
		if f.role != "" {
			changed = append(changed, "role "+f.role)
		}
		fmt.Fprintf(out, "update user %s success: %s\n", f.user, strings.Join(changed, ", "))
		return nil
	})
	c.Flags().StringVarP(&f.user, "user", "u", "", "the user's access key (required)")
	c.Flags().StringVarP(&f.secret, "user-secret", "p", "", "a new secret key (default: kept)")
	c.Flags().StringVarP(&f.role, "role", "t", "", "a new role: admin, cluster or none (default: kept)")
	f.addTargets(c)
	_ = c.MarkFlagRequired("user")

	c = verb("deleteUser", "Delete a user and its rules from every master (or -b / -c)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := targets(ctx, a)
		if err != nil {
			return err
		}
		if err := a.DeleteUser(ctx, f.user, brokers...); err != nil {
			return err
		}
		fmt.Fprintf(out, "delete user %s success\n", f.user)
		return nil
	})
	c.Flags().StringVarP(&f.user, "user", "u", "", "the user's access key (required)")
	f.addTargets(c)
	_ = c.MarkFlagRequired("user")
}

// addUserLists adds listUser and getUser.
func addUserLists(verb addVerb, f *userFlags, targets targetsFunc) {
	c := verb("listUser", "List the users of every master (or -b / -c), without their secret keys", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := targets(ctx, a)
		if err != nil {
			return err
		}
		users, err := a.ListUsers(ctx, f.filter, brokers...)
		if len(users) > 0 {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#Broker Addr\t#Access Key\t#Role\t#Rules")
			for _, u := range users {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", u.Broker, u.AccessKey, u.Role, len(u.Rules))
			}
			_ = tw.Flush()
		} else if err == nil {
			fmt.Fprintln(out, "no user found")
		}
		return err
	})
	c.Flags().StringVarP(&f.filter, "filter", "f", "", "only the access keys containing this")
	f.addTargets(c)

	c = verb("getUser", "Show a user of a broker and its rules, without its secret key", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if err := checkBrokerAddr(f.brokerAddr); err != nil {
			return err
		}
		u, err := a.GetUser(ctx, f.user, f.brokerAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "access key  %s\nrole        %s\n", u.AccessKey, u.Role)
		if len(u.Rules) == 0 {
			fmt.Fprintln(out, "no rule")
			return nil
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Resource\t#Actions\t#Decision")
		for _, r := range u.Rules {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Resource, strings.Join(r.Actions, ","), r.Decision)
		}
		return tw.Flush()
	})
	c.Flags().StringVarP(&f.user, "user", "u", "", "the user's access key (required)")
	c.Flags().StringVarP(&f.brokerAddr, "brokerAddr", "b", "", "broker address, either port (required)")
	_ = c.MarkFlagRequired("user")
	_ = c.MarkFlagRequired("brokerAddr")
}

// addACLVerbs adds createAcl, updateAcl, deleteAcl and listAcl.
func addACLVerbs(verb addVerb, f *userFlags, targets targetsFunc) {
	put := func(create bool) adminRun {
		return func(ctx context.Context, a *client.Admin, out io.Writer) error {
			resources, actions := splitList(f.resources), splitList(f.actions)
			if len(resources) == 0 || len(actions) == 0 {
				return usageError("-r (resources) and --actions need at least one value each")
			}
			rules := make([]client.ACLRule, len(resources))
			for i, r := range resources {
				rules[i] = client.ACLRule{Resource: r, Actions: actions, Decision: f.decision}
			}
			brokers, err := targets(ctx, a)
			if err != nil {
				return err
			}
			op, call := "update", a.UpdateACL
			if create {
				op, call = "create", a.CreateACL
			}
			if err := call(ctx, subject(f.subject), rules, brokers...); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s acl success: %s %s %s on %s\n", op, subject(f.subject), f.decision, strings.Join(actions, ","), strings.Join(resources, ", "))
			return nil
		}
	}
	ruleFlags := func(c *cobra.Command) {
		c.Flags().StringVarP(&f.subject, "subject", "s", "", "the user's access key, or User:<access key> (required)")
		c.Flags().StringVarP(&f.resources, "resources", "r", "", "','-separated: Topic:<name>, Group:<name>, a prefix Topic:orders-*, or * (required)")
		// Not -a, mqadmin's: that is the controllers' address of every verb.
		c.Flags().StringVar(&f.actions, "actions", "", "','-separated: Pub, Sub or All (required)")
		c.Flags().StringVarP(&f.decision, "decision", "d", "Allow", "Allow or Deny (a matching Deny wins)")
		f.addTargets(c)
		_ = c.MarkFlagRequired("subject")
		_ = c.MarkFlagRequired("resources")
		_ = c.MarkFlagRequired("actions")
	}
	ruleFlags(verb("createAcl", "Give a user rules on resources on every master (or -b / -c); a resource with a rule is refused", put(true)))
	ruleFlags(verb("updateAcl", "Set a user's rules on resources on every master (or -b / -c), replacing theirs", put(false)))

	c := verb("deleteAcl", "Delete a user's rules on resources (all its rules without -r) on every master (or -b / -c)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := targets(ctx, a)
		if err != nil {
			return err
		}
		resources := splitList(f.resources)
		if err := a.DeleteACL(ctx, subject(f.subject), resources, brokers...); err != nil {
			return err
		}
		if len(resources) == 0 {
			fmt.Fprintf(out, "delete acl success: every rule of %s\n", subject(f.subject))
			return nil
		}
		fmt.Fprintf(out, "delete acl success: %s on %s\n", subject(f.subject), strings.Join(resources, ", "))
		return nil
	})
	c.Flags().StringVarP(&f.subject, "subject", "s", "", "the user's access key, or User:<access key> (required)")
	c.Flags().StringVarP(&f.resources, "resources", "r", "", "','-separated resources whose rules go (default: all the user's)")
	f.addTargets(c)
	_ = c.MarkFlagRequired("subject")

	c = verb("listAcl", "List the rules of every master (or -b / -c): a user's with -s, on resources containing -r", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := targets(ctx, a)
		if err != nil {
			return err
		}
		entries, err := a.ListACL(ctx, subject(f.subject), f.resources, brokers...)
		if len(entries) > 0 {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#Broker Addr\t#Access Key\t#Resource\t#Actions\t#Decision")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Broker, e.AccessKey, e.Resource, strings.Join(e.Actions, ","), e.Decision)
			}
			_ = tw.Flush()
		} else if err == nil {
			fmt.Fprintln(out, "no rule found")
		}
		return err
	})
	c.Flags().StringVarP(&f.subject, "subject", "s", "", "only this user's rules")
	c.Flags().StringVarP(&f.resources, "resources", "r", "", "only the rules whose resource contains this")
	f.addTargets(c)
}

// initACLCmd is initAcl: a new ACL file holding one admin user, the one
// of --access-key and --secret-key, written without any server, to start
// a broker with authentication on from.
func initACLCmd(creds func() (client.Credentials, error)) *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "initAcl",
		Short: "Write a new ACL file (aclFile) with one admin user, --access-key and --secret-key: no server needed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cred, err := creds()
			if err != nil {
				return err
			}
			if cred.AccessKey == "" {
				return usageError("initAcl: the admin user's keys are missing: give --access-key and --secret-key (or $%s and $%s)", envAccessKey, envSecretKey)
			}
			if err := writeNewACLFile(path, auth.User{AccessKey: cred.AccessKey, SecretKey: cred.SecretKey, Role: auth.RoleAdmin}); err != nil {
				return &exitError{code: exitProblems, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: admin user %s (give the broker aclFile=%s and authenticationEnabled=true)\n", path, cred.AccessKey, path)
			return nil
		},
	}
	c.Flags().StringVar(&path, "file", "", "the ACL file to create; an existing one is not touched (required)")
	_ = c.MarkFlagRequired("file")
	return c
}

// writeNewACLFile writes a new ACL file (mode 0600) holding u; a file
// there already is an error.
func writeNewACLFile(path string, u auth.User) error {
	users, err := auth.NewUsers(auth.File{Users: []auth.User{u}})
	if err != nil {
		return fmt.Errorf("initAcl: %w", err)
	}
	data, err := json.MarshalIndent(users.File(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("initAcl: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("initAcl: %s exists: add users to it with gantry admin createUser against its broker, or edit it", path)
	}
	if err != nil {
		return fmt.Errorf("initAcl: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("initAcl: write %s: %w", path, err)
	}
	return nil
}

// subject is an access key given as mqadmin's subject, User:<name>, or
// bare.
func subject(s string) string {
	if name, ok := strings.CutPrefix(strings.TrimSpace(s), "User:"); ok {
		return name
	}
	return strings.TrimSpace(s)
}

// splitList splits a ','-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func orNone(role string) string {
	if role == "" {
		return client.RoleNone
	}
	return role
}
