package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/nameserver"
)

func newNamesrvCmd() *cobra.Command {
	var (
		listen string
		expiry time.Duration
	)
	cmd := &cobra.Command{
		Use:   "namesrv",
		Short: "Run a nameserver",
		Long: `Namesrv runs one stateless nameserver: brokers register with it, clients ask it
where a topic's queues live. Run several for redundancy: brokers register with
every one, and each answers on its own. A broker is dropped 120 s after its
last registration or as soon as its registration stream breaks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			serverGC()
			ns, err := nameserver.NewServer(nameserver.Config{BrokerExpiry: expiry, Logger: logger})
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				_ = ns.Close(context.Background())
				return &exitError{code: exitUsage, err: fmt.Errorf("nameserver listen: %w", err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "nameserver ready: gRPC %s\n", lis.Addr())
			return serveUntilDone(cmd.Context(), logger, func() error { return ns.Serve(lis) }, ns.Close)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":9877", "gRPC listen address")
	cmd.Flags().DurationVar(&expiry, "broker-expiry", 120*time.Second, "drop a broker silent for this long")
	return cmd
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
