package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/ingest/writer/alert"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// Metrics is what GET /metrics exposes, in Prometheus' text format, from
// a registry of its own (nothing is registered globally, so two servers in
// one process, as in tests, do not share counters). cmd/oncetrace makes one,
// hands ObserveBatch to the writer and passes it in Config; New makes one
// when Config has none. docs/api.md lists every series.
type Metrics struct {
	reg *prometheus.Registry

	requests      *prometheus.HistogramVec
	events        *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	spans         *prometheus.CounterVec
	refused       *prometheus.CounterVec
	writerEvents  *prometheus.CounterVec
	batchEvents   prometheus.Histogram
	batchRequests prometheus.Histogram
	commitSeconds prometheus.Histogram
	commitErrors  prometheus.Counter
	pruneRuns     *prometheus.CounterVec
	models        *prometheus.CounterVec

	watchOnce sync.Once
}

// NewMetrics makes the series that are counted as things happen; the
// gauges read from the store, the writer, the hub and the alerts are added
// by the server that serves them.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "oncetrace_http_request_duration_seconds",
			Help: "Time to answer an HTTP request, by method, route pattern and status code. Live routes (WebSocket, stream) measure the connection's life.",
			// 1 ms to 30 s: a read page takes milliseconds, an ingest
			// request waits for its group commit, a queued one up to the
			// writer's 5 s queue wait.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route", "code"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_ingest_events_total",
			Help: "Events received by an ingest API (native or otlp), by result: accepted (newly stored), duplicate (already stored), rejected (invalid, not stored).",
		}, []string{"api", "result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_ingest_rejected_total",
			Help: "Events (native) or spans (otlp) rejected one by one inside a request that was otherwise taken, by reason.",
		}, []string{"api", "reason"}),
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_ingest_spans_total",
			Help: "OTLP spans received in requests that were taken, by result: accepted (mapped onto events) or rejected.",
		}, []string{"result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_ingest_requests_refused_total",
			Help: "Whole ingest requests refused (nothing of them stored), by api and reason.",
		}, []string{"api", "reason"}),
		writerEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_writer_events_total",
			Help: "Events the writer committed from every source (APIs, sandbox, webhooks, SMTP, taps), by result: accepted or duplicate.",
		}, []string{"result"}),
		batchEvents: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oncetrace_writer_batch_events",
			Help:    "Events in one writer transaction (a group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 … 65536
		}),
		batchRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oncetrace_writer_batch_requests",
			Help:    "Requests in one writer transaction (a group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 … 2048
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oncetrace_writer_commit_seconds",
			Help:    "Time of one writer transaction, from BEGIN to COMMIT, audit included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncetrace_writer_commit_errors_total",
			Help: "Writer transactions that failed (their requests were answered with an error).",
		}),
		pruneRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_prune_runs_total",
			Help: "Retention prune runs, by result (ok or error).",
		}, []string{"result"}),
		models: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncetrace_execution_models_total",
			Help: "Execution page models, by source: kept (a request answered from the model of the store's current state), read (a request read the execution from the store), warmed (built ahead once ingest went quiet), carried (moved to the state after a commit that could not change it).",
		}, []string{"source"}),
	}
	reg.MustRegister(m.requests, m.events, m.rejected, m.spans, m.refused, m.writerEvents,
		m.batchEvents, m.batchRequests, m.commitSeconds, m.commitErrors, m.pruneRuns, m.models,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"accepted", "duplicate"} {
		m.writerEvents.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "error"} {
		m.pruneRuns.WithLabelValues(r)
	}
	for _, source := range []string{"kept", "read", "warmed", "carried"} {
		m.models.WithLabelValues(source)
	}
	return m
}

// Registry is where the series live, for a caller that wants to add its
// own or gather them without HTTP.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveBatch is the writer's OnBatch: one sample per transaction.
func (m *Metrics) ObserveBatch(st writer.BatchStats) {
	m.batchEvents.Observe(float64(st.Events))
	m.batchRequests.Observe(float64(st.Requests))
	m.commitSeconds.Observe(st.Duration.Seconds())
	if st.Err != nil {
		m.commitErrors.Inc()
		return
	}
	m.writerEvents.WithLabelValues("accepted").Add(float64(st.Accepted))
	m.writerEvents.WithLabelValues("duplicate").Add(float64(st.Duplicates))
}

// ObservePrune counts one retention prune run; err is what it returned.
func (m *Metrics) ObservePrune(err error) {
	if err != nil {
		m.pruneRuns.WithLabelValues("error").Inc()
		return
	}
	m.pruneRuns.WithLabelValues("ok").Inc()
}

// ingested counts what one ingest request's events became.
func (m *Metrics) ingested(api string, res writer.Result, rejections []ingest.Rejection) {
	m.events.WithLabelValues(api, "accepted").Add(float64(res.Accepted))
	m.events.WithLabelValues(api, "duplicate").Add(float64(res.Duplicates))
	m.events.WithLabelValues(api, "rejected").Add(float64(len(rejections)))
	for _, r := range rejections {
		m.rejected.WithLabelValues(api, rejectionReason(r.Error)).Inc()
	}
}

// ingestedSpans counts what one OTLP request's spans and events became.
func (m *Metrics) ingestedSpans(spans, rejectedSpans int, res writer.Result) {
	m.spans.WithLabelValues("accepted").Add(float64(spans - rejectedSpans))
	m.spans.WithLabelValues("rejected").Add(float64(rejectedSpans))
	if rejectedSpans > 0 {
		m.rejected.WithLabelValues("otlp", "unmappable_span").Add(float64(rejectedSpans))
	}
	m.events.WithLabelValues("otlp", "accepted").Add(float64(res.Accepted))
	m.events.WithLabelValues("otlp", "duplicate").Add(float64(res.Duplicates))
}

// rejectionReasons map a rejection's message ("field: problem") onto a
// short, bounded label: the message itself names fields a client chose.
// The first match wins.
var rejectionReasons = []struct{ contains, reason string }{
	{"unknown field", "unknown_field"},
	{"duplicate", "duplicate_key"},
	{"nest", "too_deep"},
	{"depth", "too_deep"},
	{"limit", "over_limit"},
	{"bytes of printable", "bad_id"},
	{"invalid JSON", "invalid_json"},
	{"JSON object", "invalid_json"},
	{"UTF-8", "invalid_json"},
	{"required", "missing_field"},
}

func rejectionReason(msg string) string {
	for _, r := range rejectionReasons {
		if strings.Contains(msg, r.contains) {
			return r.reason
		}
	}
	return "invalid"
}

// refusalReasons name a status that refused a whole ingest request.
var refusalReasons = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusMisdirectedRequest:    "misdirected",
	http.StatusTooManyRequests:       "overloaded",
	http.StatusServiceUnavailable:    "overloaded",
	http.StatusInsufficientStorage:   "storage_full",
}

// ingestAPIs are the routes whose refusals oncetrace_ingest_requests_refused_total counts.
var ingestAPIs = map[string]string{
	"/api/v1/events": "native",
	otlpTracesPath:   "otlp",
}

// observeRequests is the outermost middleware after routing: it times every
// request by its route pattern (never the raw path, which would make a
// series per execution id), and counts refused ingest requests.
func (s *Server) observeRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			// Answered here, as echo's own logger middleware does, so the
			// status is known; the error handler is the same one.
			c.Error(err)
		}
		// For a 404 or 405 echo gives the pattern of the nearest route
		// node, or nothing: a bounded set either way.
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		s.metrics.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		if api, ok := ingestAPIs[route]; ok && c.Request().Method == http.MethodPost && status >= 400 {
			reason, known := refusalReasons[status]
			if !known {
				reason = "status_" + strconv.Itoa(status)
			}
			s.metrics.refused.WithLabelValues(api, reason).Inc()
		}
		return nil
	}
}

// handleMetrics is GET /metrics.
func (s *Server) handleMetrics(c echo.Context) error {
	s.metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// metricsSources are the parts of a server whose state /metrics reads at
// scrape time.
type metricsSources struct {
	db     *store.DB
	writer *writer.Writer
	hub    *Hub
	follow func() []FollowStatus
}

// serverMetrics is a Metrics bound to one server, with its HTTP handler.
type serverMetrics struct {
	*Metrics
	handler http.Handler
}

// watch registers the series read at scrape time. A Metrics serves one
// server; a second call does nothing.
func (m *Metrics) watch(src metricsSources) {
	m.watchOnce.Do(func() {
		if src.writer != nil {
			w := src.writer
			m.reg.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oncetrace_writer_queue_requests", Help: "Ingest requests waiting for the writer."},
					func() float64 { return float64(w.QueueDepth()) }),
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oncetrace_writer_queue_capacity", Help: "Ingest requests that may wait for the writer before new ones are refused."},
					func() float64 { return float64(w.QueueCapacity()) }))
		}
		if src.hub != nil {
			h := src.hub
			m.reg.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oncetrace_live_subscribers", Help: "Live clients (WebSockets and streams) subscribed right now."},
					func() float64 { return float64(h.Subscribers()) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "oncetrace_live_dropped_total", Help: "Live clients dropped for falling behind."},
					func() float64 { return float64(h.SlowDrops()) }))
		}
		if src.db != nil {
			m.reg.MustRegister(&storeCollector{db: src.db})
		}
		if src.follow != nil {
			m.reg.MustRegister(followCollector{status: src.follow})
		}
	})
}

var (
	alertsDesc = prometheus.NewDesc("oncetrace_alerts_total",
		"Critical findings handed to the alert webhook, by result: sent, failed (every try failed, or refused), dropped (the queue was full).", []string{"result"}, nil)
	alertRetriesDesc = prometheus.NewDesc("oncetrace_alert_retries_total", "Alert webhook tries after the first.", nil, nil)
	alertQueueDesc   = prometheus.NewDesc("oncetrace_alert_queue", "Alerts waiting for delivery.", nil, nil)
)

// WatchAlerts adds the alert webhook's counters (oncetrace_alerts_total,
// oncetrace_alert_retries_total, oncetrace_alert_queue). Call it once.
func (m *Metrics) WatchAlerts(n *alert.Notifier) { m.reg.MustRegister(alertCollector{n}) }

// alertCollector reads the notifier's own counters, so the alert package
// needs nothing of Prometheus.
type alertCollector struct{ n *alert.Notifier }

func (a alertCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- alertsDesc
	ch <- alertRetriesDesc
	ch <- alertQueueDesc
}

func (a alertCollector) Collect(ch chan<- prometheus.Metric) {
	c := a.n.Counts()
	ch <- prometheus.MustNewConstMetric(alertsDesc, prometheus.CounterValue, float64(c.Sent), "sent")
	ch <- prometheus.MustNewConstMetric(alertsDesc, prometheus.CounterValue, float64(c.Failed), "failed")
	ch <- prometheus.MustNewConstMetric(alertsDesc, prometheus.CounterValue, float64(c.Dropped), "dropped")
	ch <- prometheus.MustNewConstMetric(alertRetriesDesc, prometheus.CounterValue, float64(c.Retries))
	ch <- prometheus.MustNewConstMetric(alertQueueDesc, prometheus.GaugeValue, float64(c.Queued))
}

var (
	findingsDesc = prometheus.NewDesc("oncetrace_findings",
		"Stored findings by rule and severity: what the audit concludes now (0 for a rule with none).", []string{"rule", "severity"}, nil)
	dbSizeDesc = prometheus.NewDesc("oncetrace_db_size_bytes",
		"Bytes of the database on disk: the main file and its write-ahead log.", []string{"file"}, nil)
)

// storeCollector reads the store at scrape time: the findings as stored
// are the truth (commits and prunes both change them), and one grouped
// count is simpler than keeping a second tally in step with both.
//
// The count scans the findings table: about 50 ms for 100,000 findings,
// 1.5 s for a million here. While it takes under findingsFreshCost it runs
// at every scrape; beyond, its result is reused for findingsReuse times
// what it took, so that however often Prometheus scrapes, counting costs
// a reader at most about 5% of its time.
type storeCollector struct {
	db *store.DB

	mu     sync.Mutex
	counts []store.FindingCount
	at     time.Time     // when counts were read
	took   time.Duration // how long reading them took
}

const (
	findingsFreshCost = 100 * time.Millisecond
	findingsReuse     = 20
)

func (sc *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- findingsDesc
	ch <- dbSizeDesc
}

// findingCounts returns the counts, read again unless the last read was
// slow and recent.
func (sc *storeCollector) findingCounts() ([]store.FindingCount, error) {
	sc.mu.Lock() // one scrape counts at a time; the others wait for its result
	defer sc.mu.Unlock()
	if sc.counts != nil && sc.took >= findingsFreshCost && time.Since(sc.at) < findingsReuse*sc.took {
		return sc.counts, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	counts, err := sc.db.FindingCounts(ctx)
	if err != nil {
		return nil, err
	}
	if counts == nil {
		counts = []store.FindingCount{}
	}
	sc.counts, sc.at, sc.took = counts, time.Now(), time.Since(start)
	return counts, nil
}

func (sc *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if counts, err := sc.findingCounts(); err != nil {
		ch <- prometheus.NewInvalidMetric(findingsDesc, err)
	} else {
		seen := map[[2]string]bool{}
		for _, fc := range counts {
			seen[[2]string{fc.Rule, fc.Severity}] = true
			ch <- prometheus.MustNewConstMetric(findingsDesc, prometheus.GaugeValue, float64(fc.Count), fc.Rule, fc.Severity)
		}
		for rule, sev := range trace.Severities {
			if !seen[[2]string{string(rule), string(sev)}] {
				ch <- prometheus.MustNewConstMetric(findingsDesc, prometheus.GaugeValue, 0, string(rule), string(sev))
			}
		}
	}
	if sz, err := sc.db.FileSizes(); err != nil {
		ch <- prometheus.NewInvalidMetric(dbSizeDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(dbSizeDesc, prometheus.GaugeValue, float64(sz.Main), "main")
		ch <- prometheus.MustNewConstMetric(dbSizeDesc, prometheus.GaugeValue, float64(sz.WAL), "wal")
	}
}

// newServerMetrics binds m (a new one when nil) to the server's parts and
// makes its handler. A collector that fails is reported in the scrape's
// errors and its series left out; the others are still served.
func newServerMetrics(m *Metrics, src metricsSources) *serverMetrics {
	if m == nil {
		m = NewMetrics()
	}
	m.watch(src)
	return &serverMetrics{Metrics: m, handler: promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // promhttp_metric_handler_errors_total
	})}
}
