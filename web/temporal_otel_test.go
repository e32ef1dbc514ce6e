package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
)

// temporalRequest is one arrival of a Temporal run: an OTLP export of one
// process (its resource names the worker), or one email to the sandbox
// with the traceparent of the HTTP span that sent it.
type temporalRequest struct {
	name     string
	resource string // service.instance.id of the exporting process
	spans    []string
	mailFrom string // the HTTP span whose traceparent the email carries
	at       string // when the email was sent
}

func postTemporal(t *testing.T, srv *testServer, traceID string, r temporalRequest) {
	t.Helper()
	if r.mailFrom != "" {
		// The effect the sandbox records for an email (docs/sandbox.md §
		// "Trace context"), with a fixed message id and time so that every
		// order's reads can be compared byte for byte.
		effect := fmt.Sprintf(`{"type":"effect","id":"sandbox:%s","provider":"sandbox-mail","effect_id":"msg_%s",`+
			`"target":"jordan@acme.dev","at":%q,"trace_id":%q,"span_id":%q}`, r.mailFrom, r.mailFrom, r.at, traceID, r.mailFrom)
		srv.post(t, encodeBody([]json.RawMessage{json.RawMessage(effect)}, bodyJSON))
		return
	}
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.instance.id","value":{"stringValue":%q}}]},`+
		`"scopeSpans":[{"spans":[%s]}]}]}`, r.resource, strings.Join(r.spans, ","))
	resp, err := srv.ts.Client().Post(srv.ts.URL+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: POST /v1/traces: got %d, want 200", r.name, resp.StatusCode)
	}
}

// TestTemporalLostAttemptOrderFree: a Temporal worker killed mid-activity
// (the recorded crash run's shape) exports the HTTP span of its attempt
// and the workflow's StartActivity, never the RunActivity span between
// them; the client exports StartWorkflow, which names the workflow but not
// its run. Both name no execution of their own, only their trace: the
// store gives them to the one execution the trace's other spans name, the
// workflow run, whichever arrives first, so there is one execution, never
// one named after the trace, and both emails belong to it. Every order
// reads byte for byte the same.
func TestTemporalLostAttemptOrderFree(t *testing.T) {
	const traceID = "dc06847ca6725ee852c8c6b16a983286"
	const execution = "invoice-crash-1/01a2352b-6804-7f25-bfa4-94a673dbdfe4"
	const startWF, runWF, startAct, lostRun, lostPost, runAct, post = "d17c01cc734c7353", "db95fd056b68d851", "89b6a2e6a26bd3a1",
		"c5ef2fb9b689eaeb", "bdcb4ecc7488b2db", "cc2b79b17015b555", "92fe4e43d6efed33"
	const s = int64(1_796_188_366_850_000_000)
	const ms = int64(1_000_000)
	wf := map[string]string{"temporalWorkflowID": "invoice-crash-1", "temporalRunID": "01a2352b-6804-7f25-bfa4-94a673dbdfe4"}
	act := map[string]string{"temporalActivityID": "5"}
	for k, v := range wf {
		act[k] = v
	}
	postAttrs := map[string]string{"http.request.method": "POST", "url.full": "http://127.0.0.1:1/sandbox/mail/v1/send"}
	requests := []temporalRequest{
		{name: "email 1", mailFrom: lostPost, at: "2026-12-02T05:12:46.875Z"},
		{name: "killed worker's export", resource: "5139@vm@", spans: []string{
			otlpJSONSpan(traceID, startAct, runWF, "StartActivity:SendInvoiceEmail", 3, s+15*ms, s+15*ms, wf, ""),
			otlpJSONSpan(traceID, lostPost, lostRun, "HTTP POST", 3, s+22*ms, s+26*ms, postAttrs, "")}},
		{name: "client's export", resource: "4625@vm@", spans: []string{
			otlpJSONSpan(traceID, startWF, "", "StartWorkflow:InvoiceWorkflow", 3, s, s+7*ms, map[string]string{"temporalWorkflowID": "invoice-crash-1"}, "")}},
		{name: "email 2", mailFrom: post, at: "2026-12-02T05:12:53.781Z"},
		{name: "second worker's attempt", resource: "5506@vm@", spans: []string{
			otlpJSONSpan(traceID, post, runAct, "HTTP POST", 3, s+6927*ms, s+6932*ms, postAttrs, ""),
			otlpJSONSpan(traceID, runAct, startAct, "RunActivity:SendInvoiceEmail", 2, s+6920*ms, s+6932*ms, act, "")}},
		{name: "second worker's workflow", resource: "5506@vm@", spans: []string{
			otlpJSONSpan(traceID, runWF, startWF, "RunWorkflow:InvoiceWorkflow", 2, s+2*ms, s+7950*ms, wf, "")}},
	}
	reversed := make([]temporalRequest, len(requests))
	for i, r := range requests {
		reversed[len(requests)-1-i] = r
	}
	// Spans first, emails last; and the lost attempt's HTTP span before
	// anything names the run.
	spansFirst := []temporalRequest{requests[1], requests[2], requests[4], requests[5], requests[0], requests[3]}
	var want *snapshot
	for i, order := range [][]temporalRequest{requests, reversed, spansFirst} {
		srv := startServer(t, fmt.Sprintf("order %d", i), ingest.DefaultLimits)
		for _, r := range order {
			postTemporal(t, srv, traceID, r)
		}
		var list struct {
			Executions []struct {
				ID     string `json:"execution_id"`
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"executions"`
		}
		if err := json.Unmarshal(srv.get(t, "/api/v1/executions"), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Executions) != 1 || list.Executions[0].ID != execution || list.Executions[0].Name != "InvoiceWorkflow" ||
			list.Executions[0].Status != "completed" {
			t.Fatalf("order %d: executions: got %+v, want only %s, InvoiceWorkflow, completed", i, list.Executions, execution)
		}
		var x struct {
			Steps []struct {
				StepID   string `json:"step_id"`
				Tool     string `json:"tool"`
				Effect   string `json:"effect"`
				Attempts []struct {
					Attempt int    `json:"attempt"`
					SpanID  string `json:"span_id"`
					Worker  string `json:"worker"`
					Outcome string `json:"outcome"`
				} `json:"attempts"`
			} `json:"steps"`
			Effects []struct {
				TraceID string `json:"trace_id"`
				SpanID  string `json:"span_id"`
			} `json:"effects"`
		}
		if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+execution), &x); err != nil {
			t.Fatal(err)
		}
		// The killed worker's attempt is its HTTP call (trace.FillLostEngineAttempts):
		// lost, before the second worker's.
		if len(x.Steps) != 1 || x.Steps[0].StepID != "5" || x.Steps[0].Tool != "SendInvoiceEmail" || x.Steps[0].Effect != "unknown" ||
			len(x.Steps[0].Attempts) != 2 || x.Steps[0].Attempts[0].Outcome != "lost" ||
			x.Steps[0].Attempts[1].SpanID != runAct || x.Steps[0].Attempts[1].Worker != "vm:5506" || x.Steps[0].Attempts[1].Outcome != "ok" {
			t.Errorf("order %d: steps: got %+v, want step 5 of SendInvoiceEmail, class unknown, attempt 1 lost, attempt 2 the second worker's (vm:5506, ok)", i, x.Steps)
		}
		if len(x.Effects) != 2 {
			t.Errorf("order %d: effects: got %+v, want both emails", i, x.Effects)
		}
		snap := orderSnapshot(t, srv, nil)
		if want == nil {
			want = snap
			continue
		}
		if diff := differingParts(snap, want); len(diff) > 0 {
			t.Errorf("order %d reads differently from order 0: %v", i, diff)
		}
	}
}
