package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
)

func newBrokerCmd() *cobra.Command {
	var (
		conf     string
		namesrv  string
		storeDir string
		autoTop  bool
		skip     bool
		tf       serverTLSFlags
	)
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a broker",
		Long: `Broker runs one broker configured by a RocketMQ-style broker.conf (key=value
lines; unknown keys are errors, RocketMQ's tuning keys are accepted and
ignored). Flags override the file. It serves Gantry's gRPC API and RocketMQ's
remoting protocol on both its ports, grpcListenAddr (:8081) and listenPort
(10911, on bindAddress: every interface by default), and metrics and health
on httpListenAddr (:5557; /debug/pprof/ with pprofEnable=true). The --tls-*
flags set the TLS keys (tls.server.*, tls.enable, tls.client.*;
docs/SECURITY.md).

Keys: ` + strings.Join(broker.ConfigKeys, ", ") + `.`,
		Example: `  gantry broker -c broker.conf
  gantry broker -n 127.0.0.1:9877 --store ./data/store`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg broker.Config
			if conf != "" {
				if err := broker.ParseConfigFile(conf, &cfg); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			if cmd.Flags().Changed("namesrv") {
				cfg.NamesrvAddr = strings.Split(namesrv, ";")
			}
			if cmd.Flags().Changed("store") {
				cfg.StorePathRootDir = storeDir
			}
			if cmd.Flags().Changed("auto-create-topics") {
				cfg.AutoCreateTopicEnable = autoTop
			}
			if cmd.Flags().Changed("skip-corrupt") {
				cfg.SkipCorrupt = skip
			}
			if err := tf.applyBroker(&cfg); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := cfg.Validate(); err != nil {
				if conf != "" {
					err = fmt.Errorf("%s: %w", conf, err)
				}
				return &exitError{code: exitUsage, err: err}
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg.Logger.Info("go memory limit", "limit", serverGC(cfg.MemoryLimit))
			start := time.Now()
			if cfg.EnableControllerMode {
				return runMember(cmd, cfg, start)
			}
			s, err := server.Start(cmd.Context(), server.Config{Broker: cfg})
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "broker %s ready in %v: gRPC %s, RocketMQ remoting %s, HTTP %s\n", s.Broker().Config().BrokerName,
				time.Since(start).Round(time.Millisecond), s.GRPCAddr(), s.RemotingAddr(), s.HTTPAddr())
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				return &exitError{code: exitProblems, err: fmt.Errorf("shutdown: %w", err)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&conf, "config", "c", "", "broker.conf file")
	f.StringVarP(&namesrv, "namesrv", "n", "", "nameserver addresses (either port), ';'-separated (namesrvAddr)")
	f.StringVar(&storeDir, "store", "", "store directory (storePathRootDir)")
	f.BoolVar(&autoTop, "auto-create-topics", false, "create topics on first send (autoCreateTopicEnable)")
	f.BoolVar(&skip, "skip-corrupt", false, "start although the commit log is damaged in the middle: keep every valid record after the damage, "+
		"copy the damaged range to corrupt/ and report it (skipCorrupt)")
	tf.register(f, "(nameservers, controllers, its master's HA port)")
	f.BoolVar(&tf.dial, "tls", false, "dial the nameservers, controllers and its master's HA port with TLS (tls.enable)")
	return cmd
}

// runMember runs a controller-mode broker (enableControllerMode) until the
// command's context ends.
func runMember(cmd *cobra.Command, cfg broker.Config, start time.Time) error {
	m, err := server.StartMember(cmd.Context(), server.Config{Broker: cfg})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	s := m.Server()
	fmt.Fprintf(cmd.OutOrStdout(), "broker %s id %d ready in %v (controller mode, controllers %s; the controller elects the master): gRPC %s, RocketMQ remoting %s, HTTP %s\n",
		cfg.BrokerName, cfg.BrokerID, time.Since(start).Round(time.Millisecond), strings.Join(cfg.ControllerAddr, ";"),
		s.GRPCAddr(), s.RemotingAddr(), s.HTTPAddr())
	<-cmd.Context().Done()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		return &exitError{code: exitProblems, err: fmt.Errorf("shutdown: %w", err)}
	}
	return nil
}
