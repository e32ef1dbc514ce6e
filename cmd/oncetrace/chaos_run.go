package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

// chaosRunner runs the command once per run, each run with proxies and,
// unless --server, a server of its own.
type chaosRunner struct {
	o      chaosOptions
	dir    string
	log    io.Writer    // progress lines
	logger *slog.Logger // the proxies' and embedded servers' warnings
	client *http.Client
}

// runChaos runs the baseline, then one run per call site and fault, and
// judges each.
func runChaos(ctx context.Context, o chaosOptions, log io.Writer) (*chaosReport, error) {
	dir, cleanup, err := keepDir(o.keep)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	c := &chaosRunner{o: o, dir: dir, log: log, client: &http.Client{Timeout: 30 * time.Second},
		logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	report := &chaosReport{Command: o.command, Server: cmp.Or(o.server, "embedded"), CallSites: []chaosCallSite{}, Runs: []chaosRun{}}
	for _, f := range o.faults {
		report.Faults = append(report.Faults, faultName(f))
	}
	for _, u := range o.upstreams {
		report.Upstreams = append(report.Upstreams, chaosUpstreamJSON{Name: u.name, URL: u.url, Provider: u.provider(), Env: u.envName(),
			MCP: u.mcp, Command: u.command})
	}
	if o.keep != "" {
		report.Kept, _ = filepath.Abs(dir)
	}
	if o.server != "" {
		if err := serverAnswers(ctx, o.server); err != nil {
			return nil, fmt.Errorf("chaos: --server %s does not answer: %w", o.server, err)
		}
	}

	base, requests, err := c.run(ctx, "baseline", 0, sandbox.Fault{})
	if err != nil {
		return nil, err
	}
	report.Baseline = base
	if base.ExitCode != 0 {
		why := fmt.Sprintf("exit status %d", base.ExitCode)
		if base.TimedOut {
			why = fmt.Sprintf("timed out after %s", o.timeout)
		}
		tail := ""
		if base.StderrTail != "" {
			tail = "; its stderr ends:\n" + lastLines(base.StderrTail, 10)
		}
		return nil, fmt.Errorf("chaos: the agent fails without faults (%s): fix that first, chaos needs a baseline that succeeds%s", why, tail)
	}
	if len(requests) == 0 {
		var vars []string
		for _, u := range o.upstreams {
			vars = append(vars, "$"+u.envName())
		}
		if !slices.ContainsFunc(o.upstreams, func(u chaosUpstream) bool { return u.mcp != "" }) {
			return nil, fmt.Errorf("chaos: the baseline run made no unsafe request through the proxies: does the command call %s instead of the API's own URL?",
				strings.Join(vars, ", "))
		}
		return nil, fmt.Errorf("chaos: the baseline run made no unsafe request and no tools/call of a tool not annotated read-only through the proxies: "+
			"does the command use %s (a proxy's URL, or the command line that launches a stdio MCP server) instead of the server's own?", strings.Join(vars, ", "))
	}
	for i, rq := range requests {
		report.CallSites = append(report.CallSites, chaosCallSite{N: i + 1, Upstream: rq.upstream, Method: rq.method, Path: rq.path,
			Step: rq.step, Tool: rq.tool})
	}
	fmt.Fprintf(log, "chaos: baseline: %d unsafe request(s), effects %s\n", len(requests), report.effectsText(base.Effects))

	for k := 1; k <= len(requests); k++ {
		for _, f := range o.faults {
			label := fmt.Sprintf("%d-%s", k, f.Kind)
			run, _, err := c.run(ctx, label, k, f)
			if err != nil {
				return nil, err
			}
			run.CallSite, run.Fault, run.BaselineEffects = k, faultName(f), base.Effects
			run.Outcome = verdict(run.Effects, base.Effects, run.ExitCode)
			if run.Outcome == chaosSafe && !run.Struck {
				run.Outcome = chaosNotReached // no fault struck: nothing to call safe
			}
			switch {
			case run.TimedOut:
				run.Note = fmt.Sprintf("timed out after %s", o.timeout)
			case !run.Struck:
				run.Note = fmt.Sprintf("fault not reached: only %d unsafe request(s)", run.UnsafeRequests)
			case run.Outcome == chaosFailed:
				run.Note = fmt.Sprintf("exit %d", run.ExitCode)
			}
			fmt.Fprintf(log, "chaos: run %s: %s, effects %s of %s (%.1fs)\n", label, run.Outcome, report.effectsText(run.Effects),
				report.effectsText(base.Effects), run.Seconds)
			report.Runs = append(report.Runs, run)
		}
	}
	report.summarize()
	return report, nil
}

// chaosRequest is one unsafe request a proxy saw.
type chaosRequest struct {
	upstream, method, path string
	traceID, spanID        string
	execution, step        string // X-Oncetrace-Execution and -Step, when the agent sent them
	tool                   string // filled in from the run's trace
}

// chaosStriker counts the unsafe requests of one run across all its
// proxies and strikes the fault at the at-th only.
type chaosStriker struct {
	at    int
	fault sandbox.Fault

	mu       sync.Mutex
	requests []chaosRequest
}

func (s *chaosStriker) strike(upstream string) func(*http.Request) []sandbox.Fault {
	return func(r *http.Request) []sandbox.Fault {
		traceID, spanID := feed.TraceContext(r.Header)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests = append(s.requests, chaosRequest{upstream: upstream, method: r.Method, path: r.URL.Path, traceID: traceID, spanID: spanID,
			execution: r.Header.Get(sandbox.HeaderExecution), step: r.Header.Get(sandbox.HeaderStep)})
		if len(s.requests) == s.at {
			return []sandbox.Fault{s.fault}
		}
		return nil
	}
}

func (s *chaosStriker) seen() []chaosRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// chaosRecorder counts the distinct effects one proxy saw, then records
// each on the run's server. The count is the verdict's: it does not
// depend on the server.
type chaosRecorder struct {
	next   feed.Recorder
	logger *slog.Logger

	mu       sync.Mutex
	ids      map[string]bool
	recorded int64
	failed   int64
}

func (r *chaosRecorder) Record(ctx context.Context, e trace.Effect) (feed.Outcome, error) {
	r.mu.Lock()
	r.ids[e.ID] = true
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.next.RecordEffect(ctx, e); err != nil {
		r.logger.Warn("chaos: an effect could not be recorded on the run's server; it still counts", "provider", e.Provider, "effect_id", e.ID, "err", err)
		r.mu.Lock()
		r.failed++
		r.mu.Unlock()
		return feed.Dropped, err
	}
	r.mu.Lock()
	r.recorded++
	r.mu.Unlock()
	return feed.Recorded, nil
}

func (r *chaosRecorder) Counts() feed.Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return feed.Counts{Recorded: r.recorded, Dropped: r.failed}
}

func (r *chaosRecorder) effects() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// chaosProxy is one upstream's recording proxy for one run.
type chaosProxy struct {
	upstream chaosUpstream
	// value is what the command finds in the upstream's variable: the
	// proxy's URL, or the command line that launches a stdio MCP server.
	value string
	// effects counts the distinct effects the proxy recorded.
	effects func() int
	// stop stops the proxy; settle says the command has ended on its own,
	// so the proxy waits for the recordings still on their way.
	stop func(settle bool)
}

// run runs the command once, with fault striking the at-th unsafe request
// (none when at is 0), and returns what it did and the unsafe requests
// the proxies saw, in order.
func (c *chaosRunner) run(ctx context.Context, label string, at int, fault sandbox.Fault) (chaosRun, []chaosRequest, error) {
	run := chaosRun{Run: label, Effects: map[string]int{}, Executions: []chaosExecution{}, Findings: []chaosFinding{}}
	srv, err := c.startServer(ctx, label)
	if err != nil {
		return run, nil, err
	}
	defer srv.close()
	var watch *streamWatch
	if c.o.server != "" {
		if watch, err = c.watchStream(ctx); err != nil {
			return run, nil, err
		}
		defer watch.stop()
	}
	striker := &chaosStriker{at: at, fault: fault}
	var control *chaosStdioControl
	if slices.ContainsFunc(c.o.upstreams, func(u chaosUpstream) bool { return u.mcp == chaosMCPStdio }) {
		if control, err = startChaosStdioControl(striker, c.logger); err != nil {
			return run, nil, err
		}
		defer control.close() // after the proxies: their processes may still be recording
	}
	var proxies []*chaosProxy
	defer func() {
		for _, p := range proxies {
			p.stop(false)
		}
	}()
	for _, u := range c.o.upstreams {
		var p *chaosProxy
		switch u.mcp {
		case chaosMCPStdio:
			p, err = control.add(u, srv.recorder, c.logger)
		case chaosMCPHTTP:
			p, err = c.startMCPProxy(u, striker, srv.recorder)
		default:
			p, err = c.startProxy(u, striker, srv.recorder)
		}
		if err != nil {
			return run, nil, err
		}
		proxies = append(proxies, p)
	}
	env := c.env(label, srv.url, proxies)
	logPath := filepath.Join(c.dir, label+".log")
	started := time.Now()
	code, timedOut, tail, err := c.execute(ctx, env, logPath)
	if err != nil {
		return run, nil, err
	}
	run.Seconds = math.Round(time.Since(started).Seconds()*100) / 100
	for _, p := range proxies {
		p.stop(!timedOut) // a run killed at --timeout took its mcp-stdio processes with it
		run.Effects[p.upstream.name] = p.effects()
	}
	proxies = nil
	requests := striker.seen()
	run.ExitCode, run.TimedOut, run.StderrTail, run.UnsafeRequests = code, timedOut, tail, len(requests)
	run.Struck = at > 0 && len(requests) >= at
	if c.o.keep != "" {
		run.Output = logPath
		if srv.db != nil {
			run.Database = srv.path
		}
	}
	if err := c.audit(ctx, srv, watch, requests, &run); err != nil {
		fmt.Fprintf(c.log, "chaos: run %s: reading its executions' findings: %v\n", label, err)
	}
	return run, requests, nil
}

// env is the command's environment: chaos's own variables win over --env,
// which wins over the inherited ones.
func (c *chaosRunner) env(label, server string, proxies []*chaosProxy) []string {
	env := os.Environ()
	if _, ok := os.LookupEnv("OTEL_EXPORTER_OTLP_PROTOCOL"); !ok {
		env = append(env, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf") // oncetrace speaks OTLP/HTTP, not gRPC
	}
	env = append(env, c.o.env...)
	for _, p := range proxies {
		env = append(env, p.upstream.envName()+"="+p.value)
	}
	return append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+server, "ONCETRACE_URL="+server, "ONCETRACE_CHAOS_RUN="+label)
}

// startProxy starts an HTTP upstream's recording proxy, the tap.
func (c *chaosRunner) startProxy(u chaosUpstream, striker *chaosStriker, next tapRecorder) (*chaosProxy, error) {
	rec := &chaosRecorder{next: next, logger: c.logger, ids: map[string]bool{}}
	tp, err := tap.New(tap.Config{Upstream: u.url, Provider: u.provider(), Strike: striker.strike(u.name), Recorder: rec,
		HoldLimit: 2 * c.o.timeout, Logger: c.logger})
	if err != nil {
		return nil, fmt.Errorf("chaos: --upstream %s: %w", u.name, err)
	}
	url, stop, err := c.serveProxy(u, tp)
	if err != nil {
		return nil, err
	}
	return &chaosProxy{upstream: u, value: url, effects: rec.effects, stop: func(bool) {
		tp.Close() // held lose-response answers get 504
		stop(tp)
	}}, nil
}

// serveProxy serves a tap on a free loopback port. stop shuts the server
// down, then gives the tap's requests still waiting for a late answer
// time to record before the run's server stops.
func (c *chaosRunner) serveProxy(u chaosUpstream, tp *tap.Tap) (url string, stop func(*tap.Tap), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("chaos: proxy for %s: %w", u.name, err)
	}
	server := &http.Server{Handler: tp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(c.logger.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		server.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func(tp *tap.Tap) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if server.Shutdown(ctx) != nil {
			server.Close()
		}
		<-served
		tp.Drain(ctx)
	}, nil
}

// execute runs the command in a process group of its own, so that a run
// over --timeout is killed whole, children included.
func (c *chaosRunner) execute(ctx context.Context, env []string, logPath string) (code int, timedOut bool, stderrTail string, err error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, false, "", fmt.Errorf("chaos: %w", err)
	}
	defer logFile.Close()
	tail := &tailBuffer{max: 4096}
	cmd := exec.Command(c.o.command[0], c.o.command[1:]...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = io.MultiWriter(logFile, tail)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // a child left holding stderr does not hold chaos
	if err := cmd.Start(); err != nil {
		return 0, false, "", fmt.Errorf("chaos: start %s: %w", c.o.command[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(c.o.timeout)
	defer timer.Stop()
	killGroup := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // the group this command leads
	select {
	case <-done:
	case <-timer.C:
		timedOut = true
		killGroup()
		<-done
	case <-ctx.Done():
		killGroup()
		<-done
		return 0, false, "", ctx.Err()
	}
	code = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal()) // as a shell reports it
	}
	return code, timedOut, tail.String(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = slices.Clone(t.b[len(t.b)-t.max:])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// chaosServer is the server a run's command and proxies report to: an
// embedded one on the run's own database, or --server.
type chaosServer struct {
	url      string
	recorder tapRecorder // effects for the tap, events for the MCP proxies
	// The embedded server's parts; nil with --server.
	db     *store.DB
	path   string
	writer *writer.Writer
	web    *web.Server
	http   *http.Server
	served chan struct{}
}

func (c *chaosRunner) startServer(ctx context.Context, label string) (*chaosServer, error) {
	if c.o.server != "" {
		return &chaosServer{url: c.o.server, recorder: feed.HTTPRecorder{Server: c.o.server, Token: c.o.token, Feed: tap.Feed, Client: c.client}}, nil
	}
	path := filepath.Join(c.dir, label+".db")
	db, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		return nil, fmt.Errorf("chaos: run %s: %w", label, err)
	}
	wcfg := writer.DefaultConfig
	wcfg.Analysis = trace.DefaultConfig
	w := writer.New(db, wcfg)
	srv := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, SpanMap: c.o.spanMap, Analysis: trace.DefaultConfig, Logger: c.logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.Close()
		db.Close()
		return nil, fmt.Errorf("chaos: run %s: %w", label, err)
	}
	s := &chaosServer{url: "http://" + ln.Addr().String(), db: db, path: path, writer: w, web: srv, served: make(chan struct{}),
		recorder: feed.WriterRecorder{Writer: w, Limits: ingest.DefaultLimits, Feed: tap.Feed},
		http:     &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(c.logger.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(s.served)
		s.http.Serve(ln)
	}()
	return s, nil
}

// close stops the embedded server: requests first, then the writer
// (which commits what is queued), then the database.
func (s *chaosServer) close() {
	if s.db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.web.Close()
	if s.http.Shutdown(ctx) != nil {
		s.http.Close()
	}
	<-s.served
	s.writer.Close()
	s.db.Close()
}

// audit finds the run's executions and their critical findings, and, for
// each unsafe request, the step and tool the run's trace names.
func (c *chaosRunner) audit(ctx context.Context, srv *chaosServer, watch *streamWatch, requests []chaosRequest, run *chaosRun) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if srv.db != nil {
		return c.auditEmbedded(ctx, srv, requests, run)
	}
	return c.auditShared(ctx, srv, watch, requests, run)
}

// auditEmbedded reads the run's own database: every execution in it is
// this run's.
func (c *chaosRunner) auditEmbedded(ctx context.Context, srv *chaosServer, requests []chaosRequest, run *chaosRun) error {
	var runs []trace.Run
	for cursor := ""; ; {
		page, next, err := srv.db.ListExecutions(ctx, store.ExecutionFilter{Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			return err
		}
		for _, x := range page {
			run.Executions = append(run.Executions, chaosExecution{ID: x.ID, Path: views.ExecutionURL(x.ID)})
			r, err := srv.db.Run(ctx, x.ID)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	findings, err := srv.db.Findings(ctx, store.FindingFilter{Severity: trace.SeverityCritical})
	if err != nil {
		return err
	}
	for _, f := range findings {
		run.Findings = append(run.Findings, chaosFinding{Rule: string(f.Rule), ExecutionID: f.ExecutionID, Step: f.StepID, Message: f.Message})
	}
	for i := range requests {
		nameStep(&requests[i], runs)
	}
	return nil
}

// nameStep fills in the request's step and tool: the step it names, or
// the tool call above the span that made it, in the run's trace.
func nameStep(rq *chaosRequest, runs []trace.Run) {
	for _, r := range runs {
		if rq.step != "" && (rq.execution == "" || rq.execution == r.Execution.ID) {
			for _, s := range r.Steps {
				if s.ID == rq.step {
					rq.tool = s.ToolName()
					return
				}
			}
		}
		if rq.step == "" && rq.spanID != "" {
			// The effect the request would cause, attributed as the audit
			// attributes effects (docs/audit.md, "Trace context").
			probe := trace.Effect{Provider: "oncetrace-chaos-probe", ID: "probe", TraceID: rq.traceID, SpanID: rq.spanID}
			r.Effects = append(slices.Clone(r.Effects), probe)
			for stepID, es := range r.StepEffects() {
				if slices.ContainsFunc(es, func(e trace.Effect) bool { return e.Ref() == probe.Ref() }) {
					rq.step = stepID
					for _, s := range r.Steps {
						if s.ID == stepID {
							rq.tool = s.ToolName()
						}
					}
					return
				}
			}
		}
	}
}

// auditShared reads a shared server: the run's executions are those whose
// events arrived during the run, those its requests named, and those of
// the trace ids the proxies saw.
func (c *chaosRunner) auditShared(ctx context.Context, srv *chaosServer, watch *streamWatch, requests []chaosRequest, run *chaosRun) error {
	seen := watch.settle(ctx)
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range seen.order {
		add(id)
	}
	for _, rq := range requests {
		add(rq.execution)
		add(rq.traceID) // an OpenTelemetry execution's id is its trace id unless the trace says otherwise
	}
	var errs []error
	for _, id := range ids {
		var detail struct {
			Steps []struct {
				StepID   string `json:"step_id"`
				Tool     string `json:"tool"`
				Attempts []struct {
					SpanID string `json:"span_id"`
				} `json:"attempts"`
			} `json:"steps"`
			Findings []trace.Finding `json:"findings"`
		}
		found, err := c.getJSON(ctx, srv.url+views.ExecutionAPIURL(id), &detail)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !found {
			continue // a trace id that names no execution
		}
		earlier := c.hadEarlierEvents(ctx, srv.url, id, seen.firstSeq)
		run.Executions = append(run.Executions, chaosExecution{ID: id, Path: views.ExecutionURL(id), URL: srv.url + views.ExecutionURL(id), EarlierEvents: earlier})
		for _, f := range detail.Findings {
			if f.Severity == trace.SeverityCritical {
				run.Findings = append(run.Findings, chaosFinding{Rule: string(f.Rule), ExecutionID: f.ExecutionID, Step: f.StepID, Message: f.Message})
			}
		}
		for i := range requests {
			rq := &requests[i]
			for _, s := range detail.Steps {
				named := rq.step != "" && rq.step == s.StepID && (rq.execution == "" || rq.execution == id)
				bySpan := rq.step == "" && rq.spanID != "" && slices.ContainsFunc(s.Attempts, func(a struct {
					SpanID string `json:"span_id"`
				}) bool {
					return a.SpanID == rq.spanID
				})
				if named || bySpan {
					rq.step, rq.tool = s.StepID, s.Tool
				}
			}
		}
	}
	return errors.Join(errs...)
}

// getJSON reads a JSON answer of the server; found is false on 404.
func (c *chaosRunner) getJSON(ctx context.Context, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	if c.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return false, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(msg)))
	}
	return true, json.NewDecoder(resp.Body).Decode(v)
}

// hadEarlierEvents reports whether the execution's first stored event
// came before the first event the run's stream saw.
func (c *chaosRunner) hadEarlierEvents(ctx context.Context, server, id string, runFirstSeq int64) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/api/v1/stream?after=0&execution_id="+url.QueryEscape(id), nil)
	if err != nil {
		return false
	}
	if c.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.token)
	}
	resp, err := (&http.Client{}).Do(req) // no client timeout: the stream stays open; ctx ends it
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m struct {
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Type == "event" {
			return m.Seq < runFirstSeq
		}
	}
	return false
}

// streamWatch follows a shared server's NDJSON stream during a run: the
// executions whose events arrived, and the first sequence number seen.
type streamWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	order    []string
	firstSeq int64
	last     time.Time
}

type streamSeen struct {
	order    []string
	firstSeq int64
}

func (c *chaosRunner) watchStream(ctx context.Context) (*streamWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.o.server+"/api/v1/stream", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if c.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.token)
	}
	resp, err := (&http.Client{}).Do(req) // no client timeout: the stream stays open; stop ends it
	if err != nil {
		cancel()
		return nil, fmt.Errorf("chaos: --server: follow /api/v1/stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("chaos: --server: follow /api/v1/stream: %s", resp.Status)
	}
	w := &streamWatch{cancel: cancel, done: make(chan struct{}), firstSeq: math.MaxInt64, last: time.Now()}
	go func() {
		defer close(w.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var m struct {
				Type        string `json:"type"`
				Seq         int64  `json:"seq"`
				ExecutionID string `json:"execution_id"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.Type != "event" {
				continue
			}
			w.mu.Lock()
			w.firstSeq = min(w.firstSeq, m.Seq)
			if m.ExecutionID != "" && !slices.Contains(w.order, m.ExecutionID) {
				w.order = append(w.order, m.ExecutionID)
			}
			w.last = time.Now()
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// settle waits until the stream has been quiet for a second (at most
// 15 s): the run's last events are committed, but may still be on their
// way to it.
func (w *streamWatch) settle(ctx context.Context) streamSeen {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		w.mu.Lock()
		quiet := time.Since(w.last) > time.Second
		w.mu.Unlock()
		if quiet {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return streamSeen{order: slices.Clone(w.order), firstSeq: w.firstSeq}
}

func (w *streamWatch) stop() {
	w.cancel()
	<-w.done
}
