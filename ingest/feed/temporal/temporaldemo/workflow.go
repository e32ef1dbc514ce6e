package temporaldemo

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Names as they appear in histories and spans.
const (
	WorkflowName = "InvoiceWorkflow"
	ActivityName = "SendInvoiceEmail"
)

// The scenarios, as Run and `oncetrace demo --temporal --scenario` name them.
const (
	// Naive: attempt 1's response is lost after delivery; the start-to-close
	// timeout fires, Temporal retries, attempt 2 sends again: two emails.
	Naive = "naive"
	// Crash: worker process A sends, then is killed while heartbeating;
	// worker process B takes attempt 2 after the heartbeat timeout and
	// sends again: two emails and a crash gap.
	Crash = "crash"
	// Keyed: as naive, but the activity derives an Idempotency-Key from the
	// workflow id, activity id and arguments; the sandbox answers attempt 2
	// from its key store: one email.
	Keyed = "keyed"
)

// Scenarios lists the scenarios in the order they run.
var Scenarios = []string{Naive, Crash, Keyed}

// ValidScenario reports whether name is one of Scenarios.
func ValidScenario(name string) bool { return slices.Contains(Scenarios, name) }

// CheckScenario returns an error naming the valid scenarios when name is
// not one of them.
func CheckScenario(name string) error {
	if ValidScenario(name) {
		return nil
	}
	return fmt.Errorf("unknown Temporal scenario %q; the scenarios are %s", name, strings.Join(Scenarios, ", "))
}

// Timeouts of the activity, short so that a scenario takes seconds. The
// retry policy is Temporal's default (initial interval 1 s, coefficient 2,
// unlimited attempts): the point is what the default does.
const (
	// StartToClose bounds one attempt in naive and keyed: the lost response
	// holds the request until it fires.
	StartToClose = 3 * time.Second
	// CrashStartToClose is the crash scenario's, long enough that the
	// heartbeat timeout, not it, ends the killed attempt.
	CrashStartToClose = 30 * time.Second
	// HeartbeatTimeout ends the killed worker's attempt in the crash
	// scenario. Only there: an activity that never heartbeats would time
	// out by it.
	HeartbeatTimeout = 2 * time.Second
)

// Invoice is SendInvoiceEmail's argument, the sandbox's request body.
type Invoice struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// DefaultInvoice is the article's email.
var DefaultInvoice = Invoice{To: "jordan@acme.dev", Subject: "Your June invoice", Body: "Invoice INV-0612 is attached."}

// InvoiceRequest is InvoiceWorkflow's input.
type InvoiceRequest struct {
	Invoice  Invoice `json:"invoice"`
	Scenario string  `json:"scenario"`
}

// Sent is SendInvoiceEmail's result: the mail API's answer.
type Sent struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Deduplicated   bool   `json:"deduplicated"`
}

// InvoiceWorkflow sends the invoice email once, as far as the workflow can
// tell: one activity, retried by Temporal as its policy says.
func InvoiceWorkflow(ctx workflow.Context, req InvoiceRequest) (Sent, error) {
	opts := workflow.ActivityOptions{StartToCloseTimeout: StartToClose}
	if req.Scenario == Crash {
		opts.StartToCloseTimeout, opts.HeartbeatTimeout = CrashStartToClose, HeartbeatTimeout
	}
	ctx = workflow.WithActivityOptions(ctx, opts)
	var sent Sent
	err := workflow.ExecuteActivity(ctx, ActivityName, req.Invoice).Get(ctx, &sent)
	return sent, err
}
