package temporaldemo

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
)

// Config configures Run: one scenario against one cluster.
type Config struct {
	HostPort, Namespace string
	Scenario            string
	MailURL             string // the sandbox's send URL the workers POST to
	OTLPURL             string // where workers and the starter export spans
	Token               string // the oncetrace server's ingest token, if any
	// Worker returns the command of a worker process given its flags
	// (oncetrace's "temporal-worker" command takes them).
	Worker func(args ...string) *exec.Cmd
	// WorkflowID defaults to invoice-SCENARIO-RANDOM, the task queue to
	// oncetrace-demo-SCENARIO-RANDOM.
	WorkflowID, TaskQueue string
	// Gap is how long the crash scenario waits after killing worker A
	// before starting worker B (Temporal's own wait, the heartbeat timeout
	// and the retry interval, comes on top when longer).
	Gap time.Duration
	// Timeout bounds the run; 2 minutes when zero.
	Timeout time.Duration
	// Log receives progress lines and the workers' stderr.
	Log io.Writer
}

// Result is what Run saw.
type Result struct {
	Scenario, WorkflowID, RunID, TaskQueue string
	TraceID                                string   // the trace of the workflow's spans, from the activity's sends
	Workers                                []string // identities, in start order
	Killed                                 string   // crash: the killed worker's identity
	Sends                                  []WorkerEvent
	Sent                                   Sent // the workflow's result
}

// Run plays one scenario: it starts a worker process, starts the workflow
// (traced by the interceptor from a starter of its own), kills the worker
// after its send in the crash scenario and starts another, waits for the
// workflow to close, and stops the workers (SIGTERM, so that they flush
// their spans).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := CheckScenario(cfg.Scenario); err != nil {
		return Result{}, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	suffix := randomSuffix()
	if cfg.WorkflowID == "" {
		cfg.WorkflowID = "invoice-" + cfg.Scenario + "-" + suffix
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = "oncetrace-demo-" + cfg.Scenario + "-" + suffix
	}
	res := Result{Scenario: cfg.Scenario, WorkflowID: cfg.WorkflowID, TaskQueue: cfg.TaskQueue}
	var workers []*workerProc
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	start := func() (*workerProc, error) {
		w, err := startWorker(cfg)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
		ready, err := w.waitFor(ctx, func(ev WorkerEvent) bool { return ev.Event == "ready" })
		if err != nil {
			return nil, fmt.Errorf("temporaldemo: worker %d: %w", w.cmd.Process.Pid, err)
		}
		w.identity = ready.Identity
		res.Workers = append(res.Workers, ready.Identity)
		fmt.Fprintf(cfg.Log, "temporal %s: worker %s polls %s\n", cfg.Scenario, ready.Identity, cfg.TaskQueue)
		return w, nil
	}
	a, err := start()
	if err != nil {
		return res, err
	}

	tp, err := newTracerProvider(ctx, "invoice-starter", Identity(), cfg.OTLPURL, cfg.Token, nil)
	if err != nil {
		return res, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	c, err := dial(ctx, cfg.HostPort, cfg.Namespace, Identity(), tp, cfg.Log)
	if err != nil {
		return res, err
	}
	defer c.Close()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: cfg.WorkflowID, TaskQueue: cfg.TaskQueue, WorkflowExecutionTimeout: cfg.Timeout,
	}, WorkflowName, InvoiceRequest{Invoice: DefaultInvoice, Scenario: cfg.Scenario})
	if err != nil {
		return res, fmt.Errorf("temporaldemo: starting %s: %w", WorkflowName, err)
	}
	res.RunID = run.GetRunID()
	fmt.Fprintf(cfg.Log, "temporal %s: started workflow %s run %s\n", cfg.Scenario, res.WorkflowID, res.RunID)

	if cfg.Scenario == Crash {
		// The send answered, its HTTP span exported (the only trace of the
		// lost attempt: its RunActivity span never ends), and the activity
		// heartbeating: in whatever order the worker printed them.
		var sent WorkerEvent
		err := a.waitUntil(ctx, func(evs []WorkerEvent) bool {
			var exported, heartbeat bool
			for _, ev := range evs {
				switch {
				case ev.Event == "send" && ev.Status == http.StatusOK:
					sent = ev
				case ev.Event == "exported" && ev.HTTPSpans > 0:
					exported = true
				case ev.Event == "heartbeat":
					heartbeat = true
				}
			}
			return sent.Status == http.StatusOK && exported && heartbeat
		})
		if err != nil {
			return res, fmt.Errorf("temporaldemo: waiting for worker A to send, export the send's span and heartbeat: %w", err)
		}
		a.kill()
		res.Killed = a.identity
		fmt.Fprintf(cfg.Log, "temporal %s: worker %s sent %s and was killed (SIGKILL) during the activity\n", cfg.Scenario, a.identity, sent.MessageID)
		select {
		case <-time.After(cfg.Gap):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		if _, err := start(); err != nil {
			return res, err
		}
	}
	if err := run.Get(ctx, &res.Sent); err != nil {
		return res, fmt.Errorf("temporaldemo: workflow %s: %w", res.WorkflowID, err)
	}
	for _, w := range workers {
		w.stop()
	}
	for _, w := range workers {
		for _, ev := range w.eventsSoFar() {
			if ev.Event == "send" {
				res.Sends = append(res.Sends, ev)
				if res.TraceID == "" {
					res.TraceID = ev.TraceID
				}
			}
		}
	}
	fmt.Fprintf(cfg.Log, "temporal %s: workflow closed after %d send(s); the mail API answered %s (deduplicated: %t)\n",
		cfg.Scenario, len(res.Sends), res.Sent.ID, res.Sent.Deduplicated)
	return res, nil
}

// workerProc is a worker process and the events it printed.
type workerProc struct {
	cmd      *exec.Cmd
	identity string
	done     chan struct{} // closed when it has exited

	mu     sync.Mutex
	events []WorkerEvent
	seen   int           // events consumed by waitFor
	change chan struct{} // closed and replaced on each event
}

func startWorker(cfg Config) (*workerProc, error) {
	if cfg.Worker == nil {
		return nil, errors.New("temporaldemo: Config.Worker is required")
	}
	cmd := cfg.Worker("--address", cfg.HostPort, "--namespace", cfg.Namespace, "--task-queue", cfg.TaskQueue,
		"--scenario", cfg.Scenario, "--mail-url", cfg.MailURL, "--otlp-url", cfg.OTLPURL)
	if cfg.Token != "" {
		cmd.Env = append(cmd.Environ(), "ONCETRACE_INGEST_TOKEN="+cfg.Token)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cfg.Log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("temporaldemo: starting a worker: %w", err)
	}
	w := &workerProc{cmd: cmd, done: make(chan struct{}), change: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev WorkerEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event == "" {
				fmt.Fprintf(cfg.Log, "worker %d: %s\n", cmd.Process.Pid, sc.Bytes())
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			close(w.change)
			w.change = make(chan struct{})
			w.mu.Unlock()
		}
		cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// waitFor returns the first event after those already consumed that
// matches, consuming the events up to it.
func (w *workerProc) waitFor(ctx context.Context, match func(WorkerEvent) bool) (WorkerEvent, error) {
	for {
		w.mu.Lock()
		for w.seen < len(w.events) {
			ev := w.events[w.seen]
			w.seen++
			if match(ev) {
				w.mu.Unlock()
				return ev, nil
			}
		}
		change := w.change
		w.mu.Unlock()
		select {
		case <-change:
		case <-w.done:
			return WorkerEvent{}, fmt.Errorf("the worker exited (%v)", w.cmd.ProcessState)
		case <-ctx.Done():
			return WorkerEvent{}, ctx.Err()
		}
	}
}

// waitUntil waits until done holds for all the events printed so far.
func (w *workerProc) waitUntil(ctx context.Context, done func([]WorkerEvent) bool) error {
	for {
		w.mu.Lock()
		ok, change := done(w.events), w.change
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-change:
		case <-w.done:
			return fmt.Errorf("the worker exited (%v)", w.cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (w *workerProc) eventsSoFar() []WorkerEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WorkerEvent(nil), w.events...)
}

// kill ends the worker at once, by PID, as a crash would.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

// stop asks the worker to stop (SIGTERM: it stops polling and flushes its
// spans), then kills it after 15 s. It may be called more than once.
func (w *workerProc) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		w.kill()
	}
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// SandboxEmails counts the emails the sandbox of the oncetrace server at
// serverURL delivered for requests of the trace traceID, from its log
// (GET /sandbox/log; the newest 1000 requests).
func SandboxEmails(ctx context.Context, serverURL, token, traceID string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(serverURL, "/")+"/sandbox/log", nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("temporaldemo: sandbox log: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("temporaldemo: sandbox log: %s", resp.Status)
	}
	var log struct {
		Log []struct {
			Event   string `json:"event"`
			TraceID string `json:"trace_id"`
		} `json:"log"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		return 0, fmt.Errorf("temporaldemo: sandbox log: %w", err)
	}
	n := 0
	for _, l := range log.Log {
		if l.TraceID == traceID && strings.HasPrefix(l.Event, "delivered") {
			n++
		}
	}
	return n, nil
}
