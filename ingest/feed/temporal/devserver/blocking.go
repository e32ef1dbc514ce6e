package devserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Gate holds each Block activity of a BlockingWorker until the test
// releases the workflow that scheduled it: a test's way to hold a run open
// as long as it likes.
type Gate struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

func (g *Gate) ch(workflowID string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.chans == nil {
		g.chans = map[string]chan struct{}{}
	}
	if g.chans[workflowID] == nil {
		g.chans[workflowID] = make(chan struct{})
	}
	return g.chans[workflowID]
}

// Release lets the Block activity of the workflow return.
func (g *Gate) Release(workflowID string) { close(g.ch(workflowID)) }

func (g *Gate) block(ctx context.Context) (string, error) {
	select {
	case <-g.ch(activity.GetInfo(ctx).WorkflowExecution.ID):
		return "released", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// blockingWorkflow runs the Block activity once, without retries.
func blockingWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var out string
	err := workflow.ExecuteActivity(ctx, "Block").Get(ctx, &out)
	return out, err
}

// BlockingWorker runs, until the test ends, a worker of one workflow type
// whose one activity, Block, waits for its Gate.
type BlockingWorker struct {
	Client     client.Client
	queue, typ string
}

// StartBlockingWorker starts a worker of workflowType on the task queue of
// the dev server at hostPort.
func StartBlockingWorker(t testing.TB, hostPort, workflowType, queue string, g *Gate) *BlockingWorker {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: hostPort, Logger: quietLog{}})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(blockingWorkflow, workflow.RegisterOptions{Name: workflowType})
	w.RegisterActivityWithOptions(g.block, activity.RegisterOptions{Name: "Block"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); c.Close() })
	return &BlockingWorker{Client: c, queue: queue, typ: workflowType}
}

// Start starts a workflow with the id and returns the execution id
// oncetrace gives its run, WORKFLOW_ID/RUN_ID.
func (b *BlockingWorker) Start(t testing.TB, id string) string {
	t.Helper()
	run, err := b.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: b.queue}, b.typ)
	if err != nil {
		t.Fatal(err)
	}
	return id + "/" + run.GetRunID()
}

type quietLog struct{}

func (quietLog) Debug(string, ...any) {}
func (quietLog) Info(string, ...any)  {}
func (quietLog) Warn(string, ...any)  {}
func (quietLog) Error(string, ...any) {}
