//go:build !shadowgate_omit_metrics

package web

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
)

// Metrics are the gateway's Prometheus metrics. The engine and the journal
// report into them through ObserveStep and ObserveCommit.
type Metrics struct {
	reg      *prometheus.Registry
	steps    *prometheus.CounterVec
	stepTime *prometheus.HistogramVec
	fsync    prometheus.Histogram
	sseSent  prometheus.Counter
}

// NewMetrics builds the registry with the process and Go collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shadowgate_steps_total",
		Help: "Governed steps by outcome: completed, acted, refused, approval_request, failed."}, []string{"outcome"})
	m.stepTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "shadowgate_step_duration_seconds",
		Help: "Duration of a governed step, from judging to its receipt.", Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 12)},
		[]string{"outcome"})
	m.fsync = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shadowgate_journal_commit_duration_seconds",
		Help: "Duration of one journal write, fsync included.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)})
	m.sseSent = prometheus.NewCounter(prometheus.CounterOpts{Name: "shadowgate_sse_events_sent_total",
		Help: "Events sent to event-stream clients."})
	m.reg.MustRegister(m.steps, m.stepTime, m.fsync, m.sseSent,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveStep records one governed step.
func (m *Metrics) ObserveStep(k runtime.ObservationKind, d time.Duration) {
	m.steps.WithLabelValues(string(k)).Inc()
	m.stepTime.WithLabelValues(string(k)).Observe(d.Seconds())
}

// ObserveCommit records one journal write.
func (m *Metrics) ObserveCommit(d time.Duration, _ int) { m.fsync.Observe(d.Seconds()) }

// sentEvent counts one event sent to an event-stream client.
func (m *Metrics) sentEvent() { m.sseSent.Inc() }

// watch registers the gauges read from the engine and the other surfaces;
// now is the clock shelving is judged by.
func (m *Metrics) watch(eng *runtime.Engine, mq func() MQTTStats, up func() UplinkStats, now func() time.Time) {
	gauge := func(name, help string, f func() float64) {
		_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("shadowgate_pending_approvals", "Approvals waiting for people.", func() float64 { return float64(len(eng.Approvals())) })
	gauge("shadowgate_locked_actuators", "Actuators locked by an actuation whose effect is unknown.", func() float64 { return float64(len(eng.Locks())) })
	gauge("shadowgate_journal_healthy", "1 while the journal can witness, 0 when actuations are refused.", func() float64 {
		if eng.Healthy() == nil {
			return 1
		}
		return 0
	})
	if mq != nil {
		gauge("shadowgate_mqtt_clients", "Connected MQTT clients.", func() float64 { return float64(mq().Clients) })
		_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shadowgate_mqtt_denied_publishes_total",
			Help: "Publishes the ACL dropped."}, func() float64 { return float64(mq().DeniedPublishes) }))
	}
	if up != nil {
		gauge("shadowgate_uplink_connected", "1 while the uplink is connected.", func() float64 {
			if up().Connected {
				return 1
			}
			return 0
		})
		gauge("shadowgate_uplink_backlog_messages", "Messages waiting in the outbox.", func() float64 { return float64(up().Backlog) })
		gauge("shadowgate_uplink_backlog_bytes", "Bytes waiting in the outbox.", func() float64 { return float64(up().BacklogBytes) })
		_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shadowgate_uplink_dropped_total",
			Help: "Telemetry dropped because the outbox was full."}, func() float64 { return float64(up().Dropped) }))
	}
	m.watchAlarms(eng, now)
	quality := prometheus.NewDesc("shadowgate_reading_quality", "Quality of the latest reading: 1 good, 2 stale, 3 bad.",
		[]string{"device", "capability"}, nil)
	_ = m.reg.Register(collectorFunc{desc: quality, collect: func(ch chan<- prometheus.Metric) {
		for _, st := range eng.States() {
			q := devices.QualityBad
			if st.Reading != nil {
				q = st.Reading.Quality
			}
			ch <- prometheus.MustNewConstMetric(quality, prometheus.GaugeValue, float64(q), st.Device, st.Capability)
		}
	}})
}

// watchAlarms registers the alarm gauges: shadowgate_alarms by state
// (active and unacknowledged count what is not shelved, as the console's
// header does; an active unacknowledged alarm counts in both) and
// shadowgate_alarms_standing by priority (standing, not shelved). Every
// label value is always there, at 0 when none, so that a rule on it
// sees a value.
func (m *Metrics) watchAlarms(eng *runtime.Engine, now func() time.Time) {
	byState := prometheus.NewDesc("shadowgate_alarms", "Alarms by state: active and unacknowledged (not shelved), shelved.",
		[]string{"state"}, nil)
	_ = m.reg.Register(collectorFunc{desc: byState, collect: func(ch chan<- prometheus.Metric) {
		c := runtime.CountAlarms(eng.Alarms(), now())
		for _, x := range []struct {
			state string
			n     int
		}{{"active", c.Active}, {"unacknowledged", c.Unacknowledged}, {"shelved", c.Shelved}} {
			ch <- prometheus.MustNewConstMetric(byState, prometheus.GaugeValue, float64(x.n), x.state)
		}
	}})
	byPriority := prometheus.NewDesc("shadowgate_alarms_standing", "Alarms active or unacknowledged and not shelved, by priority.",
		[]string{"priority"}, nil)
	_ = m.reg.Register(collectorFunc{desc: byPriority, collect: func(ch chan<- prometheus.Metric) {
		t := now()
		n := map[runtime.AlarmPriority]int{}
		for _, a := range eng.Alarms() {
			if a.Standing() && !a.Shelved(t) {
				n[a.Priority]++
			}
		}
		for _, p := range []runtime.AlarmPriority{runtime.PriorityCritical, runtime.PriorityHigh, runtime.PriorityMedium, runtime.PriorityLow} {
			ch <- prometheus.MustNewConstMetric(byPriority, prometheus.GaugeValue, float64(n[p]), string(p))
		}
	}})
}

// collectorFunc is a collector of one described metric.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// metrics serves the Prometheus text format (metrics_off.go answers 404
// in a build without metrics). The server's gzip middleware
// compresses it where the client accepts gzip, so promhttp must not
// compress it a second time.
func (s *Server) metrics(c echo.Context) error {
	promhttp.HandlerFor(s.opts.Metrics.reg, promhttp.HandlerOpts{DisableCompression: true}).ServeHTTP(c.Response(), c.Request())
	return nil
}
