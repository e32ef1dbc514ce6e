package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/views"
)

// scenario switches the agent's safety mechanisms and failures.
type scenario struct {
	name          string
	useKey        bool // derive an idempotency key for the send
	recordResults bool // journal step results and replay them
	loseFirst     bool // the sandbox loses the response to the first send
	what          string
}

var scenarios = []scenario{
	{name: "naive", loseFirst: true, what: "no key; the first response is lost and the retry sends again"},
	{name: "crash", what: "the process is killed after the send, before recording it; a new process resumes and sends again"},
	{name: "safe", useKey: true, recordResults: true, loseFirst: true, what: "key and journal; the first response is lost, the retry is deduplicated"},
	{name: "safe-rerun", useKey: true, recordResults: true, what: "a full restart of a finished execution: the journal answers, the tool is not called"},
	{name: "key-only", useKey: true, recordResults: true, what: "the journal entry deleted by hand, the run repeated: the key alone holds"},
	{name: "crash-safe", useKey: true, recordResults: true, what: "the crash with key and journal: the recorded send is replayed after the gap"},
}

func scenarioNamed(name string) (scenario, bool) {
	for _, s := range scenarios {
		if s.name == name {
			return s, true
		}
	}
	return scenario{}, false
}

// parseScenarios reads --scenario: names from the list above, all of them
// when empty. An unknown name is refused rather than skipped, which would
// run nothing and exit 0.
func parseScenarios(list string) ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if _, ok := scenarioNamed(name); !ok {
			return nil, fmt.Errorf("demo: --scenario: unknown scenario %q; the scenarios are %s", name, scenarioNames())
		}
		names = append(names, name)
	}
	return names, nil
}

func scenarioNames() string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// demoOptions configure a demo run.
type demoOptions struct {
	server, token string
	readToken     string        // to read the results back; the ingest token when empty
	gap           time.Duration // how long crash scenarios wait with no process running
	timeout       time.Duration // per attempt
	journalDir    string
	runID         string
	only          []string
	out           io.Writer
	// via is "tap" to send the mail through a recording proxy in front of
	// the sandbox (demo_tap.go); mailURL and mailProvider, when set, are
	// where the agent sends mail and the provider its attempts name.
	via                   string
	mailURL, mailProvider string
}

func runDemoCommand(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o := demoOptions{out: out}
	fs.StringVar(&o.server, "server", envOr("ONCETRACE_SERVER", "http://127.0.0.1:8080"), "the oncetrace server to run against (env ONCETRACE_SERVER)")
	fs.StringVar(&o.token, "ingest-token", envOr("ONCETRACE_INGEST_TOKEN", ""), "the server's ingest token, if it has one")
	fs.StringVar(&o.readToken, "read-token", envOr("ONCETRACE_READ_TOKEN", ""), "the server's read token, if reads need one other than the ingest token (env ONCETRACE_READ_TOKEN)")
	fs.DurationVar(&o.gap, "gap", 3*time.Second, "how long the crash scenarios wait with no process running (53s reproduces the article); keep it above the server's --gap-threshold to see a crash gap")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "the agent's per-attempt timeout")
	fs.StringVar(&o.journalDir, "journal-dir", "", "where the agent keeps its journals (default: a new temporary directory)")
	fs.StringVar(&o.runID, "run", "", "suffix of the execution ids (default: the time)")
	only := fs.String("scenario", "", "comma-separated scenarios to run (default: all): naive, crash, safe, safe-rerun, key-only, crash-safe; with --temporal: naive, crash, keyed")
	temporal := fs.String("temporal", "", "run the scenarios naive, crash and keyed as Temporal workflows on the cluster at HOST:PORT[/NAMESPACE] instead, with workers of this binary sending through --server's sandbox and exporting spans to it")
	fs.StringVar(&o.via, "via", "sandbox", "sandbox: the agent calls the sandbox mail API; tap: it calls it through a recording proxy (oncetrace tap) that injects the faults and records the emails too")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := refuseArguments("demo", fs); err != nil {
		return err
	}
	var err error
	if *temporal != "" {
		target, err := parseTemporalTarget(*temporal)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		names, err := parseTemporalScenarios(*only)
		if err != nil {
			return err
		}
		ctx, cancel := signalContext()
		defer cancel()
		if threshold := serverGapThreshold(ctx, o.server); !flagSet(fs, "gap") && threshold >= o.gap {
			// Temporal's own wait (heartbeat timeout and retry interval,
			// about 3 s) comes on top; the crash gap must still show.
			o.gap = threshold + time.Second
			fmt.Fprintf(out, "demo: the server shows gaps longer than %s; the crash scenario starts its second worker %s after killing the first\n", threshold, o.gap)
		}
		_, err = runTemporalDemo(ctx, o, target, names)
		return err
	}
	if o.only, err = parseScenarios(*only); err != nil {
		return err
	}
	if o.via != "sandbox" && o.via != "tap" {
		return fmt.Errorf("demo: --via %q: want sandbox or tap", o.via)
	}
	ctx, cancel := signalContext()
	defer cancel()
	if threshold := serverGapThreshold(ctx, o.server); !flagSet(fs, "gap") && threshold >= o.gap {
		// A gap shorter than the server's threshold would not show as a
		// crash gap; the scenarios are there to show one.
		o.gap = threshold + time.Second
		fmt.Fprintf(out, "demo: the server shows gaps longer than %s; the crash scenarios wait %s\n", threshold, o.gap)
	}
	_, err = runDemo(ctx, o)
	return err
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// serverGapThreshold asks the server how long a silence must be to show as
// a gap; 0 when it does not say.
func serverGapThreshold(ctx context.Context, server string) time.Duration {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/healthz", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var health struct {
		GapThreshold string `json:"gap_threshold"`
	}
	if json.NewDecoder(resp.Body).Decode(&health) != nil {
		return 0
	}
	d, _ := time.ParseDuration(health.GapThreshold)
	return d
}

// demoResult is one scenario's execution as the server audited it.
type demoResult struct {
	Scenario, ExecutionID string
	Effects               int    // emails the sandbox delivered
	Audit                 string // the execution's audit state
	Critical              []string
}

// runDemo runs the scenarios, each as its own execution, then reads back
// what the server concluded about each.
func runDemo(ctx context.Context, o demoOptions) ([]demoResult, error) {
	if o.runID == "" {
		o.runID = time.Now().UTC().Format("20060102-150405")
	}
	if o.journalDir == "" {
		dir, err := os.MkdirTemp("", "oncetrace-demo-")
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(dir)
		o.journalDir = dir
	}
	if o.timeout <= 0 {
		o.timeout = time.Second
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: cannot find my own binary to start agent processes: %w", err)
	}
	viaTap, err := startDemoTap(o)
	if err != nil {
		return nil, err
	}
	defer viaTap.stop()
	if viaTap != nil {
		o.mailURL = viaTap.url + sandboxSendPath
	}
	var results []demoResult
	for _, sc := range scenarios {
		if len(o.only) > 0 && !contains(o.only, sc.name) {
			continue
		}
		id := "demo-" + sc.name + "-" + o.runID
		fmt.Fprintf(o.out, "demo: %-10s %s: %s\n", sc.name, id, sc.what)
		w := demoWorker{exe: exe, o: o, sc: sc, execution: id, journal: filepath.Join(o.journalDir, id+".json")}
		if err := w.play(ctx); err != nil {
			return results, fmt.Errorf("demo: %s: %w", sc.name, err)
		}
		viaTap.settle(ctx)
		r, err := auditedResult(ctx, o, sc.name, id)
		if err != nil {
			return results, err
		}
		verdict := r.Audit
		if len(r.Critical) > 0 {
			verdict = "critical: " + strings.Join(r.Critical, ", ")
		}
		fmt.Fprintf(o.out, "demo: %-10s %d email(s) sent, %s — %s%s\n", sc.name, r.Effects, verdict, strings.TrimRight(o.server, "/"), views.ExecutionURL(id))
		results = append(results, r)
	}
	viaTap.report()
	return results, nil
}

// demoWorker plays one scenario, in this process or in agent processes of
// its own where the scenario needs a crash or a restart.
type demoWorker struct {
	exe       string
	o         demoOptions
	sc        scenario
	execution string
	journal   string
}

func (w demoWorker) play(ctx context.Context) error {
	switch w.sc.name {
	case "naive", "safe":
		return w.inProcess(ctx)
	case "crash":
		return w.crashThenResume(ctx, "after-send")
	case "crash-safe":
		return w.crashThenResume(ctx, "after-record")
	case "safe-rerun":
		if err := w.inProcess(ctx); err != nil {
			return err
		}
		return w.process(ctx, "")
	case "key-only":
		if err := w.inProcess(ctx); err != nil {
			return err
		}
		j, err := openJournal(w.journal)
		if err != nil {
			return err
		}
		if err := j.forget(demoSendStep); err != nil { // by hand, as an operator would
			return err
		}
		return w.process(ctx, "")
	}
	return fmt.Errorf("unknown scenario %q", w.sc.name)
}

func (w demoWorker) agent() (*agent, error) {
	j, err := openJournal(w.journal)
	if err != nil {
		return nil, err
	}
	a := newAgent(w.o.server, w.o.token, w.execution, w.sc.name, w.o.timeout)
	if w.o.mailURL != "" {
		a.mailURL = w.o.mailURL
	}
	if w.o.mailProvider != "" {
		a.mailProvider = w.o.mailProvider
	}
	a.useKey, a.recordResults, a.loseFirst, a.journal = w.sc.useKey, w.sc.recordResults, w.sc.loseFirst, j
	return a, nil
}

func (w demoWorker) inProcess(ctx context.Context) error {
	a, err := w.agent()
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// crashThenResume runs the agent in a process that is killed at the crash
// point, waits the gap with no process running, then resumes the same
// execution in a new process.
func (w demoWorker) crashThenResume(ctx context.Context, crashAt string) error {
	err := w.process(ctx, crashAt)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !killed(exit) {
		return fmt.Errorf("the agent process was to be killed at %s, but it ended with %v", crashAt, err)
	}
	fmt.Fprintf(w.o.out, "demo: %-10s agent process killed at %s (exit 137); nothing runs for %s\n", w.sc.name, crashAt, w.o.gap)
	select {
	case <-time.After(w.o.gap):
	case <-ctx.Done():
		return ctx.Err()
	}
	return w.process(ctx, "")
}

func killed(exit *exec.ExitError) bool {
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// process runs the agent as a process of its own: a new worker id, as a
// restarted machine would have.
func (w demoWorker) process(ctx context.Context, crashAt string) error {
	cmd := exec.CommandContext(ctx, w.exe, "demo-worker", "--server", w.o.server, "--execution", w.execution,
		"--scenario", w.sc.name, "--journal", w.journal, "--timeout", w.o.timeout.String(), "--crash", crashAt,
		"--mail-url", w.o.mailURL, "--mail-provider", w.o.mailProvider)
	cmd.Env = append(os.Environ(), "ONCETRACE_INGEST_TOKEN="+w.o.token)
	cmd.Stdout, cmd.Stderr = w.o.out, w.o.out
	return cmd.Run()
}

// runDemoWorker is the hidden "demo-worker" command: one agent process.
func runDemoWorker(args []string) error {
	fs := flag.NewFlagSet("demo-worker", flag.ContinueOnError)
	server := fs.String("server", "", "")
	execution := fs.String("execution", "", "")
	name := fs.String("scenario", "", "")
	journalPath := fs.String("journal", "", "")
	timeout := fs.Duration("timeout", time.Second, "")
	crash := fs.String("crash", "", "")
	mailURL := fs.String("mail-url", "", "")
	mailProvider := fs.String("mail-provider", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := refuseArguments("demo-worker", fs); err != nil {
		return err
	}
	sc, ok := scenarioNamed(*name)
	if !ok {
		return fmt.Errorf("demo-worker: unknown scenario %q", *name)
	}
	w := demoWorker{o: demoOptions{server: *server, token: os.Getenv("ONCETRACE_INGEST_TOKEN"), timeout: *timeout, mailURL: *mailURL, mailProvider: *mailProvider}, sc: sc,
		execution: *execution, journal: *journalPath}
	a, err := w.agent()
	if err != nil {
		return err
	}
	a.crash = *crash
	ctx, cancel := signalContext()
	defer cancel()
	return a.run(ctx)
}

// auditedResult reads back the server's verdict on one execution.
func auditedResult(ctx context.Context, o demoOptions, name, id string) (demoResult, error) {
	r := demoResult{Scenario: name, ExecutionID: id}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(o.server, "/")+views.ExecutionAPIURL(id), nil)
	if err != nil {
		return r, err
	}
	if token := cmp.Or(o.readToken, o.token); token != "" {
		req.Header.Set("Authorization", "Bearer "+token) // an exposed server protects reads too
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, fmt.Errorf("demo: read back %s: %w", id, err)
	}
	defer resp.Body.Close()
	var body struct {
		Audit struct {
			State string `json:"state"`
		} `json:"audit"`
		Effects []struct {
			Provider string `json:"provider"`
		} `json:"effects"`
		Findings []struct {
			Rule, Severity string
		} `json:"findings"`
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("demo: read back %s: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return r, fmt.Errorf("demo: read back %s: %w", id, err)
	}
	for _, e := range body.Effects {
		if e.Provider == sandbox.Provider {
			r.Effects++ // the CRM's records are effects too, but not emails
		}
	}
	r.Audit = body.Audit.State
	for _, f := range body.Findings {
		if f.Severity == "critical" && !contains(r.Critical, f.Rule) {
			r.Critical = append(r.Critical, f.Rule)
		}
	}
	return r, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
