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

// check verifies that dir holds a complete recording of res and returns
// its manifest.
func check(dir string, res temporaldemo.Result, reqs []request, emails int) (manifest, error) {
	m := manifest{Framework: "temporal", Run: res.Scenario, Namespace: "default", WorkflowID: res.WorkflowID, RunID: res.RunID,
		ExecutionID: res.WorkflowID + "/" + res.RunID, TaskQueue: res.TaskQueue,
		WorkflowType: temporaldemo.WorkflowName, ActivityType: temporaldemo.ActivityName, TraceID: res.TraceID,
		Workers: res.Workers, KilledWorker: res.Killed, GeneratedAt: time.Now().UTC().Format(time.RFC3339)}
	m.Timeouts.StartToClose = temporaldemo.StartToClose.String()
	m.Timeouts.RetryPolicy = "Temporal's default (initial interval 1s, coefficient 2, unlimited attempts)"
	m.ExpectedEmails = 2
	wantTimeout := "TIMEOUT_TYPE_START_TO_CLOSE"
	switch res.Scenario {
	case temporaldemo.Keyed:
		m.ExpectedEmails = 1
	case temporaldemo.Crash:
		m.Timeouts.StartToClose = temporaldemo.CrashStartToClose.String()
		m.Timeouts.Heartbeat = temporaldemo.HeartbeatTimeout.String()
		wantTimeout = "TIMEOUT_TYPE_HEARTBEAT"
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// The history, as the CLI printed it.
	raw, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil {
		return m, err
	}
	var h historyJSON
	if err := json.Unmarshal(raw, &h); err != nil {
		return m, fmt.Errorf("history.json: %w", err)
	}
	if n := len(h.Events); n == 0 || h.Events[n-1].EventType != "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED" {
		fail("history: got %d events, want the last one WORKFLOW_EXECUTION_COMPLETED", n)
	}
	scheduled, started := 0, 0
	for _, e := range h.Events {
		if s := e.Scheduled; s != nil {
			scheduled++
			m.ActivityID = s.ActivityID
			if s.ActivityType.Name != temporaldemo.ActivityName {
				fail("history: activity %q scheduled, want %s", s.ActivityType.Name, temporaldemo.ActivityName)
			}
			if _, ok := s.Header.Fields["_tracer-data"]; !ok {
				fail("history: ActivityTaskScheduled has no _tracer-data header (the tracing interceptor)")
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
		fail("history: %d ActivityTaskScheduled and %d ActivityTaskStarted, want one each", scheduled, started)
	}
	if m.Attempts != 2 || m.LastFailureTimeout != wantTimeout {
		fail("history: ActivityTaskStarted attempt %d with a %q lastFailure, want attempt 2 after %s", m.Attempts, m.LastFailureTimeout, wantTimeout)
	}
	if res.Scenario == temporaldemo.Crash {
		if len(res.Workers) != 2 || res.Killed != res.Workers[0] || m.FinalWorker != res.Workers[1] || m.FinalWorker == res.Killed {
			fail("history: attempt 2 started on %q, want the second worker of %q, not the killed %q", m.FinalWorker, res.Workers, res.Killed)
		}
	}

	// The mail requests.
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
		fail("mail: got %d requests, want 2 (one per attempt)", len(mails))
	} else {
		first, second := mails[0], mails[1]
		lost := res.Scenario != temporaldemo.Crash
		if got := first.Headers["x-oncetrace-fault"]; lost != (got == "lose-response") || lost != (first.Status == "aborted") {
			fail("mail: the first request has fault %q and status %v, want lose-response and aborted: %t", got, first.Status, lost)
		}
		if !lost && first.Status != 200 {
			fail("mail: the first request got %v, want 200 (delivered before the crash)", first.Status)
		}
		if second.Status != 200 {
			fail("mail: the second request got %v, want 200", second.Status)
		}
		k1, k2 := first.Headers["idempotency-key"], second.Headers["idempotency-key"]
		if (res.Scenario == temporaldemo.Keyed) != (k1 != "" && k1 == k2) || (res.Scenario != temporaldemo.Keyed && (k1 != "" || k2 != "")) {
			fail("mail: keys %q and %q, want one key on both only when keyed", k1, k2)
		}
		m.IdempotencyKey = k1
		if res.Scenario == temporaldemo.Keyed && (second.ResponseBody == nil || !strings.Contains(*second.ResponseBody, `"deduplicated":true`)) {
			fail("mail: the keyed retry was not answered from the key store")
		}
		for i, q := range mails {
			if id, _, ok := trace.ParseTraceparent(q.Headers["traceparent"]); !ok || id != res.TraceID {
				fail("mail %d: traceparent %q, want one of trace %s", i+1, q.Headers["traceparent"], res.TraceID)
			}
		}
	}
	if emails != m.ExpectedEmails {
		fail("sandbox: %d email(s) delivered in trace %s, want %d", emails, res.TraceID, m.ExpectedEmails)
	}
	if got := recordedEmails(mails); got != emails {
		fail("mail: the recorded requests delivered %d email(s), the sandbox's log says %d", got, emails)
	}

	// The spans.
	traces := map[string]bool{}
	names := map[string]bool{}
	for _, q := range reqs {
		if q.Kind != "otlp" {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, q.BodyFile))
		if err != nil {
			return m, err
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			fail("%s: %v", q.BodyFile, err)
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
	wantRunActivity := 2
	if res.Scenario == temporaldemo.Crash {
		wantRunActivity = 1 // the killed worker never ends its span
	}
	if m.RunActivitySpans != wantRunActivity || m.HTTPSpans != 2 {
		fail("spans: %d RunActivity and %d HTTP client spans, want %d and 2", m.RunActivitySpans, m.HTTPSpans, wantRunActivity)
	}
	if len(traces) != 1 || !traces[res.TraceID] {
		fail("spans: traces %v, want only the workflow's %s", traces, res.TraceID)
	}
	m.Versions = versions()
	return m, errors.Join(errs...)
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
