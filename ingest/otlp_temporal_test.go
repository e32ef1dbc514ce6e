package ingest_test

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// temporalRun is a run's spans as Temporal's Go interceptor and otelhttp
// export them (the recorded fixtures' shapes): StartWorkflow (the
// client's, the root, with the workflow id only), RunWorkflow below it,
// StartActivity below that, a RunActivity per attempt below StartActivity,
// and the attempt's HTTP call below its RunActivity.
func temporalRun() []testSpan {
	wf := kv{"temporalWorkflowID": "invoice-1", "temporalRunID": "run-1"}
	act := with(wf, kv{"temporalActivityID": "5"})
	post := kv{"http.request.method": "POST", "url.full": "http://127.0.0.1:1/sandbox/mail/v1/send"}
	return []testSpan{
		{id: 1, name: "StartWorkflow:InvoiceWorkflow", kind: ptrace.SpanKindClient, start: 0, end: 5, attrs: kv{"temporalWorkflowID": "invoice-1"}},
		{id: 2, parent: 1, name: "RunWorkflow:InvoiceWorkflow", kind: ptrace.SpanKindServer, start: 2, end: 9000, attrs: wf},
		{id: 3, parent: 2, name: "StartActivity:SendInvoiceEmail", kind: ptrace.SpanKindClient, start: 10, end: 11, attrs: wf},
		{id: 4, parent: 3, name: "RunActivity:SendInvoiceEmail", kind: ptrace.SpanKindServer, start: 20, end: 3020,
			status: ptrace.StatusCodeError, message: `mail API: Post "http://127.0.0.1:1/sandbox/mail/v1/send": context deadline exceeded`, attrs: act},
		{id: 5, parent: 4, name: "HTTP POST", kind: ptrace.SpanKindClient, start: 25, end: 3020, status: ptrace.StatusCodeError,
			message: "context deadline exceeded", attrs: with(post, kv{"error.type": "context.deadlineExceededError"})},
		{id: 6, parent: 3, name: "RunActivity:SendInvoiceEmail", kind: ptrace.SpanKindServer, start: 4020, end: 4030, attrs: act},
		{id: 7, parent: 6, name: "HTTP POST", kind: ptrace.SpanKindClient, start: 4021, end: 4029,
			attrs: with(post, kv{"http.response.status_code": 200})},
	}
}

func TestMapOTLPTemporal(t *testing.T) {
	resource := kv{"service.instance.id": "4673@vm@", "host.name": "vm", "process.pid": 4673, "service.name": "invoice-worker"}
	events := mapSpans(t, resource, temporalRun()...)
	const execution = "invoice-1/run-1"

	// RunWorkflow is the execution, below the client's StartWorkflow.
	ev := events[otlpEventID(1, 2)]
	if x := ev.Execution; x == nil || x.ID != execution || x.Name != "InvoiceWorkflow" || x.Status != trace.StatusCompleted {
		t.Fatalf("RunWorkflow: got %+v, want the execution %s named InvoiceWorkflow, completed", ev, execution)
	}
	// StartWorkflow, the trace's root, is context; it names no run, so it
	// is its trace's until the store gives the trace to its one execution.
	if got := roleOf(events, 1); got != "context" {
		t.Errorf("StartWorkflow: got role %s, want context", got)
	}
	if got := spanOf(t, events, 1).ExecutionID; got != traceHex(1) {
		t.Errorf("StartWorkflow: got execution %q, want the trace id", got)
	}
	if sp := spanOf(t, events, 3); sp.Role != trace.RoleContext || sp.ExecutionID != execution {
		t.Errorf("StartActivity: got %s of %q, want context of %s", sp.Role, sp.ExecutionID, execution)
	}
	for _, tc := range []struct {
		span    byte
		start   int
		outcome trace.Outcome
	}{{4, 20, trace.OutcomeTimeout}, {6, 4020, trace.OutcomeOK}} {
		a := attemptOf(t, events, tc.span)
		if a.ExecutionID != execution || a.StepID != "5" || a.Tool != "SendInvoiceEmail" || a.Number != 0 ||
			a.Outcome != tc.outcome || a.Worker != "vm:4673" || a.Effect != trace.EffectUnknown || !a.StartedAt.Equal(ms(tc.start)) {
			t.Errorf("RunActivity %d: got %+v, want an unnumbered attempt of step 5 of %s, tool SendInvoiceEmail, %s, on vm:4673, class unknown",
				tc.span, a, execution, tc.outcome)
		}
	}
	for _, id := range []byte{5, 7} {
		if sp := spanOf(t, events, id); sp.Role != trace.RoleHTTP || sp.ExecutionID != execution {
			t.Errorf("HTTP span %d: got %s of %q, want http of %s", id, sp.Role, sp.ExecutionID, execution)
		}
	}
}

// A worker killed mid-activity exports the HTTP span of its attempt
// without the RunActivity above it: the span names no execution and falls
// back to its trace, which the store gives to the workflow's execution.
func TestMapOTLPTemporalLostAttempt(t *testing.T) {
	run := temporalRun()
	events := mapSpans(t, kv{"host.name": "vm", "process.pid": 5139}, run[2], run[4])
	if sp := spanOf(t, events, 5); sp.Role != trace.RoleHTTP || sp.ExecutionID != traceHex(1) || sp.ParentSpanID != spanHex(4) {
		t.Errorf("lost attempt's HTTP span: got %s of %q under %s, want http of the trace, under span 4", sp.Role, sp.ExecutionID, sp.ParentSpanID)
	}
	if sp := spanOf(t, events, 3); sp.ExecutionID != "invoice-1/run-1" {
		t.Errorf("StartActivity: got execution %q, want invoice-1/run-1", sp.ExecutionID)
	}
}

// A RunActivity span is an attempt even as a trace's root (a workflow
// started without tracing), and a RunWorkflow span the execution.
func TestMapOTLPTemporalRoots(t *testing.T) {
	run := temporalRun()
	lone := run[5]
	lone.parent = 0
	events := mapSpans(t, nil, lone)
	if a := attemptOf(t, events, 6); a.StepID != "5" || a.Tool != "SendInvoiceEmail" {
		t.Errorf("root RunActivity: got %+v, want an attempt of step 5", a)
	}
	root := run[1]
	root.parent = 0
	events = mapSpans(t, nil, root)
	if x := events[otlpEventID(1, 2)].Execution; x == nil || x.ID != "invoice-1/run-1" {
		t.Errorf("root RunWorkflow: got %+v, want the execution", events[otlpEventID(1, 2)])
	}
	// A signal from a traced client starts a trace of its own: context.
	sig := testSpan{id: 8, name: "SignalWorkflow:approve", kind: ptrace.SpanKindClient, attrs: kv{"temporalWorkflowID": "invoice-1"}}
	if got := roleOf(mapSpans(t, nil, sig), 8); got != "context" {
		t.Errorf("SignalWorkflow root: got role %s, want context", got)
	}
}

// TestMapOTLPTemporalTypeScript: the TypeScript SDK's interceptor names
// the ids temporalWorkflowId, run_id and temporalActivityId; its run maps
// as the Go SDK's does.
func TestMapOTLPTemporalTypeScript(t *testing.T) {
	ts := func(attrs kv) kv {
		out := kv{}
		for k, v := range attrs {
			switch k {
			case "temporalWorkflowID":
				k = "temporalWorkflowId"
			case "temporalRunID":
				k = "run_id"
			case "temporalActivityID":
				k = "temporalActivityId"
			}
			out[k] = v
		}
		return out
	}
	run := temporalRun()
	for i := range run {
		run[i].attrs = ts(run[i].attrs)
	}
	events := mapSpans(t, kv{"host.name": "vm", "process.pid": 4673}, run...)
	if x := events[otlpEventID(1, 2)].Execution; x == nil || x.ID != "invoice-1/run-1" || x.Name != "InvoiceWorkflow" {
		t.Fatalf("RunWorkflow: got %+v, want the execution invoice-1/run-1 named InvoiceWorkflow", x)
	}
	for _, id := range []byte{4, 6} {
		if a := attemptOf(t, events, id); a.ExecutionID != "invoice-1/run-1" || a.StepID != "5" || a.Tool != "SendInvoiceEmail" || a.RecognisedBy != "temporal" {
			t.Errorf("RunActivity %d: got %+v, want an attempt of step 5 of invoice-1/run-1, tool SendInvoiceEmail, recognised_by temporal", id, a)
		}
	}
	if got := roleOf(events, 3); got != "context" {
		t.Errorf("StartActivity: got role %s, want context", got)
	}
}
