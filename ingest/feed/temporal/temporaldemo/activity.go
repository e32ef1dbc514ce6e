package temporaldemo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
)

// SandboxSendPath is the sandbox mail API's send endpoint (docs/sandbox.md).
const SandboxSendPath = "/sandbox/mail/v1/send"

// Activities holds what SendInvoiceEmail needs from its worker.
type Activities struct {
	// MailURL is the sandbox's send URL (SERVER + SandboxSendPath).
	MailURL string
	// Token is the oncetrace server's ingest token, if it has one.
	Token string
	// Scenario decides the faults: lose the first response (naive,
	// keyed), key the sends (keyed), hang after the first send until the
	// worker is killed (crash).
	Scenario string
	// HTTP sends the request; its transport is otelhttp's, so the request
	// carries the activity span's traceparent.
	HTTP *http.Client
	// Report, when set, is told of each send (the worker prints it for
	// Run to follow).
	Report func(WorkerEvent)
}

// WorkerEvent is a line a worker prints on stdout, as JSON, for Run.
type WorkerEvent struct {
	Event     string `json:"event"` // ready, send, heartbeat, exported
	Identity  string `json:"identity,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Attempt   int32  `json:"attempt,omitempty"`
	Status    int    `json:"status,omitempty"` // the mail API's answer; 0 when none
	Error     string `json:"error,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Key       string `json:"idempotency_key,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
	// HTTPSpans counts the otelhttp client spans of an export.
	HTTPSpans int `json:"http_spans,omitempty"`
}

// IdempotencyKey is the keyed scenario's key: the same for every attempt
// of one activity of one workflow with the same arguments, and different
// for another workflow, activity or email. The run id is left out on
// purpose: a workflow reset or continue-as-new keeps the workflow id, and
// the intent is the same email.
func IdempotencyKey(workflowID, activityID string, inv Invoice) string {
	args, _ := json.Marshal(inv) // fixed field order: a canonical form
	sum := sha256.Sum256([]byte(workflowID + "\n" + activityID + "\n" + string(args)))
	return "ik_" + hex.EncodeToString(sum[:16])
}

// SendInvoiceEmail POSTs the invoice to the sandbox mail API.
func (a *Activities) SendInvoiceEmail(ctx context.Context, inv Invoice) (Sent, error) {
	info := activity.GetInfo(ctx)
	body, err := json.Marshal(inv)
	if err != nil {
		return Sent{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.MailURL, bytes.NewReader(body))
	if err != nil {
		return Sent{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	ev := WorkerEvent{Event: "send", Attempt: info.Attempt, TraceID: trace.SpanContextFromContext(ctx).TraceID().String()}
	if a.Scenario == Keyed {
		ev.Key = IdempotencyKey(info.WorkflowExecution.ID, info.ActivityID, inv)
		req.Header.Set("Idempotency-Key", ev.Key)
	}
	if info.Attempt == 1 && (a.Scenario == Naive || a.Scenario == Keyed) {
		// The sandbox delivers, then never answers: the start-to-close
		// timeout ends the attempt.
		req.Header.Set("X-Oncetrace-Fault", "lose-response")
	}
	sent, err := a.post(req)
	ev.Status, ev.MessageID = sent.status, sent.ID
	if err != nil {
		ev.Error = err.Error()
	}
	a.report(ev)
	if err != nil {
		return Sent{}, err
	}
	if a.Scenario == Crash && info.Attempt == 1 {
		// The email is out; the worker dies before it can say so. Heartbeat
		// until it is killed, so that the heartbeat timeout, not the
		// start-to-close timeout, tells Temporal.
		for {
			activity.RecordHeartbeat(ctx, "sent; not yet recorded")
			a.report(WorkerEvent{Event: "heartbeat", Attempt: info.Attempt})
			select {
			case <-ctx.Done():
				return Sent{}, ctx.Err()
			case <-time.After(HeartbeatTimeout / 4):
			}
		}
	}
	return sent.Sent, nil
}

type mailAnswer struct {
	Sent
	status int
}

func (a *Activities) post(req *http.Request) (mailAnswer, error) {
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return mailAnswer{}, fmt.Errorf("mail API: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	ans := mailAnswer{status: resp.StatusCode}
	if err != nil {
		return ans, fmt.Errorf("mail API: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("mail API: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &ans.Sent); err != nil {
		return ans, fmt.Errorf("mail API: %w", err)
	}
	return ans, nil
}

func (a *Activities) report(ev WorkerEvent) {
	if a.Report != nil {
		a.Report(ev)
	}
}
