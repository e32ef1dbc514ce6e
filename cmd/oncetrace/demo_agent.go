package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The demo agent is a real two-step agent loop, as an instrumented agent
// would be: it calls send_invoice_email through the sandbox mail API, then
// record_in_crm, retrying each step up to three times with a per-attempt
// timeout, keeping a durable journal of step results, and sending an event
// to oncetrace for every attempt. Scenarios switch its safety mechanisms
// (idempotency key, journal) on and off and inject the article's failures.

const (
	demoSendStep = "step-1"
	demoCRMStep  = "step-2"
	demoAttempts = 3
)

// agent runs one execution, in this process.
type agent struct {
	server, token string
	execution     string
	scenario      string
	worker        string
	timeout       time.Duration
	useKey        bool
	// journal holds the execution's history: attempts started, always, and
	// step results when recordResults is on (the journal of the article).
	journal       *journal
	recordResults bool
	loseFirst     bool // the sandbox loses the response to the first send
	// crash, when set, kills this process at the named point: "after-send"
	// (the email went out, nothing recorded) or "after-record" (the send's
	// result is journaled, the CRM step not yet run).
	crash  string
	client *http.Client
	// mailURL is where send_invoice_email posts: the sandbox's send
	// endpoint, or a tap in front of it or of another mail API.
	// mailProvider is the provider its attempts name.
	mailURL, mailProvider string
}

func newAgent(server, token, execution, scenario string, timeout time.Duration) *agent {
	return &agent{server: strings.TrimRight(server, "/"), token: token, execution: execution, scenario: scenario,
		worker: fmt.Sprintf("pid-%d", os.Getpid()), timeout: timeout, client: &http.Client{},
		mailURL: strings.TrimRight(server, "/") + sandboxSendPath, mailProvider: "sandbox-mail"}
}

var invoiceArgs = map[string]any{"to": "jordan@acme.dev", "subject": "Your June invoice", "body": "Invoice INV-2026-06 for $1,240.00 is attached."}

// run executes the agent's two steps and marks the execution completed.
func (a *agent) run(ctx context.Context) error {
	if err := a.emit(ctx, map[string]any{"type": "execution", "id": "demo:" + a.execution + ":start", "execution_id": a.execution,
		"name": "billing-agent", "status": "running", "started_at": now(), "labels": map[string]string{"scenario": a.scenario}}); err != nil {
		return err
	}
	sent, err := a.step(ctx, demoSendStep, "send_invoice_email", a.mailProvider, invoiceArgs, a.sendInvoice)
	if err != nil {
		return a.fail(ctx, err)
	}
	if a.crash == "after-record" {
		die()
	}
	crmArgs := map[string]any{"invoice": "INV-2026-06", "message_id": sent["id"]}
	recordInCRM := func(ctx context.Context, _ string, _ int) toolResult { return a.recordInCRM(ctx, crmArgs) }
	if _, err := a.step(ctx, demoCRMStep, "record_in_crm", demoCRMProvider, crmArgs, recordInCRM); err != nil {
		return a.fail(ctx, err)
	}
	return a.emit(ctx, map[string]any{"type": "execution", "id": "demo:" + a.execution + ":end", "execution_id": a.execution,
		"status": "completed", "ended_at": now()})
}

func (a *agent) fail(ctx context.Context, cause error) error {
	_ = a.emit(ctx, map[string]any{"type": "execution", "id": "demo:" + a.execution + ":end", "execution_id": a.execution,
		"status": "failed", "ended_at": now()})
	return cause
}

// toolResult is what one call of a tool returned.
type toolResult struct {
	result       map[string]any
	outcome      string // ok, error, timeout
	err          error
	deduplicated bool
}

// step runs one step: from the journal when it holds the step's result (a
// replay, the tool not called), else by calling the tool up to three times.
func (a *agent) step(ctx context.Context, stepID, tool, provider string, args map[string]any,
	call func(ctx context.Context, key string, attempt int) toolResult) (map[string]any, error) {
	key := ""
	if a.useKey {
		key = idempotencyKey(a.execution, stepID, args)
	}
	base := map[string]any{"type": "attempt", "execution_id": a.execution, "step_id": stepID, "tool": tool,
		"effect": "write", "args": args, "worker": a.worker}
	if provider != "" {
		base["provider"] = provider
	}
	if key != "" {
		base["idempotency_key"] = key
	}
	if a.recordResults {
		if result, ok := a.journal.result(stepID); ok {
			n := a.journal.nextAttempt(stepID)
			if err := a.journal.noteAttempt(stepID, n); err != nil {
				return nil, err
			}
			t := now()
			ev := with(base, map[string]any{"id": eventID(a.execution, stepID, n, "replay"), "attempt": n,
				"started_at": t, "ended_at": t, "outcome": "replayed", "result": result})
			return result, a.emit(ctx, ev)
		}
	}
	var last toolResult
	for try := 0; try < demoAttempts; try++ {
		n := a.journal.nextAttempt(stepID)
		if err := a.journal.noteAttempt(stepID, n); err != nil {
			return nil, err
		}
		started := now()
		if err := a.emit(ctx, with(base, map[string]any{"id": eventID(a.execution, stepID, n, "start"), "attempt": n, "started_at": started})); err != nil {
			return nil, err
		}
		last = call(ctx, key, n)
		if a.crash == "after-send" && stepID == demoSendStep && last.outcome == "ok" {
			die() // the email went out; nothing of it is recorded anywhere
		}
		if last.outcome == "ok" && a.recordResults {
			// Record before advancing: the step is done when its result is
			// written down, not when the function returns.
			if err := a.journal.record(stepID, last.result); err != nil {
				return nil, err
			}
		}
		end := with(base, map[string]any{"id": eventID(a.execution, stepID, n, "end"), "attempt": n, "started_at": started,
			"ended_at": now(), "outcome": last.outcome})
		if last.result != nil {
			end["result"] = last.result
		}
		if last.err != nil {
			end["error"] = last.err.Error()
		}
		if last.deduplicated {
			end["deduplicated"] = true
		}
		if err := a.emit(ctx, end); err != nil {
			return nil, err
		}
		if last.outcome == "ok" {
			return last.result, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s: gave up after %d attempts: %v", stepID, demoAttempts, last.err)
}

// sandboxSendPath is the sandbox mail API's send endpoint.
const sandboxSendPath = "/sandbox/mail/v1/send"

// sendInvoice calls the mail API: the sandbox's, or a tap in front of it.
func (a *agent) sendInvoice(ctx context.Context, key string, attempt int) toolResult {
	body, _ := json.Marshal(invoiceArgs)
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.mailURL, bytes.NewReader(body))
	if err != nil {
		return toolResult{outcome: "error", err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Oncetrace-Execution", a.execution)
	req.Header.Set("X-Oncetrace-Step", demoSendStep)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if a.loseFirst && attempt == 1 {
		req.Header.Set("X-Oncetrace-Fault", "lose-response")
	}
	a.authorize(req)
	resp, err := a.client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return toolResult{outcome: "timeout", err: fmt.Errorf("no response after %s", a.timeout)}
		}
		return toolResult{outcome: "error", err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var result map[string]any
	_ = json.Unmarshal(raw, &result)
	if resp.StatusCode != http.StatusOK {
		return toolResult{outcome: "error", result: result, err: fmt.Errorf("mail API answered %s", resp.Status)}
	}
	dedup, _ := result["deduplicated"].(bool)
	// Stripe's contract says it in a header: the answer came from the key store.
	dedup = dedup || resp.Header.Get("Idempotent-Replayed") == "true"
	return toolResult{outcome: "ok", result: result, deduplicated: dedup}
}

// demoCRMProvider names the CRM's outbox.
const demoCRMProvider = "crm"

// recordInCRM writes the invoice's delivery into a local CRM record keyed
// by invoice, so recording twice leaves one record (an upsert). The CRM
// reports the write as an effect, as a real CRM's webhook would: the
// record's id and version, so an identical re-upsert reports the same
// effect and a write that changed the record a new one.
func (a *agent) recordInCRM(ctx context.Context, args map[string]any) toolResult {
	invoice, _ := args["invoice"].(string)
	messageID, _ := args["message_id"].(string)
	if err := a.journal.upsertCRM(invoice, messageID); err != nil {
		return toolResult{outcome: "error", err: err}
	}
	sum := sha256.Sum256([]byte(invoice + "\x00" + messageID))
	recordID := "crm_" + invoice + "_" + hex.EncodeToString(sum[:4])
	effect := map[string]any{"type": "effect", "id": "demo:" + a.execution + ":crm:" + recordID, "provider": demoCRMProvider,
		"effect_id": recordID, "execution_id": a.execution, "step_id": demoCRMStep, "target": invoice, "at": now()}
	if err := a.emit(ctx, effect); err != nil {
		return toolResult{outcome: "error", err: err}
	}
	return toolResult{outcome: "ok", result: map[string]any{"status": "recorded", "invoice": invoice, "message_id": messageID, "record": recordID}}
}

func (a *agent) authorize(req *http.Request) {
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
}

// emit sends one event to oncetrace and waits for it to be committed.
func (a *agent) emit(ctx context.Context, event map[string]any) error {
	body, _ := json.Marshal(event)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.server+"/api/v1/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	a.authorize(req)
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("demo: send event: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("demo: send event: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// idempotencyKey keys the intent, not the attempt: execution id, step id
// and canonical arguments, never time, randomness or an attempt counter.
func idempotencyKey(execution, step string, args map[string]any) string {
	canonical, _ := json.Marshal(args) // encoding/json sorts map keys
	sum := sha256.Sum256([]byte(execution + ":" + step + ":" + string(canonical)))
	return "ik_" + hex.EncodeToString(sum[:])[:16]
}

func eventID(execution, step string, attempt int, phase string) string {
	return fmt.Sprintf("demo:%s:%s:%d:%s", execution, step, attempt, phase)
}

func with(base, extra map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// die kills this process as a crash would: no deferred function runs,
// nothing is flushed, the parent sees exit status 137.
func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// journal is the agent's durable record of step results and of attempts
// started, a JSON file rewritten atomically (write, fsync, rename).
type journal struct {
	path string
	mu   sync.Mutex
	data journalData
}

type journalData struct {
	Results  map[string]map[string]any `json:"results"`
	Attempts map[string]int            `json:"attempts"`
	CRM      map[string]string         `json:"crm"`
}

func openJournal(path string) (*journal, error) {
	j := &journal{path: path, data: journalData{Results: map[string]map[string]any{}, Attempts: map[string]int{}, CRM: map[string]string{}}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := json.Unmarshal(raw, &j.data); err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	return j, nil
}

func (j *journal) result(step string) (map[string]any, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.data.Results[step]
	return r, ok
}

// nextAttempt is the number the step's next attempt gets.
func (j *journal) nextAttempt(step string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.data.Attempts[step] + 1
}

func (j *journal) noteAttempt(step string, n int) error {
	return j.update(func(d *journalData) { d.Attempts[step] = n })
}

func (j *journal) record(step string, result map[string]any) error {
	return j.update(func(d *journalData) { d.Results[step] = result })
}

func (j *journal) forget(step string) error {
	return j.update(func(d *journalData) { delete(d.Results, step) })
}

func (j *journal) upsertCRM(invoice, messageID string) error {
	return j.update(func(d *journalData) { d.CRM[invoice] = messageID })
}

func (j *journal) update(change func(*journalData)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	change(&j.data)
	raw, err := json.MarshalIndent(j.data, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(j.path), ".journal-*")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return os.Rename(tmp.Name(), j.path)
}
