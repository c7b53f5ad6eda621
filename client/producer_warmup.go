package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/connectivity"
)

// warmUp reads the routes of the WithWarmUp topics and connects to their
// brokers, within ctx.
func (p *Producer) warmUp(ctx context.Context) error {
	if len(p.opts.warmUp) == 0 {
		return nil
	}
	var addrs []string
	seen := map[string]bool{}
	for _, topic := range p.opts.warmUp {
		rt, err := p.c.routes.get(ctx, topic)
		switch {
		case errors.Is(err, ErrTopicNotFound):
			return fmt.Errorf("client: warm-up: topic %q has no route: %w", topic, err)
		case err != nil:
			return fmt.Errorf("client: warm-up: route of topic %q from the nameservers %s: %w",
				topic, strings.Join(p.c.cfg.NameServers, ", "), err)
		case len(rt.write) == 0:
			return fmt.Errorf("client: warm-up: topic %q has no writable queue: %w", topic, ErrNoQueue)
		}
		for _, q := range rt.write {
			if !seen[q.Broker] {
				seen[q.Broker] = true
				addrs = append(addrs, q.Broker)
			}
		}
	}
	for _, addr := range addrs {
		if _, err := p.broker(addr); err != nil {
			return fmt.Errorf("client: warm-up: broker %s: %w", addr, err)
		}
		cc, err := p.c.pool.get(addr)
		if err != nil {
			return fmt.Errorf("client: warm-up: broker %s: %w", addr, err)
		}
		cc.Connect() // all at once; the waits below overlap
	}
	for _, addr := range addrs {
		cc, err := p.c.pool.get(addr)
		if err != nil {
			return err
		}
		for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
			if !cc.WaitForStateChange(ctx, st) {
				return fmt.Errorf("client: warm-up: broker %s not ready (%s): %w: %w", addr, st, ErrUnavailable, ctx.Err())
			}
		}
	}
	return nil
}
