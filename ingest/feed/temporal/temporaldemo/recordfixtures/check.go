package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal/devserver"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal/temporaldemo"
	"github.com/oncetrace/oncetrace/trace"
)

// manifest is manifest.json: what a recorded run is and what it must show.
type manifest struct {
	Framework      string `json:"framework"` // temporal
	Run            string `json:"run"`       // the scenario
	Namespace      string `json:"namespace"`
	WorkflowID     string `json:"workflow_id"`
	RunID          string `json:"run_id"`
	ExecutionID    string `json:"execution_id"` // WORKFLOW_ID/RUN_ID
	TaskQueue      string `json:"task_queue"`
	WorkflowType   string `json:"workflow_type"`
	ActivityType   string `json:"activity_type"`
	ActivityID     string `json:"activity_id"`
	TraceID        string `json:"trace_id"`
	ExpectedEmails int    `json:"expected_emails"`
	Attempts       int    `json:"attempts"`
	// LastFailureTimeout is the timeout type of the last attempt's
	// lastFailure in the history.
	LastFailureTimeout string   `json:"last_failure_timeout"`
	Workers            []string `json:"workers"`       // identities, in start order
	KilledWorker       string   `json:"killed_worker"` // crash only
	FinalWorker        string   `json:"final_worker"`  // ActivityTaskStarted.identity
	IdempotencyKey     string   `json:"idempotency_key,omitempty"`
	Timeouts           struct {
		StartToClose string `json:"start_to_close"`
		Heartbeat    string `json:"heartbeat,omitempty"`
		RetryPolicy  string `json:"retry_policy"`
		CrashGap     string `json:"crash_gap,omitempty"` // how long after the kill worker B started
	} `json:"timeouts"`
	RunActivitySpans int               `json:"run_activity_spans"`
	HTTPSpans        int               `json:"http_spans"`
	Spans            int               `json:"spans"`
	SpanNames        []string          `json:"span_names"`
	OTLPRequests     int               `json:"otlp_requests"`
	MailRequests     int               `json:"mail_requests"`
	Versions         map[string]string `json:"versions"`
	GeneratedAt      string            `json:"generated_at"`
}

func writeManifest(dir string, m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
}

// historyJSON is the part of `temporal workflow show --output json` the
// checks read.
type historyJSON struct {
	Events []struct {
		EventID   string `json:"eventId"`
		EventType string `json:"eventType"`
		Scheduled *struct {
			ActivityID   string                `json:"activityId"`
			ActivityType struct{ Name string } `json:"activityType"`
			Header       struct {
				Fields map[string]json.RawMessage `json:"fields"`
			} `json:"header"`
		} `json:"activityTaskScheduledEventAttributes"`
		Started *struct {
			Identity    string `json:"identity"`
			Attempt     int    `json:"attempt"`
			LastFailure *struct {
				TimeoutFailureInfo *struct {
					TimeoutType string `json:"timeoutType"`
				} `json:"timeoutFailureInfo"`
			} `json:"lastFailure"`
		} `json:"activityTaskStartedEventAttributes"`
	} `json:"events"`
}

// expected is what a scenario's recording must show.
type expected struct {
	emails int
	// lastFailure is the timeout type attempt 2's lastFailure names.
	lastFailure string
	// lost: attempt 1's mail request is delivered and its answer lost
	// (x-oncetrace-fault lose-response); otherwise it is answered and the
	// worker is killed after it.
	lost bool
	// keyed: both mail requests carry one Idempotency-Key, and the retry
	// is answered from the key store.
	keyed bool
	// runActivitySpans: a killed worker never ends its RunActivity span.
	runActivitySpans int
	// workers: the second attempt runs on another worker than the first.
	workers int
}

var expectations = map[string]expected{
	temporaldemo.Naive: {emails: 2, lastFailure: "TIMEOUT_TYPE_START_TO_CLOSE", lost: true, runActivitySpans: 2},
	temporaldemo.Crash: {emails: 2, lastFailure: "TIMEOUT_TYPE_HEARTBEAT", runActivitySpans: 1, workers: 2},
	temporaldemo.Keyed: {emails: 1, lastFailure: "TIMEOUT_TYPE_START_TO_CLOSE", lost: true, keyed: true, runActivitySpans: 2},
}

// check verifies that dir holds a complete recording of res and returns
// its manifest.
func check(dir string, res temporaldemo.Result, reqs []request, emails int) (manifest, error) {
	want, ok := expectations[res.Scenario]
	if !ok {
		return manifest{}, fmt.Errorf("no expectations for scenario %q", res.Scenario)
	}
	m := manifest{Framework: "temporal", Run: res.Scenario, Namespace: "default", WorkflowID: res.WorkflowID, RunID: res.RunID,
		ExecutionID: res.WorkflowID + "/" + res.RunID, TaskQueue: res.TaskQueue,
		WorkflowType: temporaldemo.WorkflowName, ActivityType: temporaldemo.ActivityName, TraceID: res.TraceID,
		Workers: res.Workers, KilledWorker: res.Killed, ExpectedEmails: want.emails, GeneratedAt: time.Now().UTC().Format(time.RFC3339)}
	m.Timeouts.StartToClose = temporaldemo.StartToClose.String()
	m.Timeouts.RetryPolicy = "Temporal's default (initial interval 1s, coefficient 2, unlimited attempts)"
	if res.Scenario == temporaldemo.Crash {
		m.Timeouts.StartToClose = temporaldemo.CrashStartToClose.String()
		m.Timeouts.Heartbeat = temporaldemo.HeartbeatTimeout.String()
	}
	var c checks
	if err := c.history(dir, res, want, &m); err != nil {
		return m, err
	}
	c.mail(res, want, reqs, emails, &m)
	if err := c.spans(dir, res, want, reqs, &m); err != nil {
		return m, err
	}
	m.Versions = versions()
	return m, errors.Join(c.errs...)
}

// checks collects what a recording got wrong, to say all of it at once.
type checks struct{ errs []error }

func (c *checks) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// history checks history.json as the CLI printed it: the workflow
// completed, one activity scheduled with the tracing interceptor's header
// and started once, as attempt 2 after the expected timeout.
func (c *checks) history(dir string, res temporaldemo.Result, want expected, m *manifest) error {
	raw, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil {
		return err
	}
	var h historyJSON
	if err := json.Unmarshal(raw, &h); err != nil {
		return fmt.Errorf("history.json: %w", err)
	}
	if n := len(h.Events); n == 0 || h.Events[n-1].EventType != "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED" {
		c.fail("history: got %d events, want the last one WORKFLOW_EXECUTION_COMPLETED", n)
	}
	scheduled, started := 0, 0
	for _, e := range h.Events {
		if s := e.Scheduled; s != nil {
			scheduled++
			m.ActivityID = s.ActivityID
			if s.ActivityType.Name != temporaldemo.ActivityName {
				c.fail("history: activity %q scheduled, want %s", s.ActivityType.Name, temporaldemo.ActivityName)
			}
			if _, ok := s.Header.Fields["_tracer-data"]; !ok {
				c.fail("history: ActivityTaskScheduled has no _tracer-data header (the tracing interceptor)")
			}
		}
		if s := e.Started; s != nil {
			started++
			m.Attempts, m.FinalWorker = s.Attempt, s.Identity
			if s.LastFailure != nil && s.LastFailure.TimeoutFailureInfo != nil {
				m.LastFailureTimeout = s.LastFailure.TimeoutFailureInfo.TimeoutType
			}
		}
	}
	if scheduled != 1 || started != 1 {
		c.fail("history: %d ActivityTaskScheduled and %d ActivityTaskStarted, want one each", scheduled, started)
	}
	if m.Attempts != 2 || m.LastFailureTimeout != want.lastFailure {
		c.fail("history: ActivityTaskStarted attempt %d with a %q lastFailure, want attempt 2 after %s", m.Attempts, m.LastFailureTimeout, want.lastFailure)
	}
	if want.workers == 2 && (len(res.Workers) != 2 || res.Killed != res.Workers[0] || m.FinalWorker != res.Workers[1] || m.FinalWorker == res.Killed) {
		c.fail("history: attempt 2 started on %q, want the second worker of %q, not the killed %q", m.FinalWorker, res.Workers, res.Killed)
	}
	return nil
}

// mail checks the two mail requests, one an attempt, against what the
// sandbox says it delivered.
func (c *checks) mail(res temporaldemo.Result, want expected, reqs []request, emails int, m *manifest) {
	var mails []request
	for _, q := range reqs {
		if q.Kind == "mail" {
			mails = append(mails, q)
		} else {
			m.OTLPRequests++
		}
	}
	m.MailRequests = len(mails)
	if len(mails) != 2 {
		c.fail("mail: got %d requests, want 2 (one per attempt)", len(mails))
	} else {
		first, second := mails[0], mails[1]
		if got := first.Headers["x-oncetrace-fault"]; want.lost != (got == "lose-response") || want.lost != (first.Status == "aborted") {
			c.fail("mail: the first request has fault %q and status %v, want lose-response and aborted: %t", got, first.Status, want.lost)
		}
		if !want.lost && first.Status != 200 {
			c.fail("mail: the first request got %v, want 200 (delivered before the crash)", first.Status)
		}
		if second.Status != 200 {
			c.fail("mail: the second request got %v, want 200", second.Status)
		}
		k1, k2 := first.Headers["idempotency-key"], second.Headers["idempotency-key"]
		if want.keyed != (k1 != "" && k1 == k2) || (!want.keyed && (k1 != "" || k2 != "")) {
			c.fail("mail: keys %q and %q, want one key on both only when keyed", k1, k2)
		}
		m.IdempotencyKey = k1
		if want.keyed && (second.ResponseBody == nil || !strings.Contains(*second.ResponseBody, `"deduplicated":true`)) {
			c.fail("mail: the keyed retry was not answered from the key store")
		}
		for i, q := range mails {
			if id, _, ok := trace.ParseTraceparent(q.Headers["traceparent"]); !ok || id != res.TraceID {
				c.fail("mail %d: traceparent %q, want one of trace %s", i+1, q.Headers["traceparent"], res.TraceID)
			}
		}
	}
	if emails != want.emails {
		c.fail("sandbox: %d email(s) delivered in trace %s, want %d", emails, res.TraceID, want.emails)
	}
	if got := recordedEmails(mails); got != emails {
		c.fail("mail: the recorded requests delivered %d email(s), the sandbox's log says %d", got, emails)
	}
}

// spans checks the recorded OTLP requests: the activity's RunActivity
// spans and the HTTP client spans under them, all in the workflow's trace.
func (c *checks) spans(dir string, res temporaldemo.Result, want expected, reqs []request, m *manifest) error {
	traces := map[string]bool{}
	names := map[string]bool{}
	for _, q := range reqs {
		if q.Kind != "otlp" {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, q.BodyFile))
		if err != nil {
			return err
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			c.fail("%s: %v", q.BodyFile, err)
			continue
		}
		for _, rs := range req.Traces().ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					m.Spans++
					traces[sp.TraceID().String()] = true
					names[sp.Name()] = true
					switch {
					case sp.Name() == "RunActivity:"+temporaldemo.ActivityName:
						m.RunActivitySpans++
					case ss.Scope().Name() == "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp":
						m.HTTPSpans++
					}
				}
			}
		}
	}
	for n := range names {
		m.SpanNames = append(m.SpanNames, n)
	}
	slices.Sort(m.SpanNames)
	if m.RunActivitySpans != want.runActivitySpans || m.HTTPSpans != 2 {
		c.fail("spans: %d RunActivity and %d HTTP client spans, want %d and 2", m.RunActivitySpans, m.HTTPSpans, want.runActivitySpans)
	}
	if len(traces) != 1 || !traces[res.TraceID] {
		c.fail("spans: traces %v, want only the workflow's %s", traces, res.TraceID)
	}
	return nil
}

// versions are the modules the workers ran with (this program is built
// from the same go.mod as the oncetrace binary that make fixtures builds).
func versions() map[string]string {
	v := map[string]string{"temporal_cli": devserver.CLIVersion, "temporal_server": "1.29.1", "go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "go.temporal.io/sdk", "go.temporal.io/sdk/contrib/opentelemetry", "go.temporal.io/api",
				"go.opentelemetry.io/otel", "go.opentelemetry.io/otel/sdk",
				"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
				"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp":
				v[d.Path] = d.Version
			}
		}
	}
	return v
}

// recordedEmails counts the emails the recorded mail requests delivered:
// every request the sandbox did not answer from its key store (a lost
// response was delivered first).
func recordedEmails(mails []request) int {
	n := 0
	for _, q := range mails {
		if q.Status == "aborted" || (q.ResponseBody != nil && strings.Contains(*q.ResponseBody, `"deduplicated":false`)) {
			n++
		}
	}
	return n
}

// readRecording reads a recorded run back: its manifest and requests.
func readRecording(dir string) (manifest, []request, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return m, nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, nil, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		return m, nil, err
	}
	var reqs []request
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var q request
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			return m, nil, fmt.Errorf("%s/requests.jsonl: %w", dir, err)
		}
		if f, ok := q.Status.(float64); ok {
			q.Status = int(f)
		}
		reqs = append(reqs, q)
	}
	return m, reqs, nil
}
