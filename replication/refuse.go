package replication

import (
	"errors"
	"net"
	"sync"
	"time"
)

// ServeRefusals answers every slave that connects on lis with a welcome
// refusing it for reason, read after its hello within timeout, so that
// the slave reports why (a *RefusedError) instead of a closed connection:
// a master's HA port that requires TLS hands it its plaintext slaves
// (docs/SECURITY.md, "TLS"). It returns once lis is closed, after closing
// the connections still being answered.
func ServeRefusals(lis net.Listener, reason string, timeout time.Duration) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			refuse(c, reason, timeout)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		})
	}
}

// refuse reads a slave's hello and answers it with a refusal. The welcome
// claims no protocol version (0): a version's welcome carries the master's
// epoch list, which a slave compares its history with before it reads the
// reason, and this port has none.
func refuse(c net.Conn, reason string, timeout time.Duration) {
	if c.SetDeadline(time.Now().Add(timeout)) != nil {
		return
	}
	if _, err := ReadHello(c); err != nil {
		return
	}
	_, _ = c.Write(AppendWelcome(nil, Welcome{Reason: reason}))
}
