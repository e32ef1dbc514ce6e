// Command capture records the workflow histories the temporal package's
// tests read: it runs small workflows against a Temporal dev server, with
// two workers of different identities and the OpenTelemetry tracing
// interceptor, and writes what `temporal workflow show --output json`
// prints for each run into the directory named by -out.
//
//	temporal server start-dev --ip 127.0.0.1 --headless --port 17233 ... &
//	go run . -address 127.0.0.1:17233 -cli /path/to/temporal -out ..
//
// It is its own module, so the Temporal SDK it needs is not a dependency
// of oncetrace's. The histories are committed; nothing runs it in tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const queue = "capture"

// Invoice is the workflows' input: JSON, so the mapping can show it.
type Invoice struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Amount  int    `json:"amount"`
}

// Activities holds one worker's activities; identity says which worker.
type Activities struct {
	identity string
	stop     func() // stops this worker, as a crash would
	once     *sync.Once
}

// SendInvoiceEmail outlives its start-to-close timeout in attempts 1 and
// 2, and answers in attempt 3: the history keeps attempt 3, with attempt
// 2's timeout as its last failure.
func (a *Activities) SendInvoiceEmail(ctx context.Context, in Invoice) (map[string]string, error) {
	if activity.GetInfo(ctx).Attempt < 3 {
		time.Sleep(1500 * time.Millisecond) // past the 1 s timeout, ignoring it as a lost response would
		return nil, errors.New("too late")
	}
	return map[string]string{"status": "sent", "message_id": "msg_" + in.To}, nil
}

// ChargeCard stops its worker in attempt 1 and hangs without a heartbeat:
// Temporal times the attempt out (heartbeat) and gives attempt 2 to the
// other worker.
func (a *Activities) ChargeCard(ctx context.Context, in Invoice) (string, error) {
	if activity.GetInfo(ctx).Attempt == 1 {
		a.once.Do(func() { go a.stop() })
		time.Sleep(3 * time.Second)
		return "charged by a stopped worker", nil
	}
	return "ch_" + a.identity, nil
}

// Refund fails: retryably in attempt 1, for good in attempt 2.
func (a *Activities) Refund(ctx context.Context, in Invoice) (string, error) {
	if activity.GetInfo(ctx).Attempt == 1 {
		return "", errors.New("gateway answered 502")
	}
	return "", temporal.NewNonRetryableApplicationError("card declined", "Declined", nil)
}

// SlowExport and SlowSync block until the workflow is terminated.
func (a *Activities) SlowExport(ctx context.Context, in Invoice) error {
	<-ctx.Done()
	return ctx.Err()
}

func (a *Activities) SlowSync(ctx context.Context, in Invoice) error {
	<-ctx.Done()
	return ctx.Err()
}

// LookupCustomer runs as a local activity.
func LookupCustomer(ctx context.Context, email string) (string, error) {
	return "cus_" + email, nil
}

// InvoiceWorkflow waits for an approval signal, sleeps on a timer, looks
// the customer up locally, sends the invoice (retried after timeouts),
// runs a child workflow and charges the card (retried after a heartbeat
// timeout on another worker).
func InvoiceWorkflow(ctx workflow.Context, in Invoice) (string, error) {
	var approver string
	workflow.GetSignalChannel(ctx, "approve").Receive(ctx, &approver)
	if err := workflow.Sleep(ctx, 100*time.Millisecond); err != nil {
		return "", err
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second})
	var customer string
	if err := workflow.ExecuteLocalActivity(lctx, LookupCustomer, in.To).Get(ctx, &customer); err != nil {
		return "", err
	}
	var a *Activities
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "send-invoice",
		StartToCloseTimeout: time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1},
	})
	var sent map[string]string
	if err := workflow.ExecuteActivity(sctx, a.SendInvoiceEmail, in).Get(ctx, &sent); err != nil {
		return "", err
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "-receipt"})
	var receipt string
	if err := workflow.ExecuteChildWorkflow(cctx, ReceiptWorkflow, in).Get(ctx, &receipt); err != nil {
		return "", err
	}
	hctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "charge-card",
		StartToCloseTimeout: 10 * time.Second,
		HeartbeatTimeout:    time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 5},
	})
	var charge string
	if err := workflow.ExecuteActivity(hctx, a.ChargeCard, in).Get(ctx, &charge); err != nil {
		return "", err
	}
	return approver + " " + customer + " " + sent["message_id"] + " " + receipt + " " + charge, nil
}

// ReceiptWorkflow is InvoiceWorkflow's child.
func ReceiptWorkflow(ctx workflow.Context, in Invoice) (string, error) {
	return "receipt for " + in.To, nil
}

// RefundWorkflow fails: its activity's second attempt is declined.
func RefundWorkflow(ctx workflow.Context, in Invoice) (string, error) {
	var a *Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID:          "refund",
		StartToCloseTimeout: 5 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 3},
	})
	var out string
	err := workflow.ExecuteActivity(actx, a.Refund, in).Get(ctx, &out)
	return out, err
}

// ExportWorkflow is still running when its history is read: one activity
// without retries, one with, both blocked.
func ExportWorkflow(ctx workflow.Context, in Invoice) error {
	var a *Activities
	once := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ActivityID: "export", StartToCloseTimeout: time.Hour, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	retried := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{ActivityID: "sync", StartToCloseTimeout: time.Hour})
	f1 := workflow.ExecuteActivity(once, a.SlowExport, in)
	f2 := workflow.ExecuteActivity(retried, a.SlowSync, in)
	if err := f1.Get(ctx, nil); err != nil {
		return err
	}
	return f2.Get(ctx, nil)
}

func main() {
	address := flag.String("address", "127.0.0.1:7233", "the dev server's frontend")
	cli := flag.String("cli", "temporal", "the temporal CLI")
	out := flag.String("out", ".", "where the histories go")
	flag.Parse()
	log.SetFlags(0)

	otel.SetTracerProvider(sdktrace.NewTracerProvider())
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: *address, Interceptors: []interceptor.ClientInterceptor{tracing}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var once sync.Once
	for _, id := range []string{"4121@host-a@", "5678@host-b@"} {
		w := worker.New(c, queue, worker.Options{Identity: id})
		acts := &Activities{identity: id, stop: w.Stop, once: &once}
		w.RegisterActivity(acts)
		w.RegisterActivity(LookupCustomer)
		for _, wf := range []any{InvoiceWorkflow, ReceiptWorkflow, RefundWorkflow, ExportWorkflow} {
			w.RegisterWorkflow(wf)
		}
		if err := w.Start(); err != nil {
			log.Fatal(err)
		}
	}

	ctx := context.Background()
	in := Invoice{To: "jordan@acme.dev", Subject: "Your June invoice", Amount: 4200}
	suffix := time.Now().UTC().Format("150405")
	opts := func(id string) client.StartWorkflowOptions {
		return client.StartWorkflowOptions{ID: id + "-" + suffix, TaskQueue: queue}
	}

	invoice, err := c.SignalWithStartWorkflow(ctx, "invoice-"+suffix, "approve", "alex", opts("invoice"), InvoiceWorkflow, in)
	if err != nil {
		log.Fatal(err)
	}
	refund, err := c.ExecuteWorkflow(ctx, opts("refund"), RefundWorkflow, in)
	if err != nil {
		log.Fatal(err)
	}
	var s string
	if err := invoice.Get(ctx, &s); err != nil {
		log.Fatalf("invoice: %v", err)
	}
	log.Printf("invoice: %s", s)
	if err := refund.Get(ctx, &s); err == nil {
		log.Fatal("refund: want a failure")
	}
	// Started only now: ChargeCard has stopped one of the two workers, so
	// nothing cancels the export's activities before their history is read.
	export, err := c.ExecuteWorkflow(ctx, opts("export"), ExportWorkflow, in)
	if err != nil {
		log.Fatal(err)
	}
	show := func(name, id, run string) {
		cmd := exec.Command(*cli, "workflow", "show", "--address", *address, "-w", id, "-r", run, "--output", "json")
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Println("wrote", name, id, run)
	}
	show("invoice.json", invoice.GetID(), invoice.GetRunID())
	child, err := c.DescribeWorkflowExecution(ctx, invoice.GetID()+"-receipt", "")
	if err != nil {
		log.Fatal(err)
	}
	show("receipt.json", invoice.GetID()+"-receipt", child.WorkflowExecutionInfo.Execution.RunId)
	show("refund.json", refund.GetID(), refund.GetRunID())
	time.Sleep(2 * time.Second) // both export activities are running by now
	show("export.json", export.GetID(), export.GetRunID())
	if err := c.TerminateWorkflow(ctx, export.GetID(), export.GetRunID(), "captured"); err != nil {
		log.Fatal(err)
	}
	os.Exit(0) // the stopped worker's activity is still asleep; nothing to wait for
}
