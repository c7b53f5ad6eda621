package main

import (
	"io"

	"github.com/spf13/cobra"
)

// version is the build's version, set with
// -ldflags "-X main.version=v1.2.3".
var version = "dev"

// newRootCmd builds the gantry command tree. Each subcommand lives in its
// own file (verify.go, ...).
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gantry",
		Short: "Gantry message broker",
		Long: `Gantry is a RocketMQ-style message broker: one binary with a subcommand per
role or tool.`,
		Version:       version,
		SilenceErrors: true, // run prints errors once
		SilenceUsage:  true, // run points at --help instead
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newDevCmd(), newNamesrvCmd(), newBrokerCmd(), newAdminCmd(), newBenchCmd(), newVerifyCmd())
	return root
}
