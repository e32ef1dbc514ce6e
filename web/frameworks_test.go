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
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
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
		r := fixtureRun{dir: filepath.Dir(m)}
		data, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r.manifest); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		lines, err := os.ReadFile(filepath.Join(r.dir, "requests.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
			var q fixtureRequest
			if err := json.Unmarshal(line, &q); err != nil {
				t.Fatalf("%s: requests.jsonl: %v", r.dir, err)
			}
			r.requests = append(r.requests, q)
		}
		runs = append(runs, r)
	}
	frameworks := map[string]bool{}
	for _, r := range runs {
		frameworks[r.manifest.Framework] = true
	}
	for _, want := range []string{"vercel-ai", "openllmetry", "openinference", "openai-agents"} {
		if !frameworks[want] {
			t.Errorf("fixtures: no recording of %s under %s", want, frameworksDir)
		}
	}
	return runs
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
			srv := startServer(t, r.name(), ingest.DefaultLimits)
			for _, q := range r.requests {
				switch q.Kind {
				case "otlp":
					replayOTLP(t, srv, r, q)
				case "mail":
					replayMail(t, srv, r, q)
				default:
					t.Fatalf("request %d: unknown kind %q", q.Seq, q.Kind)
				}
			}
			id := r.traceID(t)
			var x frameworkExecution
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+id), &x); err != nil {
				t.Fatal(err)
			}
			checkFrameworkRun(t, r, x)

			// The list holds this one execution: no span became an
			// execution of its own.
			var list struct {
				Executions []struct {
					ID         string `json:"execution_id"`
					AuditState string `json:"audit_state"`
				} `json:"executions"`
			}
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions"), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Executions) != 1 || list.Executions[0].ID != id {
				t.Errorf("executions: got %+v, want only %s", list.Executions, id)
			} else if list.Executions[0].AuditState != x.Audit.State {
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
	if len(x.Steps) != 1 {
		var got []string
		for _, s := range x.Steps {
			got = append(got, s.StepID+" "+s.Tool)
		}
		t.Fatalf("steps: got %d %v, want one step of %s", len(x.Steps), got, m.Tool)
	}
	if x.Steps[0].Tool != m.Tool {
		t.Errorf("step tool: got %q, want %q", x.Steps[0].Tool, m.Tool)
	}
	if x.Steps[0].Effect != string(trace.EffectUnknown) {
		t.Errorf("step class: got %q, want unknown (nobody classified the tool)", x.Steps[0].Effect)
	}
	wantOutcomes := []string{"timeout", "ok"}
	if !m.ToolErrorSpanExported {
		wantOutcomes = []string{"ok"} // the failed call's span never arrives
	}
	if got := x.outcomes(0); !slices.Equal(got, wantOutcomes) {
		t.Errorf("attempts: got %v, want %v", got, wantOutcomes)
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
		if e.Provider == "sandbox-mail" && (e.TraceID != x.Execution.ID || e.SpanID == "") {
			t.Errorf("effect %s: trace context %q/%q, want the execution's trace and a span", e.EffectID, e.TraceID, e.SpanID)
		}
	}

	mail := x.mailEffects()
	critical := x.critical()
	switch m.Run {
	case "naive":
		if len(mail) != 2 {
			t.Errorf("mail effects: got %v, want two", mail)
		}
		if !m.ToolErrorSpanExported {
			// Both emails are in the execution's outbox; the one whose tool
			// span never arrived belongs to no step, and the audit says so
			// instead of calling the run clean.
			if x.Audit.State == string(trace.StateClean) {
				t.Errorf("audit state: clean, although an email belongs to no known step")
			}
			return
		}
		if len(critical) != 1 || critical[0].Rule != trace.RuleDuplicateEffect || len(critical[0].Effects) != 2 ||
			critical[0].StepID != x.Steps[0].StepID {
			t.Errorf("critical findings: got %+v, want one duplicate_effect on %s naming both emails", critical, x.Steps[0].StepID)
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
		// The key comes from the HTTP call below each tool span (the
		// instrumentation records the Idempotency-Key header); it also
		// joins an email whose tool span never arrived to its step.
		if x.Audit.State != string(trace.StateClean) {
			t.Errorf("audit state: got %q, want clean", x.Audit.State)
		}
		for _, a := range x.Steps[0].Attempts {
			if a.IdempotencyKey == "" {
				t.Errorf("attempt %d: no idempotency key, want the one its HTTP call sent", a.Attempt)
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
