package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// The fixtures under ingest/testdata/frameworks were recorded by `make
// fixtures` from small agents built on four real frameworks (the Vercel AI
// SDK, OpenLLMetry, OpenInference, the OpenAI Agents SDK with an OTel
// bridge): the OTLP requests each exported, as sent, and the requests its
// tool made to the sandbox mail API, with their headers. The tests replay
// them into a real server, so they run without Node, and `make fixtures`
// regenerates them before CI runs the same assertions on fresh recordings.

const frameworksDir = "../ingest/testdata/frameworks"

type fixtureManifest struct {
	Framework             string `json:"framework"`
	Run                   string `json:"run"`
	AgentName             string `json:"agent_name"`
	Tool                  string `json:"tool"`
	ToolErrorSpanExported bool   `json:"tool_error_span_exported"`
	// ToolErrorSpanStatus is the failed call's span status as exported:
	// UNSET when the framework exports it bare (ADK).
	ToolErrorSpanStatus string `json:"tool_error_span_status"`
	// HTTPUnderTool says, for each mail request, whether its HTTP span is
	// a child of a tool span; absent in older recordings, where it is.
	HTTPUnderTool []bool `json:"http_under_tool"`
}

// httpUnderTool reports whether every mail's HTTP span hangs below its
// tool span, so that trace context ties each email to its attempt.
func (m fixtureManifest) httpUnderTool() bool {
	return !slices.Contains(m.HTTPUnderTool, false)
}

type fixtureRequest struct {
	Seq             int               `json:"seq"`
	Kind            string            `json:"kind"` // otlp or mail
	AtMS            float64           `json:"at_ms"`
	ContentType     string            `json:"content_type"`
	ContentEncoding string            `json:"content_encoding"`
	BodyFile        string            `json:"body_file"`
	Method          string            `json:"method"`
	Path            string            `json:"path"`
	Headers         map[string]string `json:"headers"`
	Body            string            `json:"body"`
}

type fixtureRun struct {
	dir      string
	manifest fixtureManifest
	requests []fixtureRequest
}

func (r fixtureRun) name() string { return r.manifest.Framework + "/" + r.manifest.Run }

// traceID is the trace of the run's mail requests: the agent's execution.
func (r fixtureRun) traceID(t *testing.T) string {
	t.Helper()
	for _, q := range r.requests {
		if q.Kind == "mail" {
			if id, _, ok := trace.ParseTraceparent(q.Headers["traceparent"]); ok {
				return id
			}
		}
	}
	t.Fatalf("%s: no mail request carries a traceparent", r.name())
	return ""
}

func loadFixtureRuns(t *testing.T) []fixtureRun {
	t.Helper()
	manifests, err := filepath.Glob(filepath.Join(frameworksDir, "*", "*", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []fixtureRun
	for _, m := range manifests {
		if filepath.Base(filepath.Dir(filepath.Dir(m))) == "temporal" {
			continue // a workflow engine's runs, not an agent's: the Temporal tests replay them
		}
		r := fixtureRun{dir: filepath.Dir(m)}
		data, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r.manifest); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		r.requests = readFixtureRequests(t, r.dir)
		runs = append(runs, r)
	}
	frameworks := map[string]bool{}
	for _, r := range runs {
		frameworks[r.manifest.Framework] = true
	}
	for _, want := range []string{"vercel-ai", "openllmetry", "openinference", "openai-agents",
		"langgraph", "langgraph-root", "mastra-exporter", "mastra-bridge", "adk"} {
		if !frameworks[want] {
			t.Errorf("fixtures: no recording of %s under %s", want, frameworksDir)
		}
	}
	return runs
}

// readFixtureRequests reads a recording's requests.jsonl: what the run
// sent, in order.
func readFixtureRequests(t *testing.T, dir string) []fixtureRequest {
	t.Helper()
	lines, err := os.ReadFile(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []fixtureRequest
	for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var q fixtureRequest
		if err := json.Unmarshal(line, &q); err != nil {
			t.Fatalf("%s: requests.jsonl: %v", dir, err)
		}
		out = append(out, q)
	}
	return out
}

// replayOTLP posts one recorded export request as it was sent.
func replayOTLP(t *testing.T, srv *testServer, r fixtureRun, q fixtureRequest) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.dir, q.BodyFile))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.ts.URL+"/v1/traces", bytes.NewReader(data))
	req.Header.Set("Content-Type", q.ContentType)
	if q.ContentEncoding != "" {
		req.Header.Set("Content-Encoding", q.ContentEncoding)
	}
	resp, err := srv.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: replaying %s: got %d, want 200: %s", r.name(), q.BodyFile, resp.StatusCode, body)
	}
}

// replayMail sends one recorded mail request, with its headers, to the
// server's sandbox. A lost response is asked for as an immediate 504, which
// delivers the same way without holding the test for the client's timeout.
func replayMail(t *testing.T, srv *testServer, r fixtureRun, q fixtureRequest) {
	t.Helper()
	req, _ := http.NewRequest(q.Method, srv.ts.URL+q.Path, strings.NewReader(q.Body))
	for k, v := range q.Headers {
		switch strings.ToLower(k) {
		case "host", "content-length", "connection", "transfer-encoding", "accept-encoding":
			continue
		case "x-oncetrace-fault":
			if strings.HasPrefix(v, "lose-response") && !strings.Contains(v, "mode=504") {
				v += ";mode=504"
			}
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

type frameworkExecution struct {
	Execution struct {
		ID     string `json:"execution_id"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"execution"`
	Audit struct {
		State string `json:"state"`
	} `json:"audit"`
	Steps []struct {
		StepID   string `json:"step_id"`
		Tool     string `json:"tool"`
		Effect   string `json:"effect"`
		Attempts []struct {
			Attempt        int    `json:"attempt"`
			Outcome        string `json:"outcome"`
			SpanID         string `json:"span_id"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"attempts"`
	} `json:"steps"`
	ModelCalls []trace.Span `json:"model_calls"`
	Effects    []struct {
		Provider string `json:"provider"`
		EffectID string `json:"effect_id"`
		TraceID  string `json:"trace_id"`
		SpanID   string `json:"span_id"`
	} `json:"effects"`
	Findings []trace.Finding `json:"findings"`
}

func (x frameworkExecution) outcomes(step int) []string {
	var out []string
	for _, a := range x.Steps[step].Attempts {
		out = append(out, a.Outcome)
	}
	return out
}

func (x frameworkExecution) critical() []trace.Finding {
	var out []trace.Finding
	for _, f := range x.Findings {
		if f.Severity == trace.SeverityCritical {
			out = append(out, f)
		}
	}
	return out
}

func (x frameworkExecution) mailEffects() []string {
	var out []string
	for _, e := range x.Effects {
		if e.Provider == "sandbox-mail" {
			out = append(out, e.EffectID)
		}
	}
	return out
}

// TestFrameworkFixtures replays each framework's recorded runs and checks
// what the issue asks of them: the naive run (lost response, model retry,
// no key) shows one execution named after the agent, completed, one tool
// step with attempts timeout then ok, model calls outside the steps, two
// effects joined through trace context and a critical duplicate_effect; the
// keyed run one effect and nothing critical.
func TestFrameworkFixtures(t *testing.T) {
	for _, r := range loadFixtureRuns(t) {
		t.Run(r.name(), func(t *testing.T) {
			// The sandbox delivers each replayed email at the time it was
			// recorded, so that its effect sits where it happened among the
			// recorded spans (an effect of a stray trace joins the attempt
			// in flight at that moment).
			var recorded atomic.Int64
			srv := startServerOn(t, "sqlite", r.name(), ingest.DefaultLimits, func(c *web.Config) {
				c.Sandbox.Now = func() time.Time { return time.UnixMicro(recorded.Load()).UTC() }
			})
			for _, q := range r.requests {
				switch q.Kind {
				case "otlp":
					replayOTLP(t, srv, r, q)
				case "mail":
					recorded.Store(int64(q.AtMS * 1000))
					replayMail(t, srv, r, q)
				default:
					t.Fatalf("request %d: unknown kind %q", q.Seq, q.Kind)
				}
			}
			// The list holds one execution: no span became an execution of
			// its own, not even a lone HTTP root span of a framework that
			// lost the trace context (LangGraph without a root span of the
			// program's, Mastra's exporter).
			var list struct {
				Executions []struct {
					ID         string `json:"execution_id"`
					AuditState string `json:"audit_state"`
				} `json:"executions"`
			}
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions"), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Executions) != 1 {
				t.Fatalf("executions: got %+v, want one", list.Executions)
			}
			id := list.Executions[0].ID
			if r.manifest.httpUnderTool() && id != r.traceID(t) {
				t.Errorf("execution: got %s, want the mails' trace %s", id, r.traceID(t))
			}
			var x frameworkExecution
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+id), &x); err != nil {
				t.Fatal(err)
			}
			checkFrameworkRun(t, r, x)
			if list.Executions[0].AuditState != x.Audit.State {
				t.Errorf("list audit state: got %q, the execution says %q", list.Executions[0].AuditState, x.Audit.State)
			}
		})
	}
}

func checkFrameworkRun(t *testing.T, r fixtureRun, x frameworkExecution) {
	t.Helper()
	m := r.manifest
	if x.Execution.Name != m.AgentName {
		t.Errorf("name: got %q, want the agent's %q", x.Execution.Name, m.AgentName)
	}
	if x.Execution.Status != "completed" {
		t.Errorf("status: got %q, want completed", x.Execution.Status)
	}
	if len(x.Steps) == 0 {
		t.Fatalf("steps: got none, want %s's", m.Tool)
	}
	for _, st := range x.Steps {
		if st.Tool != m.Tool {
			t.Errorf("step %s tool: got %q, want %q", st.StepID, st.Tool, m.Tool)
		}
		if st.Effect != string(trace.EffectUnknown) {
			t.Errorf("step %s class: got %q, want unknown (nobody classified the tool)", st.StepID, st.Effect)
		}
	}
	// One step of the tool with its two attempts, timeout then ok, when
	// both calls' spans carry their arguments; a failed call exported
	// bare (ADK) or never (OpenLLMetry) cannot be told to be the same
	// call, and is no second intent either.
	if m.ToolErrorSpanExported && m.ToolErrorSpanStatus != "UNSET" {
		if len(x.Steps) != 1 {
			t.Errorf("steps: got %d, want one step of %s", len(x.Steps), m.Tool)
		} else if got := x.outcomes(0); !slices.Equal(got, []string{"timeout", "ok"}) {
			t.Errorf("attempts: got %v, want [timeout ok]", got)
		}
	}
	if len(x.ModelCalls) < 2 {
		t.Errorf("model calls: got %d, want at least 2 (before and after each tool call)", len(x.ModelCalls))
	}
	for _, mc := range x.ModelCalls {
		if mc.Role != trace.RoleModel {
			t.Errorf("model call %s: role %q", mc.SpanID, mc.Role)
		}
	}
	for _, e := range x.Effects {
		if e.Provider == "sandbox-mail" && e.SpanID == "" {
			t.Errorf("effect %s: no span, want the trace context of its request", e.EffectID)
		}
	}

	mail := x.mailEffects()
	critical := x.critical()
	switch m.Run {
	case "naive":
		if len(mail) != 2 {
			t.Errorf("mail effects: got %v, want two", mail)
		}
		// Whatever the framework exports, the two identical emails of one
		// run are a critical duplicate_effect naming both, on the step when
		// trace context ties them to it, else proven by the outbox.
		dup := 0
		for _, f := range critical {
			if f.Rule == trace.RuleDuplicateEffect && len(f.Effects) == 2 {
				dup++
				if m.httpUnderTool() && m.ToolErrorSpanStatus != "UNSET" && m.ToolErrorSpanExported && f.StepID != x.Steps[0].StepID {
					t.Errorf("duplicate_effect on %q, want it on %s", f.StepID, x.Steps[0].StepID)
				}
			}
		}
		if dup != 1 {
			t.Errorf("critical findings: got %+v, want one duplicate_effect naming both emails", critical)
		}
		if x.Audit.State != string(trace.StateCritical) {
			t.Errorf("audit state: got %q, want critical", x.Audit.State)
		}
	case "keyed":
		if len(mail) != 1 {
			t.Errorf("mail effects: got %v, want one (the retry was answered from the key store)", mail)
		}
		if len(critical) != 0 {
			t.Errorf("critical findings: got %+v, want none", critical)
		}
		if !m.httpUnderTool() || !m.ToolErrorSpanExported {
			return // which step sent the email may be unknown: unverified, not clean
		}
		// The key comes from the HTTP call below each tool span (the
		// instrumentation records the Idempotency-Key header).
		if x.Audit.State != string(trace.StateClean) && m.ToolErrorSpanStatus != "UNSET" {
			t.Errorf("audit state: got %q, want clean", x.Audit.State)
		}
		for _, st := range x.Steps {
			for _, a := range st.Attempts {
				if a.IdempotencyKey == "" {
					t.Errorf("step %s attempt %d: no idempotency key, want the one its HTTP call sent", st.StepID, a.Attempt)
				}
			}
		}
	default:
		t.Errorf("manifest run %q: want naive or keyed", m.Run)
	}
}

// TestFrameworkEffectOrder: effects arriving before, between and after the
// spans give the same stored state, byte for byte through the API. The
// effects are the recorded mail requests turned into native effect events
// with fixed ids (the sandbox would give each replay new message ids).
func TestFrameworkEffectOrder(t *testing.T) {
	for _, r := range loadFixtureRuns(t) {
		if r.manifest.Run != "naive" {
			continue
		}
		t.Run(r.name(), func(t *testing.T) {
			effects := map[int][]byte{} // request seq -> its effect event
			for i, q := range r.requests {
				if q.Kind != "mail" {
					continue
				}
				traceID, spanID, ok := trace.ParseTraceparent(q.Headers["traceparent"])
				if !ok {
					t.Fatalf("mail request %d: no traceparent", q.Seq)
				}
				var msg struct {
					To string `json:"to"`
				}
				json.Unmarshal([]byte(q.Body), &msg)
				at := time.UnixMilli(int64(q.AtMS)).UTC().Format(time.RFC3339Nano)
				ev, _ := json.Marshal(map[string]any{"type": "effect", "id": fmt.Sprintf("fixture-%d", i), "provider": "sandbox-mail",
					"effect_id": fmt.Sprintf("msg_fixture_%d", i), "target": msg.To, "at": at, "trace_id": traceID, "span_id": spanID})
				effects[q.Seq] = ev
			}
			var snaps []*snapshot
			for _, order := range []string{"before", "between", "after"} {
				srv := startServer(t, order, ingest.DefaultLimits)
				postEffects := func(filter func(seq int) bool) {
					for _, q := range r.requests {
						if ev, ok := effects[q.Seq]; ok && filter(q.Seq) {
							srv.post(t, body{kind: "json", contentType: "application/json", data: ev})
						}
					}
				}
				if order == "before" {
					postEffects(func(int) bool { return true })
				}
				for _, q := range r.requests {
					switch {
					case q.Kind == "otlp":
						replayOTLP(t, srv, r, q)
					case order == "between":
						postEffects(func(seq int) bool { return seq == q.Seq })
					}
				}
				if order == "after" {
					postEffects(func(int) bool { return true })
				}
				snaps = append(snaps, srv.snapshot(t))
			}
			compareSnapshots(t, "effects before the spans", snaps[0], "effects between them", snaps[1])
			compareSnapshots(t, "effects after the spans", snaps[2], "effects between them", snaps[1])
		})
	}
}
