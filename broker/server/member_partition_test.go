package server_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/internal/faultproxy"
	"github.com/gantrymq/gantry/message"
)

// ack is one send a broker acknowledged.
type ack struct {
	id    int // the broker's id
	epoch int32
	at    time.Time
	body  string
}

// proxied starts a group of 3 whose links to the controller and whose HA
// ports (as slaves dial them) each go through a fault proxy, by broker id.
func proxied(t *testing.T, role broker.BrokerRole, edit ...func(*server.Config)) (g *group, ctl, ha []*faultproxy.Proxy) {
	ctlAddr := startController(t, false)
	g = &group{t: t}
	for id := 1; id <= 3; id++ {
		c, err := faultproxy.Start(faultproxy.Config{Target: ctlAddr})
		require.NoError(t, err)
		haPort := freeAddr(t)
		h, err := faultproxy.Start(faultproxy.Config{Target: haPort})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = h.Close() })
		ctl, ha = append(ctl, c), append(ha, h)
		cfg := memberConfig(t, c.Addr(), t.TempDir(), int64(id), role)
		_, p, _ := net.SplitHostPort(haPort)
		cfg.Broker.HAListenPort, _ = strconv.Atoi(p)
		cfg.HAAdvertiseAddr = h.Addr()
		for _, e := range edit {
			e(&cfg)
		}
		g.cfgs, g.ms = append(g.cfgs, cfg), append(g.ms, nil)
		g.start(id)
	}
	t.Cleanup(func() {
		for _, m := range g.ms {
			if m != nil {
				assert.NoError(t, m.Close(context.Background()))
			}
		}
	})
	return g, ctl, ha
}

// load sends to every broker in turn until stop, recording each ack
// with the epoch its broker was in.
func load(g *group, stop <-chan struct{}) (func() []ack, *sync.WaitGroup) {
	var (
		mu   sync.Mutex
		acks []ack
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			id := i%3 + 1
			m := g.ms[id-1]
			srv := m.Server()
			if srv == nil {
				continue
			}
			ep := m.Epoch()
			b := string(body(i))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := srv.Broker().Send(ctx, "T", []*message.Message{{Topic: "T", QueueID: int32(i % 2), Body: []byte(b)}})
			cancel()
			if err == nil {
				mu.Lock()
				acks = append(acks, ack{id: id, epoch: ep, at: time.Now(), body: b})
				mu.Unlock()
			}
		}
	})
	return func() []ack {
		mu.Lock()
		defer mu.Unlock()
		return append([]ack(nil), acks...)
	}, &wg
}

// The master cut off from the controller (alone, or from everyone) stops
// acknowledging when its lease ends, before the controller elects another;
// cut off from its slaves only, it stays master and acknowledges nothing
// its in-sync set lacks. Either way no acknowledged message is lost and no
// two brokers acknowledge in one epoch.
func TestMemberPartitionedMaster(t *testing.T) {
	for _, shape := range []string{"controller", "everyone", "slaves", "controller-async"} {
		t.Run(shape, func(t *testing.T) {
			role := broker.SyncMaster
			if shape == "controller-async" { // no slave holds up its acks: only the lease stops them
				shape, role = "controller", broker.AsyncMaster
			}
			g, ctl, ha := proxied(t, role)
			m1 := g.master(1)
			require.NoError(t, g.ms[m1-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
			for id := 1; id <= 3; id++ {
				g.waitTopic(id)
			}
			stop := make(chan struct{})
			acks, wg := load(g, stop)
			require.Eventually(t, func() bool { return len(acks()) >= 20 }, failoverWait, 10*time.Millisecond)

			cut := time.Now()
			hole := faultproxy.Fault{Mode: faultproxy.Blackhole}
			switch shape {
			case "controller":
				ctl[m1-1].Set(hole)
			case "everyone":
				ctl[m1-1].Set(hole)
				ha[m1-1].Set(hole)
			case "slaves":
				ha[m1-1].Set(hole)
			}
			m2 := m1
			if shape == "slaves" {
				time.Sleep(3 * time.Second) // longer than the controller's broker timeout
				assert.True(t, g.ms[m1-1].IsMaster(), "a master its slaves cannot reach keeps its role")
			} else {
				m2 = g.master(2)
				require.NotEqual(t, m1, m2)
			}
			n := len(acks())
			require.Eventually(t, func() bool { return len(acks()) > n+20 || shape == "slaves" }, failoverWait, 10*time.Millisecond)
			ctl[m1-1].Set(faultproxy.Fault{})
			ha[m1-1].Set(faultproxy.Fault{})
			if shape == "slaves" { // healed, the slaves rejoin the in-sync set and sends go on
				n = len(acks())
				require.Eventually(t, func() bool { return len(acks()) > n+20 }, failoverWait, 10*time.Millisecond)
			}
			close(stop)
			wg.Wait()

			final := g.master(1)
			for id := 1; id <= 3; id++ {
				if id != final {
					g.sameLogs(final, id)
				}
			}
			held := map[string]bool{}
			for _, q := range g.bodies(final) {
				for _, b := range q {
					held[b] = true
				}
			}
			byEpoch := map[int32]int{}
			var lastOld, firstNew time.Time
			lost := 0
			for _, a := range acks() {
				if !held[a.body] {
					lost++
					assert.True(t, role == broker.AsyncMaster && a.id == m1 && a.epoch == 1,
						"acknowledged %s (by %d in epoch %d) is lost", a.body, a.id, a.epoch)
				}
				if other, ok := byEpoch[a.epoch]; ok {
					assert.Equal(t, other, a.id, "two brokers acknowledged in epoch %d", a.epoch)
				}
				byEpoch[a.epoch] = a.id
				if a.id == m1 && a.epoch == 1 && a.at.After(lastOld) {
					lastOld = a.at
				}
				if a.epoch == 2 && (firstNew.IsZero() || a.at.Before(firstNew)) {
					firstNew = a.at
				}
			}
			if lost > 0 { // an ASYNC_MASTER's unreplicated suffix, cut when it rejoined, on record
				rec, err := os.ReadFile(filepath.Join(g.cfgs[m1-1].Broker.StorePathRootDir, "truncations.log"))
				require.NoError(t, err, "%d acknowledged messages lost without a truncation record", lost)
				assert.Contains(t, string(rec), `"records":`)
			}
			if shape != "slaves" {
				assert.True(t, lastOld.Before(firstNew), "the old master acknowledged at %s, after the new one's first ack at %s", lastOld, firstNew)
				lease := g.cfgs[m1-1].Broker.MasterLease
				assert.True(t, lastOld.Before(cut.Add(2*lease)), "the old master acknowledged %s after the cut, past its lease %s",
					lastOld.Sub(cut), lease)
			}
		})
	}
}
