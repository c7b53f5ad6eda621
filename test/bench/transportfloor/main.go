// Command transportfloor measures the round trip of one request at a time
// over the two protocols a Gantry broker speaks, against servers that
// answer at once and store nothing: gRPC (a SendStream, as Gantry's
// producer sends) and RocketMQ remoting (Gantry's remoting package, as the
// official clients send). It is the floor under the peer benchmark's "one
// send at a time" row: no broker can answer faster than its transport.
// The servers run in a process of their own, as a broker does.
//
//	cd test/bench && go run ./transportfloor [-count 20000] [-rounds 3] [-size 1024]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/remoting"
)

const serverEnv = "GANTRY_TRANSPORTFLOOR_SERVER"

func main() {
	count := flag.Int("count", 20_000, "requests per protocol and round")
	rounds := flag.Int("rounds", 3, "rounds, each measuring both protocols")
	size := flag.Int("size", 1024, "request body bytes")
	flag.Parse()
	log.SetFlags(0)
	if os.Getenv(serverEnv) == "1" {
		if err := serve(); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := measure(*count, *rounds, *size); err != nil {
		log.Fatal(err)
	}
}

// echo answers every SendStream request at once with one result.
type echo struct {
	gantryv1.UnimplementedMessagingServer
}

func (echo) SendStream(st grpc.BidiStreamingServer[gantryv1.SendRequest, gantryv1.SendResponse]) error {
	for {
		req, err := st.Recv()
		if err != nil {
			return nil
		}
		err = st.Send(&gantryv1.SendResponse{RequestId: req.GetRequestId(),
			Results: []*gantryv1.SendResult{{MsgId: "0A00000100002A9F0000000000000000", QueueOffset: 1}}})
		if err != nil {
			return err
		}
	}
}

// serve runs both servers on loopback, prints their addresses and runs
// until its standard input closes (the measuring process ended, however
// it ended).
func serve() error {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	gantryv1.RegisterMessagingServer(gs, echo{})
	go gs.Serve(gl)
	rs, err := remoting.NewServer(remoting.Config{}, remoting.HandlerFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return &remoting.Command{Opaque: req.Opaque, Flag: 1,
			ExtFields: map[string]string{"msgId": "0A00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "1"}}
	}))
	if err != nil {
		return err
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go rs.Serve(rl)
	fmt.Println(gl.Addr(), rl.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	gs.Stop()
	return rs.Close()
}

func measure(count, rounds, size int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv := exec.Command(self)
	srv.Env = append(os.Environ(), serverEnv+"=1")
	srv.Stderr = os.Stderr
	stdin, err := srv.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close()
		_ = srv.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("server process: %w", err)
	}
	addrs := strings.Fields(line)
	if len(addrs) != 2 {
		return fmt.Errorf("server process printed %q, want two addresses", line)
	}
	ctx := context.Background()
	cc, err := grpc.NewClient(addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	st, err := gantryv1.NewMessagingClient(cc).SendStream(ctx)
	if err != nil {
		return err
	}
	rc, err := remoting.Dial(ctx, addrs[1], remoting.DialOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	body := bytes.Repeat([]byte{'x'}, size)
	const warm = 200
	fmt.Printf("one request at a time, %d-byte bodies, %d per protocol and round, server answering at once in its own process\n", size, count)
	for range rounds {
		d := make([]time.Duration, 0, count)
		for i := range count + warm {
			t0 := time.Now()
			if err := st.Send(&gantryv1.SendRequest{Topic: "T", RequestId: uint64(i + 1), Records: [][]byte{body}}); err != nil {
				return err
			}
			if _, err := st.Recv(); err != nil {
				return err
			}
			if i >= warm {
				d = append(d, time.Since(t0))
			}
		}
		fmt.Println("grpc stream  ", quantiles(d))
		d = d[:0]
		for i := range count + warm {
			// The header of a send: a dozen short fields, as SEND_MESSAGE_V2.
			req := &remoting.Command{Code: int16(remoting.ReqSendMessageV2), Language: "GO", Version: remoting.VersionV4_5_2,
				ExtFields: map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
					"g": "1764547200000", "h": "0", "i": "UNIQ_KEY\x010A0000010000000000000000000000\x02", "j": "0", "k": "false", "m": "false"},
				Body: body}
			t0 := time.Now()
			if _, err := rc.Invoke(ctx, req); err != nil {
				return err
			}
			if i >= warm {
				d = append(d, time.Since(t0))
			}
		}
		fmt.Println("remoting     ", quantiles(d))
	}
	return nil
}

func quantiles(d []time.Duration) string {
	slices.Sort(d)
	q := func(f float64) time.Duration {
		return d[min(len(d)-1, int(f*float64(len(d))))].Round(100 * time.Nanosecond)
	}
	return fmt.Sprintf("p50 %v  p99 %v  p999 %v", q(0.5), q(0.99), q(0.999))
}
