package web

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FollowStatus is how far behind a feed that follows an outside system
// is: one target of serve --temporal. cmd/oncetrace reads it from the
// follower (ingest/feed/temporal/follow), which web does not know.
type FollowStatus struct {
	Feed   string // "temporal"
	Target string // HOST:PORT/NAMESPACE
	// State is connecting, following or unreachable.
	State string
	// LastPoll is when the last successful look at the target started;
	// zero before the first.
	LastPoll time.Time
	// Lag is how long ago that was (since the start while there is none).
	Lag time.Duration
	// RunsFollowed are the runs long-polled now, RunsPolled the open ones
	// over the cap, read at each pass.
	RunsFollowed, RunsPolled int
	// EventsWritten and Errors count since the start.
	EventsWritten, Errors int64
}

// healthBody is the status as /healthz shows it. The last error is left
// out: /healthz is open to anyone, and the log has it.
func (st FollowStatus) healthBody() map[string]any {
	b := map[string]any{"feed": st.Feed, "target": st.Target, "state": st.State, "lag_seconds": st.Lag.Seconds(),
		"runs_followed": st.RunsFollowed, "runs_polled": st.RunsPolled, "events_written": st.EventsWritten, "errors": st.Errors}
	if !st.LastPoll.IsZero() {
		b["last_poll"] = st.LastPoll.UTC().Format(time.RFC3339Nano)
	}
	return b
}

var (
	followUpDesc = prometheus.NewDesc("oncetrace_follow_up",
		"1 while a followed target (serve --temporal) answered the last look, else 0.", []string{"feed", "target"}, nil)
	followLastPollDesc = prometheus.NewDesc("oncetrace_follow_last_poll_timestamp_seconds",
		"When the last successful look at a followed target started (Unix seconds; 0 before the first).", []string{"feed", "target"}, nil)
	followLagDesc = prometheus.NewDesc("oncetrace_follow_lag_seconds",
		"How long ago the last successful look at a followed target started: how far behind oncetrace may be.", []string{"feed", "target"}, nil)
	followRunsDesc = prometheus.NewDesc("oncetrace_follow_runs",
		"Open runs of a followed target, by how they are read: long_polled (up to the cap) or polled (over it, read at each pass).", []string{"feed", "target", "read"}, nil)
	followEventsDesc = prometheus.NewDesc("oncetrace_follow_events_total",
		"Events a follower handed to the writer (re-reads that stored nothing included).", []string{"feed", "target"}, nil)
	followErrorsDesc = prometheus.NewDesc("oncetrace_follow_errors_total",
		"Failed connections, list passes and history reads of a followed target.", []string{"feed", "target"}, nil)
)

// followCollector reads the followers' status at scrape time.
type followCollector struct{ status func() []FollowStatus }

func (fc followCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{followUpDesc, followLastPollDesc, followLagDesc, followRunsDesc, followEventsDesc, followErrorsDesc} {
		ch <- d
	}
}

func (fc followCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range fc.status() {
		up, last := 0.0, 0.0
		if st.State == "following" {
			up = 1
		}
		if !st.LastPoll.IsZero() {
			last = float64(st.LastPoll.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(followUpDesc, prometheus.GaugeValue, up, st.Feed, st.Target)
		ch <- prometheus.MustNewConstMetric(followLastPollDesc, prometheus.GaugeValue, last, st.Feed, st.Target)
		ch <- prometheus.MustNewConstMetric(followLagDesc, prometheus.GaugeValue, st.Lag.Seconds(), st.Feed, st.Target)
		ch <- prometheus.MustNewConstMetric(followRunsDesc, prometheus.GaugeValue, float64(st.RunsFollowed), st.Feed, st.Target, "long_polled")
		ch <- prometheus.MustNewConstMetric(followRunsDesc, prometheus.GaugeValue, float64(st.RunsPolled), st.Feed, st.Target, "polled")
		ch <- prometheus.MustNewConstMetric(followEventsDesc, prometheus.CounterValue, float64(st.EventsWritten), st.Feed, st.Target)
		ch <- prometheus.MustNewConstMetric(followErrorsDesc, prometheus.CounterValue, float64(st.Errors), st.Feed, st.Target)
	}
}
