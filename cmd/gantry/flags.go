package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/client"
)

// defaultNameServer is the nameserver address the tools use without -n
// or NAMESRV_ADDR. Either nameserver port serves them (Gantry's 9877,
// RocketMQ's 9876): both speak gRPC.
const defaultNameServer = "127.0.0.1:9877"

// nameServerFlag adds -n to cmd (and its subcommands): the nameserver
// addresses, from the flag, else from NAMESRV_ADDR as mqadmin reads it,
// else defaultNameServer.
func nameServerFlag(cmd *cobra.Command) func() []string {
	var namesrv string
	cmd.PersistentFlags().StringVarP(&namesrv, "namesrv", "n", defaultNameServer,
		"nameserver address(es), ';'-separated: either port (default $NAMESRV_ADDR, else "+defaultNameServer+")")
	return func() []string {
		if env := os.Getenv("NAMESRV_ADDR"); env != "" && !cmd.PersistentFlags().Changed("namesrv") {
			namesrv = env
		}
		return strings.Split(namesrv, ";")
	}
}

// verbsOnly makes cmd, a group of subcommands, refuse anything but one of
// them: cobra would print the help and exit 0 for a misspelt one. Alone,
// cmd prints its help.
func verbsOnly(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, which only the root gets by itself
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return errors.New(msg)
	}
}

// usageError is an exit-2 error: the command line asks for something
// that cannot be.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// clientFlags adds the TLS flags (--tls, ...) and the credentials flags
// (--access-key, --secret-key: who's keys) of a client command to cmd and
// returns what makes its client.Config.
func clientFlags(cmd *cobra.Command, nameServers func() []string, who string) func() (client.Config, error) {
	var tf clientTLSFlags
	tf.register(cmd)
	credentials := credentialsFlags(cmd, who)
	return func() (client.Config, error) {
		cred, err := credentials()
		if err != nil {
			return client.Config{}, err
		}
		c, err := tf.clientConfig(nameServers())
		c.Credentials = cred
		return c, err
	}
}
