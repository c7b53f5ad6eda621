package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/replication/controller"
)

// defaultController is the controller address the admin verbs use without
// -a or CONTROLLER_ADDR.
const defaultController = "127.0.0.1:9879"

// ctlRun is a controller verb's work, given a controller client and the
// output.
type ctlRun func(ctx context.Context, c *controller.Client, out io.Writer) error

// addControllerVerbs adds -a (the controllers) to the admin command and
// the verbs that talk to them: getSyncStateSet, getBrokerEpoch,
// electMaster and getControllerMetaData, over TLS with tf's settings and
// signed with the admin credentials, when given (controllers with --auth).
func addControllerVerbs(admin *cobra.Command, tf *clientTLSFlags, creds func() (client.Credentials, error)) {
	var addrs string
	admin.PersistentFlags().StringVarP(&addrs, "controller", "a", defaultController,
		"controller gRPC address(es), ';' or ','-separated (default $CONTROLLER_ADDR, else "+defaultController+")")
	controllers := func() []string {
		if env := os.Getenv("CONTROLLER_ADDR"); env != "" && !admin.PersistentFlags().Changed("controller") {
			addrs = env
		}
		return strings.FieldsFunc(addrs, func(r rune) bool { return r == ';' || r == ',' })
	}
	verb := func(use, short string, run ctlRun) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cred, err := creds()
			if err != nil {
				return err
			}
			ccfg := controller.ClientConfig{Addrs: controllers()}
			if cred.AccessKey != "" {
				if ccfg.Signer, err = auth.NewSigner(cred.AccessKey, cred.SecretKey); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			conf, err := tf.config()
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if conf != nil {
				ccfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(conf))}
			}
			cl, err := controller.NewClient(ccfg)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			defer cl.Close()
			if err := run(ctx, cl, cmd.OutOrStdout()); err != nil {
				if ee := (*exitError)(nil); errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitProblems, err: err}
			}
			return nil
		}}
		admin.AddCommand(c)
		return c
	}

	var group string
	var id int64
	var unclean bool
	groupFlag := func(c *cobra.Command) {
		c.Flags().StringVarP(&group, "brokerName", "b", "", "broker group (brokerName) (required)")
		_ = c.MarkFlagRequired("brokerName")
	}

	groupFlag(verb("getSyncStateSet", "Show a broker group's master and in-sync set (controller)", func(ctx context.Context, c *controller.Client, out io.Writer) error {
		g, err := c.GetSyncStateSet(ctx, group)
		if err != nil {
			return err
		}
		printSyncStateSet(out, g)
		return nil
	}))

	groupFlag(verb("getBrokerEpoch", "Show each broker's epochs and log end as the controller's leader last heard them", func(ctx context.Context, c *controller.Client, out io.Writer) error {
		g, err := c.GetGroup(ctx, group)
		if err != nil {
			return err
		}
		printBrokerEpochs(out, g, time.Now())
		return nil
	}))

	c := verb("electMaster", "Elect a broker group's master (controller)", func(ctx context.Context, c *controller.Client, out io.Writer) error {
		if id < 0 {
			return usageError("--brokerId %d: want a broker id > 0 (or none: the controller chooses)", id)
		}
		g, err := c.ElectMaster(ctx, group, id, unclean)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "group %s: master %d at %s, master epoch %d, in-sync set %v\n", g.Name, g.MasterID, g.MasterAddr(), g.MasterEpoch, g.InSync)
		return nil
	})
	groupFlag(c)
	c.Flags().Int64VarP(&id, "brokerId", "i", 0, "the broker to elect (default: the controller's choice when the master is dead)")
	c.Flags().BoolVar(&unclean, "unclean", false, "allow a broker outside the in-sync set (acknowledged messages may be lost)")

	verb("getControllerMetaData", "Show the controller members, their raft state and the leader", func(ctx context.Context, c *controller.Client, out io.Writer) error {
		members, leader, err := c.Metadata(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Id\t#RaftAddr\t#GRPCAddr\t#State\t#Term\t#LastIndex\t#Applied\t#Leader")
		for _, m := range members {
			if m.Err != nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\tunreachable\t-\t-\t-\t%t\n", m.ID, m.RaftAddr, m.GRPCAddr, m.ID == leader)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%t\n", m.ID, m.RaftAddr, m.GRPCAddr, m.State, m.Term, m.LastIndex, m.Applied, m.ID == leader)
		}
		tw.Flush()
		for _, m := range members {
			if m.Err != nil {
				fmt.Fprintf(out, "%s unreachable: %v\n", m.ID, m.Err)
			}
		}
		if leader == "" {
			fmt.Fprintln(out, "no member leads (an election, or no majority)")
		}
		return nil
	})
}

func role(g controller.GroupStatus, id int64) string {
	if id == g.MasterID {
		return "MASTER"
	}
	return "SLAVE"
}

func printSyncStateSet(out io.Writer, g controller.GroupStatus) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#Group\t#MasterId\t#MasterAddr\t#MasterEpoch\t#SyncStateSet\t#SyncStateSetEpoch")
	fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%v\t%d\n", g.Name, g.MasterID, orDash(g.MasterAddr()), g.MasterEpoch, g.InSync, g.InSyncEpoch)
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#BrokerId\t#Role\t#HAAddr\t#ServiceAddr\t#Alive\t#InSync")
	for _, r := range g.Replicas {
		in := false
		for _, s := range g.InSync {
			in = in || s == r.ID
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%t\t%t\n", r.ID, role(g, r.ID), r.Addr, orDash(r.ServiceAddr), r.Alive, in)
	}
	tw.Flush()
}

func printBrokerEpochs(out io.Writer, g controller.GroupStatus, now time.Time) {
	fmt.Fprintf(out, "group %s: master %d, master epoch %d\n", g.Name, g.MasterID, g.MasterEpoch)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#BrokerId\t#Role\t#Alive\t#MasterEpoch\t#LastEpoch\t#LastEpochStart\t#LogEnd\t#LastHeartbeat")
	for _, r := range g.Replicas {
		hb, ok := g.Heartbeats[r.ID]
		if !ok {
			fmt.Fprintf(tw, "%d\t%s\t%t\t-\t-\t-\t-\tnone\n", r.ID, role(g, r.ID), r.Alive)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%t\t%d\t%d\t%d\t%d\t%v ago\n", r.ID, role(g, r.ID), r.Alive, hb.MasterEpoch, hb.LastEpoch, hb.LastEpochStart, hb.LogEnd,
			now.Sub(hb.At).Round(time.Millisecond))
	}
	tw.Flush()
}
