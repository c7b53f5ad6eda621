package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/remoting"
)

// RoleConnHolder is a child that holds many client connections to one
// broker (the connections family). RunChild does not know it: an init
// function in this file runs it before TestMain when the test binary is
// started with that role.
const RoleConnHolder = "connholder"

func init() {
	if os.Getenv(ChildEnv) == RoleConnHolder {
		os.Exit(runConnHolderChild())
	}
}

// HolderSpec configures a connection holder.
type HolderSpec struct {
	Name string
	// GRPC and Remoting are the broker's addresses; Topic a topic it has.
	GRPC, Remoting, Topic string
	// GRPCConns gRPC connections (one grpc.ClientConn each) and
	// RemotingConns RocketMQ remoting connections are opened.
	GRPCConns, RemotingConns int
}

// HolderReady is what a holder reports once every connection has
// answered one call.
type HolderReady struct {
	GRPC, Remoting int
	Took           time.Duration
	NoFile         uint64 // its open-files limit
}

func runConnHolderChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	defer signal.Ignore(syscall.SIGTERM, os.Interrupt) // a second SIGTERM while closing
	var spec HolderSpec
	if err := json.Unmarshal([]byte(os.Getenv(SpecEnv)), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "connholder: %v\n", err)
		return 1
	}
	if err := runConnHolder(ctx, spec); err != nil {
		fmt.Fprintf(os.Stderr, "connholder %s: %v\n", spec.Name, err)
		return 1
	}
	return 0
}

// holder is the connections of one holder process.
type holder struct {
	spec HolderSpec
	mu   sync.Mutex
	gcs  []*grpc.ClientConn
	rcs  []*remoting.Client
}

// runConnHolder opens the connections, makes one call on each, reports
// READY, holds them until ctx ends, then makes one more call on each (a
// gRPC connection must still be READY: not reconnected) and closes them.
// Any failure is an error.
func runConnHolder(ctx context.Context, spec HolderSpec) error {
	nofile, err := RaiseOpenFiles()
	if err != nil {
		return err
	}
	h := &holder{spec: spec}
	defer h.close()
	start := time.Now()
	if err := h.each(func(i int, grpcConn bool) error { return h.open(i, grpcConn) }); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	ready(HolderReady{GRPC: len(h.gcs), Remoting: len(h.rcs), Took: time.Since(start), NoFile: nofile})
	if err := h.hold(ctx); err != nil {
		return err
	}
	var gi, ri atomic.Int64
	err = h.each(func(_ int, grpcConn bool) error {
		if grpcConn {
			cc := h.gcs[gi.Add(1)-1]
			if s := cc.GetState(); s != connectivity.Ready {
				return fmt.Errorf("a gRPC connection was not held: %s", s)
			}
			return h.callGRPC(cc)
		}
		return h.callRemoting(h.rcs[ri.Add(1)-1])
	})
	fmt.Fprintf(os.Stderr, "connholder %s: held grpc=%d remoting=%d, checked again: err=%v\n", spec.Name, len(h.gcs), len(h.rcs), err)
	if err != nil {
		return fmt.Errorf("check while held: %w", err)
	}
	return nil
}

// hold waits for ctx to end, sending a HEART_BEAT on every remoting
// connection every 30 s meanwhile, as RocketMQ clients do (the broker
// closes a remoting connection idle for 120 s).
func (h *holder) hold(ctx context.Context) error {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			for _, rc := range h.rcs {
				if err := h.callRemoting(rc); err != nil {
					return fmt.Errorf("heartbeat while held: %w", err)
				}
			}
		}
	}
}

// each runs f for every connection, 32 at a time, and returns the first
// error.
func (h *holder) each(f func(i int, grpcConn bool) error) error {
	type job struct {
		i        int
		grpcConn bool
	}
	jobs := make(chan job)
	var (
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	for range 32 {
		wg.Go(func() {
			for j := range jobs {
				if err := f(j.i, j.grpcConn); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for i := range h.spec.GRPCConns + h.spec.RemotingConns {
		if first.Load() != nil {
			break
		}
		jobs <- job{i: i, grpcConn: i < h.spec.GRPCConns}
	}
	close(jobs)
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

func (h *holder) open(i int, grpcConn bool) error {
	if grpcConn {
		cc, err := grpc.NewClient(h.spec.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.gcs = append(h.gcs, cc)
		h.mu.Unlock()
		return h.callGRPC(cc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := remoting.Dial(ctx, h.spec.Remoting, remoting.DialOptions{})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.rcs = append(h.rcs, rc)
	h.mu.Unlock()
	return h.callRemoting(rc)
}

// callGRPC asks the broker for a queue's offsets on cc.
func (h *holder) callGRPC(cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := gantryv1.NewMessagingClient(cc).GetQueueOffsets(ctx, &gantryv1.GetQueueOffsetsRequest{Topic: h.spec.Topic},
		grpc.WaitForReady(true))
	return err
}

// callRemoting sends a producer's HEART_BEAT (no consumers) on rc.
func (h *holder) callRemoting(rc *remoting.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := remoting.NewRequest(remoting.ReqHeartBeat, nil)
	req.Body = fmt.Appendf(nil, `{"clientID":"%s@%s","consumerDataSet":[]}`, h.spec.Name, rc.Conn().LocalAddr())
	res, err := rc.Invoke(ctx, req)
	if err != nil {
		return err
	}
	if res.ResponseCode() != remoting.ResSuccess {
		return fmt.Errorf("HEART_BEAT answered %s: %s", res.ResponseCode(), res.Remark)
	}
	return nil
}

func (h *holder) close() {
	var errs []error
	for _, cc := range h.gcs {
		errs = append(errs, cc.Close())
	}
	for _, rc := range h.rcs {
		errs = append(errs, rc.Close())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "connholder %s: close: %v\n", h.spec.Name, err)
	}
}
