package reliability

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process of the test binary running one role.
type Proc struct {
	Name string
	Log  string // its standard error and other output

	cmd   *exec.Cmd
	ready chan string   // the READY payload, once
	done  chan struct{} // closed when it exited and its output ended
	mu    sync.Mutex
	err   error // its exit status
}

// startProc starts the test binary as role with spec, logging to logPath
// (appended: a restarted process keeps its predecessors' logs).
func startProc(name, role string, spec any, logPath string, env ...string) (*Proc, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== %s start %s\n", name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+role, SpecEnv+"="+string(raw))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = logf
	ownChild(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, ready: make(chan string, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer logf.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if payload, ok := strings.CutPrefix(line, "READY "); ok {
				select {
				case p.ready <- payload:
				default:
				}
				continue
			}
			fmt.Fprintln(logf, line)
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		fmt.Fprintf(logf, "=== %s exit %s: %v\n", name, time.Now().Format(time.RFC3339Nano), err)
	}()
	return p, nil
}

// WaitReady waits for the READY line and decodes its payload into v (nil:
// ignore it).
func (p *Proc) WaitReady(timeout time.Duration, v any) error {
	select {
	case payload := <-p.ready:
		if v == nil {
			return nil
		}
		return json.Unmarshal([]byte(payload), v)
	case <-p.done:
		return fmt.Errorf("%s exited before it was ready: %v (log %s)", p.Name, p.ExitErr(), p.Log)
	case <-time.After(timeout):
		return fmt.Errorf("%s not ready after %s (log %s)", p.Name, timeout, p.Log)
	}
}

// Signal sends sig.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills.
// It returns the exit status (nil for a clean exit).
func (p *Proc) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // in case it was stopped
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.ExitErr()
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s; killed", p.Name, timeout)
	}
}

// Wait waits up to timeout for the process to exit by itself.
func (p *Proc) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.ExitErr()
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr is the exit status once exited (nil: exit code 0).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// KilledBySignal reports whether the process died of a signal.
func (p *Proc) KilledBySignal() bool {
	var ee *exec.ExitError
	if !errors.As(p.ExitErr(), &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// Pid is the process id (for reading /proc/PID).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }
