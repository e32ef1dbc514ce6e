package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/trace"
)

// Mapper turns a run's history (the whole of it so far) into events. A
// longer prefix of the same history must give a superset of the events,
// with the same ids for the ones they share: the follower writes only the
// ids it has not written yet. serve's is package temporal's MapHistory.
type Mapper func(h *historypb.History, run Run) ([]trace.Event, error)

// Run names the run a history is of: a history names its workflow but not
// always which of its runs (a reset gives it a new one), so the follower,
// which listed it, says.
type Run struct{ Namespace, WorkflowID, RunID string }

// Writer commits events; *writer.Writer is one.
type Writer interface {
	Write(ctx context.Context, events []trace.Event) (writer.Result, error)
}

// Defaults of Config.
const (
	DefaultLookback     = 24 * time.Hour
	DefaultPollInterval = 2 * time.Second
	DefaultMaxRuns      = 200
)

// Tuning that is not configuration.
const (
	// visibilityMargin is how far before the last pass a closed run is
	// listed again: the visibility store may show a close a little late.
	visibilityMargin = time.Minute
	dialTimeout      = 10 * time.Second
	callTimeout      = 30 * time.Second
	// longPollTimeout bounds a history long poll; the server answers an
	// idle one after about 20 s with the same token.
	longPollTimeout = 70 * time.Second
	backoffFirst    = time.Second
	backoffMax      = 30 * time.Second
	listPageSize    = 500
	historyPageSize = 1000
	// writeChunk bounds the events of one write, under the writer's and
	// the API's per-request limits.
	writeChunk = 1000
)

// Config configures a Follower.
type Config struct {
	Target Target
	Map    Mapper
	Writer Writer
	// Lookback is how far back the first pass lists closed runs.
	Lookback time.Duration
	// PollInterval is the time between list passes.
	PollInterval time.Duration
	// MaxRuns is how many runs are long-polled at once, each holding its
	// history in memory; the others are read whole at each pass when their
	// history grew.
	MaxRuns int
	Logger  *slog.Logger
	Now     func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Lookback <= 0 {
		c.Lookback = DefaultLookback
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxRuns <= 0 {
		c.MaxRuns = DefaultMaxRuns
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// States of a follower.
const (
	StateConnecting  = "connecting"  // no pass has succeeded yet
	StateFollowing   = "following"   // the last pass succeeded
	StateUnreachable = "unreachable" // the last dial or pass failed; retrying with backoff
)

// Status is how far behind a follower is.
type Status struct {
	Target string // HOST:PORT/NAMESPACE
	State  string
	// LastPoll is when the last successful list pass started: every run
	// that had events by then has been seen. Zero before the first.
	LastPoll time.Time
	// Lag is now minus LastPoll (since the start while there is none).
	Lag time.Duration
	// RunsFollowed are the runs long-polled now; RunsPolled the running
	// ones over the cap, read whole at each pass.
	RunsFollowed, RunsPolled int
	// EventsWritten counts events handed to the writer (duplicates of
	// events already stored included).
	EventsWritten int64
	// Errors counts failed dials, passes and history reads.
	Errors    int64
	LastError string
}

// Follower follows one target. Start it with Start, stop it with Stop.
type Follower struct {
	cfg     Config
	started time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu            sync.Mutex
	state         string
	lastPoll      time.Time
	followed      map[string]bool      // runs with a reader goroutine
	polled        map[string]int64     // running runs over the cap: history length last read
	done          map[string]time.Time // closed runs read to their end: close time
	eventsWritten int64
	errors        int64
	lastError     string
}

// Start starts following in the background; it returns at once.
func Start(ctx context.Context, cfg Config) *Follower {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	f := &Follower{cfg: cfg, started: cfg.Now(), cancel: cancel, state: StateConnecting,
		followed: map[string]bool{}, polled: map[string]int64{}, done: map[string]time.Time{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.run(ctx)
	}()
	return f
}

// Stop stops the follower and waits for its goroutines; what they were
// writing is committed or abandoned (and read again on the next start).
func (f *Follower) Stop() {
	f.cancel()
	f.wg.Wait()
}

// Status reads the follower's state now.
func (f *Follower) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	since := f.lastPoll
	if since.IsZero() {
		since = f.started
	}
	return Status{Target: f.cfg.Target.String(), State: f.state, LastPoll: f.lastPoll, Lag: max(0, f.cfg.Now().Sub(since)),
		RunsFollowed: len(f.followed), RunsPolled: len(f.polled), EventsWritten: f.eventsWritten,
		Errors: f.errors, LastError: f.lastError}
}

func (f *Follower) run(ctx context.Context) {
	var c client.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	wait := backoffFirst
	for ctx.Err() == nil {
		var err error
		if c == nil {
			c, err = f.dial(ctx)
		}
		if err == nil {
			err = f.pass(ctx, c.WorkflowService())
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.fail(err, true)
			sleep(ctx, wait)
			wait = min(2*wait, backoffMax)
			continue
		}
		wait = backoffFirst
		sleep(ctx, f.cfg.PollInterval)
	}
}

// dial connects once; gRPC reconnects the connection by itself afterwards
// (a restarted cluster is found again at the same address).
func (f *Follower) dial(ctx context.Context) (client.Client, error) {
	t := f.cfg.Target
	opts := client.Options{HostPort: t.HostPort, Namespace: t.Namespace, Logger: sdkLogger{},
		ConnectionOptions: client.ConnectionOptions{TLS: t.TLS}}
	if t.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(t.APIKey)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("temporal: connect to %s: %w", t, err)
	}
	return c, nil
}

// fail counts an error; a pass's error also marks the target unreachable.
// It logs when the state changes or the error is new, not every retry.
func (f *Follower) fail(err error, pass bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors++
	msg := err.Error()
	if (pass && f.state != StateUnreachable) || msg != f.lastError {
		f.cfg.Logger.Warn("temporal: following failed; retrying", "target", f.cfg.Target.String(), "err", msg)
	}
	f.lastError = msg
	if pass {
		f.state = StateUnreachable
	}
}

// pass lists the running runs, starting readers for the new ones, then the
// runs closed since the last pass, reading those not read to their end.
func (f *Follower) pass(ctx context.Context, svc workflowservice.WorkflowServiceClient) error {
	start := f.cfg.Now()
	f.mu.Lock()
	cutoff := start.Add(-f.cfg.Lookback)
	if !f.lastPoll.IsZero() {
		cutoff = later(cutoff, f.lastPoll.Add(-visibilityMargin))
	}
	f.mu.Unlock()

	running := map[string]bool{}
	err := f.list(ctx, svc, "ExecutionStatus = 'Running'", func(info *workflowpb.WorkflowExecutionInfo) error {
		key := runKey(info.GetExecution())
		running[key] = true
		return f.seeRunning(ctx, svc, info, key)
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	for key := range f.polled {
		if !running[key] {
			delete(f.polled, key) // closed (listed below) or gone
		}
	}
	f.mu.Unlock()
	closedQuery := fmt.Sprintf("ExecutionStatus != 'Running' AND CloseTime >= '%s'", cutoff.UTC().Format(time.RFC3339Nano))
	err = f.list(ctx, svc, closedQuery, func(info *workflowpb.WorkflowExecutionInfo) error {
		key := runKey(info.GetExecution())
		f.mu.Lock()
		skip := f.followed[key] || !f.done[key].IsZero()
		f.mu.Unlock()
		if skip {
			return nil
		}
		if err := f.readWhole(ctx, svc, info.GetExecution()); err != nil {
			return err
		}
		f.mu.Lock()
		f.done[key] = info.GetCloseTime().AsTime()
		f.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, closed := range f.done {
		if closed.Before(cutoff) {
			delete(f.done, key) // no longer listed
		}
	}
	f.lastPoll, f.state = start, StateFollowing
	return nil
}

// list pages through the runs the query lists.
func (f *Follower) list(ctx context.Context, svc workflowservice.WorkflowServiceClient, query string, each func(*workflowpb.WorkflowExecutionInfo) error) error {
	var token []byte
	for {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := svc.ListWorkflowExecutions(callCtx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: f.cfg.Target.Namespace, PageSize: listPageSize, NextPageToken: token, Query: query})
		cancel()
		if err != nil {
			return fmt.Errorf("temporal: list workflows (%s): %w", query, err)
		}
		for _, info := range resp.GetExecutions() {
			if err := each(info); err != nil {
				return err
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// seeRunning starts a reader for a running run not followed yet, or, over
// the cap, reads it whole when its history grew since the last read.
func (f *Follower) seeRunning(ctx context.Context, svc workflowservice.WorkflowServiceClient, info *workflowpb.WorkflowExecutionInfo, key string) error {
	f.mu.Lock()
	if f.followed[key] {
		f.mu.Unlock()
		return nil
	}
	if len(f.followed) < f.cfg.MaxRuns {
		f.followed[key] = true
		delete(f.polled, key)
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.follow(ctx, svc, info.GetExecution(), key)
		}()
		return nil
	}
	last, seen := f.polled[key]
	f.mu.Unlock()
	// The listing's history length is the one visibility recorded at the
	// start; the run's own record has the current one.
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	desc, err := svc.DescribeWorkflowExecution(callCtx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: f.cfg.Target.Namespace, Execution: info.GetExecution()})
	cancel()
	switch {
	case isNotFound(err):
		return nil // gone since it was listed
	case err != nil:
		return fmt.Errorf("temporal: describe %s: %w", key, err)
	}
	length := desc.GetWorkflowExecutionInfo().GetHistoryLength()
	if seen && last == length {
		return nil
	}
	if err := f.readWhole(ctx, svc, info.GetExecution()); err != nil {
		return err
	}
	f.mu.Lock()
	f.polled[key] = length
	f.mu.Unlock()
	return nil
}

// follow long-polls one run's history until the run closes. On an error
// it gives the run up: the next pass lists it again and starts over (the
// events already written are duplicates then, harmless).
func (f *Follower) follow(ctx context.Context, svc workflowservice.WorkflowServiceClient, run *commonpb.WorkflowExecution, key string) {
	r := runReader{f: f, run: f.runOf(run), written: map[string]bool{}}
	closedAt, err := r.read(ctx, svc, run, true)
	f.mu.Lock()
	delete(f.followed, key)
	if err == nil && !closedAt.IsZero() {
		f.done[key] = closedAt
	}
	f.mu.Unlock()
	if err != nil && ctx.Err() == nil && !isNotFound(err) {
		f.fail(err, false)
	}
}

// readWhole reads a run's history as it is now, and writes its events.
func (f *Follower) readWhole(ctx context.Context, svc workflowservice.WorkflowServiceClient, run *commonpb.WorkflowExecution) error {
	r := runReader{f: f, run: f.runOf(run), written: map[string]bool{}}
	_, err := r.read(ctx, svc, run, false)
	if isNotFound(err) {
		return nil // deleted since it was listed
	}
	return err
}

// runReader reads one run's history and writes what it maps to.
type runReader struct {
	f       *Follower
	run     Run
	history historypb.History
	written map[string]bool // event ids written
}

// read reads the history page by page, writing after each page that added
// events. With wait it long-polls until the run closes; it returns the
// close event's time (zero when it stopped before one).
func (r *runReader) read(ctx context.Context, svc workflowservice.WorkflowServiceClient, run *commonpb.WorkflowExecution, wait bool) (time.Time, error) {
	var token []byte
	for {
		timeout := callTimeout
		if wait && token != nil {
			timeout = longPollTimeout
		}
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := svc.GetWorkflowExecutionHistory(callCtx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: r.f.cfg.Target.Namespace, Execution: run, MaximumPageSize: historyPageSize,
			NextPageToken: token, WaitNewEvent: wait, HistoryEventFilterType: enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT})
		cancel()
		if err != nil {
			if wait && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
				continue // a long poll the server held past our deadline: ask again
			}
			return time.Time{}, fmt.Errorf("temporal: history of %s/%s: %w", run.GetWorkflowId(), run.GetRunId(), err)
		}
		events := resp.GetHistory().GetEvents()
		if len(events) > 0 {
			r.history.Events = append(r.history.Events, events...)
			if err := r.write(ctx); err != nil {
				return time.Time{}, err
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			if n := len(r.history.Events); n > 0 && isClose(r.history.Events[n-1].GetEventType()) {
				return r.history.Events[n-1].GetEventTime().AsTime(), nil
			}
			return time.Time{}, nil
		}
	}
}

// runOf names a listed run for the mapper.
func (f *Follower) runOf(run *commonpb.WorkflowExecution) Run {
	return Run{Namespace: f.cfg.Target.Namespace, WorkflowID: run.GetWorkflowId(), RunID: run.GetRunId()}
}

// write maps the history read so far and writes the events not written
// yet, in chunks.
func (r *runReader) write(ctx context.Context) error {
	if len(r.history.Events) == 0 {
		return nil
	}
	all, err := r.f.cfg.Map(&r.history, r.run)
	if err != nil {
		return fmt.Errorf("temporal: map history: %w", err)
	}
	var fresh []trace.Event
	for _, ev := range all {
		if !r.written[ev.ID] {
			fresh = append(fresh, ev)
		}
	}
	for len(fresh) > 0 {
		chunk := fresh[:min(writeChunk, len(fresh))]
		fresh = fresh[len(chunk):]
		if _, err := r.f.cfg.Writer.Write(ctx, chunk); err != nil {
			return fmt.Errorf("temporal: write events: %w", err)
		}
		for _, ev := range chunk {
			r.written[ev.ID] = true
		}
		r.f.mu.Lock()
		r.f.eventsWritten += int64(len(chunk))
		r.f.mu.Unlock()
	}
	return nil
}

func isClose(t enumspb.EventType) bool {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func runKey(run *commonpb.WorkflowExecution) string {
	return run.GetWorkflowId() + "/" + run.GetRunId()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sdkLogger drops the SDK's own log lines: its retries while a cluster is
// away would repeat what the follower's status and log already say.
type sdkLogger struct{}

func (sdkLogger) Debug(string, ...any) {}
func (sdkLogger) Info(string, ...any)  {}
func (sdkLogger) Warn(string, ...any)  {}
func (sdkLogger) Error(string, ...any) {}
