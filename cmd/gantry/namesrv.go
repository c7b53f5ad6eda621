package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/replication/controller"
)

func newNamesrvCmd() *cobra.Command {
	var (
		listen         string
		remotingListen string
		expiry         time.Duration
		withController bool
		af             authFlags
		tf             serverTLSFlags
		cf             = controllerFlags{tls: &tf}
	)
	cmd := &cobra.Command{
		Use:   "namesrv",
		Short: "Run a nameserver",
		Long: `Namesrv runs one stateless nameserver: brokers register with it, clients ask it
where a topic's queues live. Run several for redundancy: brokers register with
every one, and each answers on its own. A broker is dropped 120 s after its
last registration or as soon as its registration stream breaks.

Both ports, --listen (Gantry's 9877) and --remoting-listen (RocketMQ's 9876),
answer Gantry's clients and brokers over gRPC and Apache RocketMQ clients over
RocketMQ's remoting protocol (routes, cluster info and the topic list): the
first bytes of each connection tell them apart, so a RocketMQ broker.conf's
namesrvAddr=host:9876 works as written.

--enable-controller also runs a replication controller member in the process
(RocketMQ's enableControllerInNamesrv), with the --controller-* flags of
gantry controller (--controller-id, --controller-peers, --controller-data-dir,
...): three nameservers then make the controller's raft group.

With --auth --acl-file FILE (docs/SECURITY.md), registering and unregistering
brokers needs a cluster user (brokers sign with innerClientAuthenticationCredentials),
deleting a topic's route an admin, and the controller's calls as gantry
controller --auth says; routes, cluster info and the topic list stay public.
Without --auth the nameserver refuses to listen beyond loopback unless
--allow-remote-without-auth is given: the defaults (:9877, :9876) then need
one of the three.

--tls-mode permissive or enforcing serves TLS on both ports (and the
controller's), with --tls-cert and --tls-key; --tls-client-ca and
--tls-client-auth require client certificates (docs/SECURITY.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := af.check(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			addrs := []listenAddr{{"--listen", listen}, {"--remoting-listen", remotingListen}}
			var ccfg controller.Config
			if withController {
				var err error
				if ccfg, err = cf.prepare(logger.With("component", "controller")); err != nil {
					return err
				}
				addrs = append(addrs, cf.listenAddrs(ccfg)...)
			}
			risk := "can register a broker under another's name (sending its clients elsewhere) or unregister it"
			if withController {
				risk += ", and " + controllerRisk
			}
			if err := af.checkOpen(logger, "namesrv", risk, addrs, ccfg.BindAddr); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			logger.Info("go memory limit", "limit", serverGC(0))
			nc := nameserver.Config{BrokerExpiry: expiry, Logger: logger,
				AuthenticationEnabled: af.enabled, ACLFile: af.aclFile}
			srvTLS, err := tf.server(logger.With("component", "tls"))
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if srvTLS != nil {
				nc.TLS, nc.RequireTLS = srvTLS.Config(), srvTLS.Required()
			}
			ns, err := nameserver.NewServer(nc)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				_ = ns.Close(context.Background())
				return &exitError{code: exitUsage, err: fmt.Errorf("nameserver listen: %w", err)}
			}
			rlis, err := net.Listen("tcp", remotingListen)
			if err != nil {
				lis.Close()
				_ = ns.Close(context.Background())
				return &exitError{code: exitUsage, err: fmt.Errorf("nameserver remoting listen: %w", err)}
			}
			serves, stop := []func() error{func() error { return ns.Serve(lis) }, func() error { return ns.Serve(rlis) }}, ns.Close
			if withController {
				cserve, cstop, ready, err := cf.start(ccfg, ns.Guard())
				if err != nil {
					lis.Close()
					rlis.Close()
					return errors.Join(err, ns.Close(context.Background()))
				}
				fmt.Fprintln(cmd.OutOrStdout(), ready)
				serves = append(serves, cserve)
				stop = func(ctx context.Context) error { return errors.Join(ns.Close(ctx), cstop(ctx)) }
			}
			fmt.Fprintf(cmd.OutOrStdout(), "nameserver ready: gRPC %s, RocketMQ remoting %s (each port speaks both; TLS %s)\n", lis.Addr(), rlis.Addr(), tf.mode)
			return serveUntilDone(cmd.Context(), logger, serveAll(stop, serves...), stop)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":9877", "listen address of Gantry's port (gRPC and RocketMQ remoting)")
	cmd.Flags().StringVar(&remotingListen, "remoting-listen", ":9876", "listen address of RocketMQ's port (RocketMQ remoting and gRPC)")
	cmd.Flags().DurationVar(&expiry, "broker-expiry", 120*time.Second, "drop a broker silent for this long")
	cmd.Flags().BoolVar(&withController, "enable-controller", false, "also run a replication controller member (enableControllerInNamesrv; the --controller-* flags)")
	cf.register(cmd, "controller-")
	af.register(cmd)
	tf.register(cmd.Flags(), "(with --enable-controller: the controller's raft peers)")
	return cmd
}

// serveAll returns a serve function for serveUntilDone that runs every
// serve until all return: when one fails first, stop ends the others. It
// returns the first failure.
func serveAll(stop func(context.Context) error, serves ...func() error) func() error {
	return func() error {
		var (
			wg    sync.WaitGroup
			once  sync.Once
			first error
		)
		run := func(serve func() error) {
			err := serve()
			once.Do(func() {
				first = err
				if err != nil {
					sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = stop(sctx)
				}
			})
		}
		for _, serve := range serves {
			wg.Go(func() { run(serve) })
		}
		wg.Wait()
		return first
	}
}

// serveUntilDone runs serve until it fails or ctx ends (Ctrl-C), then
// calls stop with 10 s to finish.
func serveUntilDone(ctx context.Context, logger *slog.Logger, serve func() error, stop func(context.Context) error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stop(sctx)
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := stop(sctx)
	if serr := <-errc; err == nil {
		err = serr
	}
	return err
}
