package server

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
)

// collector reads the broker's state at scrape time, so the hot paths
// keep only their own counters.
type collector struct {
	b                                        *broker.Broker
	in, out, minOff, maxOff, flushed, topics *prometheus.Desc
	ready, lag                               *prometheus.Desc
	dispatchLag, dispatchStalled             *prometheus.Desc
	dlqStored, dlqHeld, dlqResent            *prometheus.Desc
	authRefused                              *prometheus.Desc // nil: authentication off
}

func newCollector(b *broker.Broker) *collector {
	c := b.Config()
	labels := prometheus.Labels{"cluster": c.BrokerClusterName, "node_id": c.BrokerName}
	d := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, vars, labels)
	}
	col := &collector{
		b:       b,
		in:      d("rocketmq_messages_in_total", "Messages stored by sends since the broker started."),
		out:     d("rocketmq_messages_out_total", "Messages returned by pulls since the broker started."),
		minOff:  d("gantry_commitlog_min_offset_bytes", "First commit-log offset still stored."),
		maxOff:  d("gantry_commitlog_max_offset_bytes", "Readable end of the commit log."),
		flushed: d("gantry_commitlog_flushed_offset_bytes", "Durable end of the commit log."),
		topics:  d("gantry_topics", "Topics on this broker."),
		ready:   d("gantry_broker_ready", "1 when the broker serves requests."),
		lag:     d("rocketmq_consumer_lag_messages", "Messages stored but not yet consumed by the group.", "consumer_group", "topic"),
		dispatchLag: d("gantry_store_dispatch_lag_bytes", "Commit-log bytes not yet dispatched to the consume queues and the index "+
			"(stored, not yet readable)."),
		dispatchStalled: d("gantry_store_dispatch_stalled", "1 while the dispatcher fails to reach the commit log's end "+
			"(a full disk refusing a consume-queue or index file), 2 once sends are refused for it."),
		dlqStored: d("gantry_dlq_messages_total", "Messages dead-lettered since the broker started, by consumer group "+
			"(rate() of it is the dead-letter rate).", "group"),
		dlqHeld:   d("gantry_dlq_held_messages", "Dead letters held now (stored, not expired, not purged), by consumer group.", "group"),
		dlqResent: d("gantry_dlq_resends_total", "Dead letters resent since the broker started, by consumer group.", "group"),
	}
	if b.Guard() != nil {
		col.authRefused = d("gantry_auth_refused_total", "Requests refused by authentication or authorization since the broker started, by reason "+
			"(docs/SECURITY.md).", "reason")
	}
	return col
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.in, c.out, c.minOff, c.maxOff, c.flushed, c.topics, c.ready, c.lag,
		c.dlqStored, c.dlqHeld, c.dlqResent, c.dispatchLag, c.dispatchStalled} {
		ch <- d
	}
	if c.authRefused != nil {
		ch <- c.authRefused
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Status()
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(c.in, prometheus.CounterValue, float64(st.MessagesPut))
	ch <- prometheus.MustNewConstMetric(c.out, prometheus.CounterValue, float64(st.MessagesGot))
	ch <- prometheus.MustNewConstMetric(c.minOff, prometheus.GaugeValue, float64(st.MinLogOffset))
	ch <- prometheus.MustNewConstMetric(c.maxOff, prometheus.GaugeValue, float64(st.MaxLogOffset))
	ch <- prometheus.MustNewConstMetric(c.flushed, prometheus.GaugeValue, float64(st.FlushedOffset))
	ch <- prometheus.MustNewConstMetric(c.topics, prometheus.GaugeValue, float64(st.Topics))
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready)
	if c.authRefused != nil {
		for r, n := range c.b.Guard().Refused() {
			ch <- prometheus.MustNewConstMetric(c.authRefused, prometheus.CounterValue, float64(n), auth.Reason(r).String())
		}
	}
	if !st.Ready {
		return
	}
	stalled := 0.0
	switch {
	case st.Dispatch.Refusing:
		stalled = 2
	case st.Dispatch.Stalled:
		stalled = 1
	}
	ch <- prometheus.MustNewConstMetric(c.dispatchLag, prometheus.GaugeValue, float64(st.Dispatch.LagBytes))
	ch <- prometheus.MustNewConstMetric(c.dispatchStalled, prometheus.GaugeValue, stalled)
	for _, s := range c.b.DLQStats() {
		ch <- prometheus.MustNewConstMetric(c.dlqStored, prometheus.CounterValue, float64(s.Stored), s.Group)
		ch <- prometheus.MustNewConstMetric(c.dlqHeld, prometheus.GaugeValue, float64(s.Held), s.Group)
		ch <- prometheus.MustNewConstMetric(c.dlqResent, prometheus.CounterValue, float64(s.Resent), s.Group)
	}
	for _, k := range c.b.OffsetKeys("") {
		group, topic := k.Group, k.Topic
		qs, err := c.b.TopicStatus(topic)
		if err != nil {
			continue
		}
		var lag int64
		for _, q := range qs {
			off, ok := c.b.QueryOffset(group, topic, q.QueueID)
			if !ok {
				off = q.MinOffset
			}
			lag += max(q.MaxOffset-off, 0)
		}
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag), group, topic)
	}
}

// httpHandler serves /metrics (Prometheus), /debug/pprof (Go profiles, with
// pprofEnable; with authentication on, to an admin user only),
// /healthz (the process is up) and /readyz (recovered,
// serving, every stored message readable: the dispatcher not stalled, and
// registered with a nameserver when any is configured).
func httpHandler(b *broker.Broker, registered func() bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(b), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if b.Config().PprofEnable {
		g := b.Guard()
		mux.Handle("GET /debug/pprof/", adminOnly(g, http.HandlerFunc(pprof.Index)))
		mux.Handle("GET /debug/pprof/profile", adminOnly(g, http.HandlerFunc(pprof.Profile)))
		mux.Handle("GET /debug/pprof/trace", adminOnly(g, http.HandlerFunc(pprof.Trace)))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		stalled := b.Status().Dispatch.String()
		switch {
		case !b.Ready():
			http.Error(w, "not ready: shutting down or not recovered", http.StatusServiceUnavailable)
		case stalled != "":
			http.Error(w, "not ready: "+stalled, http.StatusServiceUnavailable)
		case !registered():
			http.Error(w, "not ready: not registered with any nameserver yet", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ready\n"))
		}
	})
	return mux
}

// adminOnly serves h to admin users, who give their access key and secret
// key by HTTP Basic authentication (docs/SECURITY.md, "Operations and
// rights"): 401 with a WWW-Authenticate challenge to anyone else. A nil
// guard (authentication off) serves everyone.
func adminOnly(g *auth.Guard, h http.Handler) http.Handler {
	if g == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *auth.Principal
		var err error
		if ak, sk, ok := r.BasicAuth(); ok {
			// The secret is checked as a remoting request's signature
			// would be, through the guard, which counts and logs a
			// refusal: the users keep no secret to compare with.
			ext := map[string]string{auth.ExtAccessKey: ak}
			ext[auth.ExtSignature] = auth.SignRemoting(sk, ext, nil)
			p, err = g.Remoting(ext, nil, r.RemoteAddr)
		}
		if err == nil {
			err = g.Authorize(p, auth.ClassAdmin, r.URL.Path, r.RemoteAddr)
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="gantry broker", charset="UTF-8"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
