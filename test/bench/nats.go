package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantrymq/gantry/internal/benchkit"
	"github.com/gantrymq/gantry/internal/histogram"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

// natsServer is a JetStream server with file storage: a nats-server
// process built from the module this benchmark requires (like Gantry, a
// process of its own with its shipped settings), or, with -nats embedded,
// a server inside the benchmark process.
type natsServer struct {
	s   *server.Server // embedded
	cmd *exec.Cmd      // process
	nc  *nats.Conn
	js  jetstream.JetStream
}

// buildNATS builds nats-server into dir.
func buildNATS(dir string) (string, error) {
	bin := filepath.Join(dir, "nats-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build nats-server: %v\n%s", err, out)
	}
	return bin, nil
}

// startNATS starts a server storing in dir; bin is the nats-server binary,
// or "" for an embedded server.
func startNATS(bin, dir string, syncAlways bool) (*natsServer, error) {
	n := &natsServer{}
	var url string
	if bin == "" {
		opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
			SyncAlways: syncAlways, MaxPayload: 8 << 20}
		s, err := server.NewServer(opts)
		if err != nil {
			return nil, err
		}
		go s.Start()
		if !s.ReadyForConnections(30 * time.Second) {
			return nil, fmt.Errorf("nats-server did not start")
		}
		n.s, url = s, s.ClientURL()
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		addrs, err := benchproc.FreeAddrs(1)
		if err != nil {
			return nil, err
		}
		addr := addrs[0]
		conf := fmt.Sprintf("listen: %q\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n", addr, dir)
		if syncAlways {
			conf += "  sync_interval: always\n"
		}
		conf += "}\n"
		confPath := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		n.cmd = exec.Command(bin, "-c", confPath)
		ownChild(n.cmd)
		// Its log (stderr) is not shown, as the embedded server's is not.
		if err := n.cmd.Start(); err != nil {
			return nil, err
		}
		url = "nats://" + addr
	}
	var nc *nats.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if nc, err = nats.Connect(url); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		n.stop()
		return nil, err
	}
	n.nc = nc
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		n.stop()
		return nil, err
	}
	n.js = js
	return n, nil
}

func (n *natsServer) stop() {
	if n.nc != nil {
		n.nc.Close()
	}
	if n.s != nil {
		n.s.Shutdown()
		n.s.WaitForShutdown()
	}
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(os.Interrupt)
		_ = n.cmd.Wait()
	}
}

func (n *natsServer) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	return n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: strings.ToUpper(name), Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage})
}

// pid is the nats-server process's, or 0 when the server is embedded
// (its CPU is then the benchmark process's).
func (n *natsServer) pid() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// produce publishes asynchronously with at most cfg.inflight pending: a
// collector waits for the acknowledgements in publish order.
func (n *natsServer) produce(ctx context.Context, name string, cfg config) (benchkit.Result, error) {
	if _, err := n.stream(ctx, name); err != nil {
		return benchkit.Result{}, err
	}
	type pending struct {
		f    jetstream.PubAckFuture
		done func(error)
	}
	acks := make(chan pending, cfg.inflight)
	collected := make(chan struct{})
	defer func() { close(acks); <-collected }()
	go func() {
		defer close(collected)
		for p := range acks {
			select {
			case <-p.f.Ok():
				p.done(nil)
			case err := <-p.f.Err():
				p.done(err)
			}
		}
	}()
	subject := name + ".bench"
	send := func(_ context.Context, body []byte, done func(error)) {
		f, err := n.js.PublishAsync(subject, body)
		if err != nil {
			done(err)
			return
		}
		acks <- pending{f, done}
	}
	cpu := benchkit.StartCPU(n.pid())
	res, err := benchkit.Produce(ctx, send, benchkit.ProduceConfig{Count: cfg.count, Size: cfg.size, Inflight: cfg.inflight, Run: benchkit.NewRunID()})
	fmt.Println("jetstream", res)
	fmt.Println("         ", cpu.Stop(res.Msgs))
	return res, err
}

// consume reads the stream from the start with a pull consumer that does
// not ask for acknowledgements.
func (n *natsServer) consume(ctx context.Context, name string, cfg config) (benchkit.Result, error) {
	st, err := n.stream(ctx, name)
	if err != nil {
		return benchkit.Result{}, err
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return benchkit.Result{}, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return benchkit.Result{}, err
	}
	defer it.Stop()
	var v benchkit.Verifier
	res := benchkit.Result{Op: "consume", Latency: &histogram.Histogram{}}
	cpu := benchkit.StartCPU(n.pid())
	start := time.Now()
	for res.Msgs < cfg.count {
		msg, err := it.Next()
		if err != nil {
			return res, err
		}
		v.Add(msg.Data())
		res.Msgs++
		res.Bytes += int64(len(msg.Data()))
	}
	res.Elapsed = time.Since(start)
	fmt.Println("jetstream", res)
	fmt.Println("         ", cpu.Stop(res.Msgs))
	lines, _ := v.Report()
	fmt.Println("         ", strings.Join(lines, "; "))
	return res, nil
}

// latencySender returns a publish of one message at a time to stream
// name, warmed up.
func (n *natsServer) latencySender(ctx context.Context, name string) (func(context.Context, []byte) error, error) {
	if _, err := n.stream(ctx, name); err != nil {
		return nil, err
	}
	subject := name + ".bench"
	for range 100 { // warm-up
		if _, err := n.js.Publish(ctx, subject, []byte("warm-up")); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, body []byte) error {
		_, err := n.js.Publish(ctx, subject, body)
		return err
	}, nil
}
