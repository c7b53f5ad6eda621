package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

// errKilled says a stop did not end in the process's own exit: it was
// killed.
var errKilled = errors.New("killed")

// hurry is closed on a second interrupt: brokers being stopped are killed.
var hurry = make(chan struct{})

// broker is a `gantry dev` process (nameserver and broker) on one data
// directory and fixed ports, which it keeps across restarts.
type broker struct {
	bin, dir, logPath string
	ns, br, http      string
	nsRem, brRem      string

	mu      sync.Mutex
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{} // closed when cmd has exited
	waitErr error
	logf    *os.File
}

// newBroker picks the ports of a broker on dir; it logs to logPath.
func newBroker(bin, dir, logPath string) (*broker, error) {
	b := &broker{bin: bin, dir: dir, logPath: logPath}
	addrs, err := benchproc.FreeAddrs(5)
	if err != nil {
		return nil, err
	}
	b.ns, b.br, b.http, b.nsRem, b.brRem = addrs[0], addrs[1], addrs[2], addrs[3], addrs[4]
	return b, nil
}

// start starts the process; ready then says when it answers /readyz.
func (b *broker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return errors.New("broker already running")
	}
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(b.bin, "dev", "--dir", b.dir, "--namesrv-listen", b.ns, "--broker-listen", b.br,
		"--http-listen", b.http, "--namesrv-remoting-listen", b.nsRem, "--broker-remoting-listen", b.brRem)
	cmd.Stdout, cmd.Stderr = logf, logf
	benchproc.OwnChild(cmd)
	b.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start gantry dev: %w", err)
	}
	b.cmd, b.logf, b.exited = cmd, logf, make(chan struct{})
	go func(exited chan struct{}) {
		err := cmd.Wait()
		b.mu.Lock()
		b.waitErr = err
		b.mu.Unlock()
		close(exited)
	}(b.exited)
	return nil
}

func (b *broker) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// waitReady polls /readyz until it answers 200 and returns the time from
// the process's start.
func (b *broker) waitReady(ctx context.Context, limit time.Duration) (time.Duration, error) {
	b.mu.Lock()
	started, exited := b.started, b.exited
	b.mu.Unlock()
	if exited == nil {
		return 0, errors.New("broker not started")
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + b.http + "/readyz"
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(started), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-exited:
			return 0, fmt.Errorf("gantry dev exited before /readyz answered 200: %v; its log:\n%s", b.exitErr(), b.logTail())
		case <-deadline.C:
			return 0, fmt.Errorf("gantry dev: /readyz not 200 after %v; its log:\n%s", limit, b.logTail())
		case <-tick.C:
		}
	}
}

func (b *broker) exitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waitErr
}

// stop sends SIGTERM and waits for the exit, at most limit, then kills the
// process. It returns how long the exit took and whether it was clean.
func (b *broker) stop(limit time.Duration) (time.Duration, error) {
	return b.signal(syscall.SIGTERM, limit)
}

// kill sends SIGKILL and waits for the exit.
func (b *broker) kill() error {
	_, err := b.signal(syscall.SIGKILL, time.Minute)
	if err != nil && strings.Contains(err.Error(), "signal: killed") {
		return nil
	}
	return err
}

func (b *broker) signal(sig syscall.Signal, limit time.Duration) (time.Duration, error) {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		return 0, nil
	}
	start := time.Now()
	_ = cmd.Process.Signal(sig)
	var err error
	select {
	case <-exited:
		err = b.exitErr()
	case <-hurry:
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("on a second interrupt: %w", errKilled)
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("no exit %v after %v: %w", sig, limit, errKilled)
	}
	took := time.Since(start)
	b.mu.Lock()
	b.cmd = nil
	b.logf.Close()
	b.mu.Unlock()
	if err != nil {
		return took, fmt.Errorf("gantry dev: %w; its log:\n%s", err, b.logTail())
	}
	return took, nil
}

// close stops a running process, for the way out of a run (errors and
// interruptions included): cleanly if it can, else by SIGKILL.
func (b *broker) close() {
	if b.pid() == 0 {
		return
	}
	if _, err := b.stop(30 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "scale: stopping gantry dev:", firstLine(err))
	}
}

// logTail is the end of the broker's log.
func (b *broker) logTail() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return err.Error()
	}
	const max = 3000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// metric returns the value of an unlabelled-by-us gauge on /metrics (the
// first series of name).
func (b *broker) metric(ctx context.Context, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.http+"/metrics", nil)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		return strconv.ParseFloat(rest[i+1:], 64)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	return 0, fmt.Errorf("metrics: no %s", name)
}

// waitDispatched waits until the store's dispatcher has caught up with the
// commit log (gantry_store_dispatch_lag_bytes 0): every stored message is
// in its consume queue, readable.
func (b *broker) waitDispatched(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		lag, err := b.metric(ctx, "gantry_store_dispatch_lag_bytes")
		if err != nil {
			return err
		}
		if lag == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dispatch still %v bytes behind after %v", lag, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
