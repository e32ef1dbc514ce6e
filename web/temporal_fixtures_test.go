package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

// The Temporal fixtures under ingest/testdata/frameworks/temporal/<run>
// were recorded by `make fixtures` (gen/README.md § Temporal) from a
// Temporal dev server and Go workers with the SDK's OpenTelemetry
// interceptor: the run's history as `temporal workflow show --output json`
// printed it, the OTLP requests the workers and the starter exported, and
// the requests SendInvoiceEmail made to the sandbox mail API. naive loses
// the first answer (a start-to-close timeout, Temporal retries); crash
// kills the worker after the send (a heartbeat timeout, another worker
// retries); keyed loses the first answer but sends a key derived from the
// workflow, the activity and the arguments.

const temporalFixturesDir = frameworksDir + "/temporal"

type temporalFixture struct {
	name     string
	dir      string
	manifest struct {
		Namespace          string   `json:"namespace"`
		ExecutionID        string   `json:"execution_id"`
		WorkflowType       string   `json:"workflow_type"`
		ActivityType       string   `json:"activity_type"`
		ActivityID         string   `json:"activity_id"`
		ExpectedEmails     int      `json:"expected_emails"`
		Attempts           int      `json:"attempts"`
		LastFailureTimeout string   `json:"last_failure_timeout"`
		Workers            []string `json:"workers"`
		KilledWorker       string   `json:"killed_worker"`
		FinalWorker        string   `json:"final_worker"`
	}
	requests []fixtureRequest
	history  []trace.Event
}

func loadTemporalFixture(t *testing.T, name string) temporalFixture {
	t.Helper()
	r := temporalFixture{name: name, dir: filepath.Join(temporalFixturesDir, name)}
	data, err := os.ReadFile(filepath.Join(r.dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r.manifest); err != nil {
		t.Fatalf("%s: manifest: %v", name, err)
	}
	r.requests = readFixtureRequests(t, r.dir)
	f, err := os.Open(filepath.Join(r.dir, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := temporal.ReadHistoryJSON(f)
	if err != nil {
		t.Fatalf("%s: history: %v", name, err)
	}
	if r.history, err = temporal.MapHistory(h, temporal.MapOptions{Namespace: r.manifest.Namespace}); err != nil {
		t.Fatalf("%s: map history: %v", name, err)
	}
	return r
}

// post sends the parts of the run ("history", "otlp", "mail") in the order
// given, each as it would arrive: the history's events through the native
// API, the OTLP requests as recorded, the mail requests to the sandbox.
func (r temporalFixture) post(t *testing.T, srv *testServer, clock *atomic.Int64, parts ...string) {
	t.Helper()
	for _, part := range parts {
		switch part {
		case "history":
			var body bytes.Buffer
			for _, ev := range r.history {
				body.Write(ev.Body)
				body.WriteByte('\n')
			}
			resp, err := http.Post(srv.ts.URL+"/api/v1/events", "application/x-ndjson", &body)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.Contains(string(data), `"rejected":[{`) {
				t.Fatalf("%s: posting the history's events: got %d %s", r.name, resp.StatusCode, data)
			}
		default:
			for _, q := range r.requests {
				switch {
				case q.Kind != part:
				case part == "otlp":
					replayOTLP(t, srv, fixtureRun{dir: r.dir, manifest: fixtureManifest{Framework: "temporal", Run: r.name}}, q)
				case part == "mail":
					clock.Store(int64(q.AtMS * float64(time.Millisecond))) // the email stamped when it was sent
					replayMail(t, srv, fixtureRun{dir: r.dir, manifest: fixtureManifest{Framework: "temporal", Run: r.name}}, q)
				}
			}
		}
	}
}

// temporalExecution is what GET /api/v1/executions/{id} says of a run.
type temporalExecution struct {
	Execution struct {
		ID     string `json:"execution_id"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"execution"`
	Steps []struct {
		StepID   string `json:"step_id"`
		Tool     string `json:"tool"`
		Attempts []struct {
			Attempt   int    `json:"attempt"`
			Outcome   string `json:"outcome"`
			Worker    string `json:"worker"`
			StartedAt string `json:"started_at"`
			Error     string `json:"error"`
		} `json:"attempts"`
	} `json:"steps"`
	Effects []struct {
		EffectID string `json:"effect_id"`
	} `json:"effects"`
	Findings []trace.Finding `json:"findings"`
	Gaps     []struct {
		Seconds float64 `json:"seconds"`
		Kind    string  `json:"kind"`
	} `json:"gaps"`
}

// read is the run's execution as the API gives it, raw and decoded, and
// the ids of every execution the server holds.
func (r temporalFixture) read(t *testing.T, srv *testServer) ([]byte, temporalExecution, []string) {
	t.Helper()
	raw := getBody(t, srv.ts.URL+"/api/v1/executions/"+r.manifest.ExecutionID)
	var x temporalExecution
	if err := json.Unmarshal(raw, &x); err != nil {
		t.Fatalf("%s: %v: %s", r.name, err, raw)
	}
	var list struct {
		Executions []struct {
			ID string `json:"execution_id"`
		} `json:"executions"`
	}
	if err := json.Unmarshal(getBody(t, srv.ts.URL+"/api/v1/executions?limit=100"), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range list.Executions {
		ids = append(ids, e.ID)
	}
	return raw, x, ids
}

// runParts is the execution, steps and gaps of a read, as the API wrote
// them.
func runParts(t *testing.T, raw []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return string(m["execution"]) + "\n" + string(m["steps"]) + "\n" + string(m["gaps"])
}

func (x temporalExecution) rules() map[trace.Rule]bool {
	out := map[trace.Rule]bool{}
	for _, f := range x.Findings {
		if f.Severity == trace.SeverityCritical {
			out[f.Rule] = true
		}
	}
	return out
}

// startTemporalServer is a server that classes the activity as the
// scenario's user would (--tool-class SendInvoiceEmail=write), its
// sandbox's clock set by the replay.
func startTemporalServer(t *testing.T, name string) (*testServer, *atomic.Int64) {
	classes, err := ingest.ParseToolClasses("SendInvoiceEmail=write")
	if err != nil {
		t.Fatal(err)
	}
	return startServerWithSandboxClock(t, name, func(c *web.Config) { c.ToolClasses = classes })
}

// TestTemporalFixtures replays the recorded runs, history and traces in
// either order: one execution, one step, the attempts as Temporal and its
// workers tell them, the emails the mail API sent, and what the audit
// finds; the same bytes whichever came first.
func TestTemporalFixtures(t *testing.T) {
	for _, name := range []string{"naive", "crash", "keyed"} {
		t.Run(name, func(t *testing.T) {
			r := loadTemporalFixture(t, name)
			var reads [][]byte
			for _, order := range [][]string{{"mail", "history", "otlp"}, {"otlp", "mail", "history"}, {"history", "otlp", "mail"}} {
				srv, clock := startTemporalServer(t, name)
				r.post(t, srv, clock, order...)
				raw, x, ids := r.read(t, srv)
				reads = append(reads, raw)
				if len(ids) != 1 || ids[0] != r.manifest.ExecutionID || x.Execution.Name != r.manifest.WorkflowType || x.Execution.Status != "completed" {
					t.Fatalf("%v: got executions %q, %s %s, want only %s, %s completed", order, ids, x.Execution.Name, x.Execution.Status,
						r.manifest.ExecutionID, r.manifest.WorkflowType)
				}
				if len(x.Steps) != 1 || x.Steps[0].StepID != r.manifest.ActivityID || x.Steps[0].Tool != r.manifest.ActivityType ||
					len(x.Steps[0].Attempts) != r.manifest.Attempts {
					t.Fatalf("%v: got steps %+v, want one, %s (%s), with %d attempts", order, x.Steps, r.manifest.ActivityID, r.manifest.ActivityType, r.manifest.Attempts)
				}
				attempts := x.Steps[0].Attempts
				first, last := attempts[0], attempts[len(attempts)-1]
				if last.Outcome != "ok" || last.Worker != trace.NormaliseWorker(r.manifest.FinalWorker) || last.StartedAt == "" {
					t.Errorf("%v: last attempt: got %+v, want ok on %s", order, last, trace.NormaliseWorker(r.manifest.FinalWorker))
				}
				if len(x.Effects) != r.manifest.ExpectedEmails {
					t.Errorf("%v: got %d effects, want the %d emails sent", order, len(x.Effects), r.manifest.ExpectedEmails)
				}
				rules := x.rules()
				switch name {
				case "naive":
					if first.Outcome != "timeout" || first.Worker == "" || first.StartedAt == "" || !strings.Contains(first.Error, "start-to-close") {
						t.Errorf("%v: attempt 1: got %+v, want a start-to-close timeout with its worker and start", order, first)
					}
					if !rules[trace.RuleDuplicateEffect] {
						t.Errorf("%v: got critical findings %v, want duplicate_effect", order, rules)
					}
				case "crash":
					if first.Outcome != "lost" || first.StartedAt == "" || !strings.Contains(first.Error, "heartbeat") {
						t.Errorf("%v: attempt 1: got %+v, want lost, started, its heartbeat timeout its error", order, first)
					}
					if !rules[trace.RuleDuplicateEffect] || !rules[trace.RuleReexecutedAfterCrash] {
						t.Errorf("%v: got critical findings %v, want duplicate_effect and reexecuted_after_crash", order, rules)
					}
					if len(x.Gaps) != 1 || x.Gaps[0].Kind != "crash" || x.Gaps[0].Seconds < 5 {
						t.Errorf("%v: got gaps %+v, want one crash gap longer than the 5 s threshold", order, x.Gaps)
					}
				case "keyed":
					// Every attempt sent the key (its HTTP span recorded
					// the header), so there is nothing to warn of either.
					if len(x.Findings) != 0 {
						t.Errorf("%v: got findings %+v, want none", order, x.Findings)
					}
				}
			}
			// The execution, its steps and attempts and its gaps, byte for
			// byte (the emails' ids and times are the sandbox's of each
			// replay, so the rest is compared above by what it says).
			for i := 1; i < len(reads); i++ {
				if a, b := runParts(t, reads[i]), runParts(t, reads[0]); a != b {
					t.Errorf("order %d read differently from order 0:\n%s\n%s", i, a, b)
				}
			}
		})
	}
}

// TestTemporalFixtureHistoryAlone: from the history alone, the step has
// Temporal's count of attempts, the earlier one known by its failure only
// (no start, no worker), the last whole.
func TestTemporalFixtureHistoryAlone(t *testing.T) {
	for _, name := range []string{"naive", "crash"} {
		t.Run(name, func(t *testing.T) {
			r := loadTemporalFixture(t, name)
			srv, clock := startTemporalServer(t, name)
			r.post(t, srv, clock, "mail", "history")
			_, x, ids := r.read(t, srv)
			if len(ids) != 1 || len(x.Steps) != 1 || len(x.Steps[0].Attempts) != r.manifest.Attempts {
				t.Fatalf("got executions %q, steps %+v; want one with one step of %d attempts", ids, x.Steps, r.manifest.Attempts)
			}
			first := x.Steps[0].Attempts[0]
			kind := map[string]string{"TIMEOUT_TYPE_START_TO_CLOSE": "start-to-close", "TIMEOUT_TYPE_HEARTBEAT": "heartbeat"}[r.manifest.LastFailureTimeout]
			if first.StartedAt != "" || first.Worker != "" || !strings.Contains(first.Error, kind+" timeout") {
				t.Errorf("attempt 1: got %+v, want its %s timeout alone, no start, no worker", first, kind)
			}
		})
	}
}

// TestTemporalFixtureTracesAlone: from the spans alone, the attempts have
// their workers and times; in the crash run the killed worker's attempt is
// the HTTP call it made, lost, and the wait after it a crash gap.
func TestTemporalFixtureTracesAlone(t *testing.T) {
	for _, name := range []string{"naive", "crash"} {
		t.Run(name, func(t *testing.T) {
			r := loadTemporalFixture(t, name)
			srv, clock := startTemporalServer(t, name)
			r.post(t, srv, clock, "otlp", "mail")
			_, x, ids := r.read(t, srv)
			if len(ids) != 1 || len(x.Steps) != 1 || len(x.Steps[0].Attempts) != r.manifest.Attempts {
				t.Fatalf("got executions %q, steps %+v; want one with one step of %d attempts", ids, x.Steps, r.manifest.Attempts)
			}
			for _, a := range x.Steps[0].Attempts {
				if a.StartedAt == "" || (a.Worker == "" && a.Outcome != "lost") {
					t.Errorf("attempt %d: got %+v, want its start and worker", a.Attempt, a)
				}
			}
			if name == "crash" {
				if a := x.Steps[0].Attempts[0]; a.Outcome != "lost" {
					t.Errorf("attempt 1: got %s, want lost", a.Outcome)
				}
				if len(x.Gaps) != 1 || x.Gaps[0].Kind != "crash" || !x.rules()[trace.RuleReexecutedAfterCrash] {
					t.Errorf("got gaps %+v and critical findings %v, want a crash gap and reexecuted_after_crash", x.Gaps, x.rules())
				}
			}
		})
	}
}

// TestTemporalDocScreenshot writes docs/img/temporal-crash.png, the crash
// run (history and traces) as the page shows it, for docs/temporal.md. It
// runs only with -docshots:
//
//	go test ./web -run TestTemporalDocScreenshot -docshots -v
func TestTemporalDocScreenshot(t *testing.T) {
	if !*docShots {
		t.Skip("writes docs/img/temporal-crash.png: run with -docshots")
	}
	chromium := requireChromium(t)
	ctx := startBrowser(t, chromium)
	setColorScheme(t, ctx, "light")
	r := loadTemporalFixture(t, "crash")
	srv, clock := startTemporalServer(t, "crash")
	r.post(t, srv, clock, "history", "otlp", "mail")
	_, x, _ := r.read(t, srv)
	browserLoad(t, ctx, srv.ts.URL+views.ExecutionURL(r.manifest.ExecutionID))
	for sel, want := range map[string]int{
		`[data-testid=execution-header] [data-testid=audit-critical]`: 1,
		`[data-testid=lane]`:                             1,
		`[data-testid=incident]`:                         1,
		`[data-testid=outbox-lane] [data-testid=effect]`: 2,
	} {
		if got := browserEval[int](t, ctx, countSelector(sel)); got != want {
			t.Errorf("%s: got %d, want %d", sel, got, want)
		}
	}
	writeCroppedScreenshot(t, ctx, filepath.Join(docsImageDir, "temporal-crash.png"))
	t.Logf("crash run: %d attempts, gaps %+v, critical %v", len(x.Steps[0].Attempts), x.Gaps, x.rules())
}

// TestTemporalHistoryEventsOnTheTimeline: a history's signal and timer are
// drawn in the timeline's workflow events lane.
func TestTemporalHistoryEventsOnTheTimeline(t *testing.T) {
	f, err := os.Open("../ingest/feed/temporal/testdata/invoice.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := temporal.ReadHistoryJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	events, err := temporal.MapHistory(h, temporal.MapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startTemporalServer(t, "invoice")
	var body bytes.Buffer
	execution := ""
	for _, ev := range events {
		body.Write(ev.Body)
		body.WriteByte('\n')
		if ev.Type == trace.EventExecution && execution == "" {
			execution = ev.Execution.ID
		}
	}
	resp, err := http.Post(srv.ts.URL+"/api/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := string(getBody(t, srv.ts.URL+views.ExecutionURL(execution)))
	lane := strings.Index(page, `data-testid="events-lane"`)
	if lane < 0 {
		t.Fatalf("execution page of %s: got no workflow events lane", execution)
	}
	for _, want := range []string{"signal ", "timer "} {
		if !strings.Contains(page[lane:], want) {
			t.Errorf("workflow events lane: got no %q", want)
		}
	}
}
