package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
)

// chaos runs a user's agent command under fault injection, one fault at
// one side-effecting call at a time, and reports which calls are unsafe
// to retry (docs/chaos.md). The verdict comes from the effects the
// recording proxies saw, so it needs no instrumentation; the audit's
// findings are added when the agent exports traces or events.

// Outcomes of a fault run.
const (
	chaosSafe      = "safe"
	chaosDuplicate = "duplicate"
	chaosLost      = "lost"
	chaosFailed    = "agent failed"
	// chaosNotReached: the run made fewer unsafe requests than the call
	// site's number, so the fault never struck and nothing was proven.
	chaosNotReached = "not reached"
)

// chaosDefaultLatency is the delay of a bare "latency" in --faults: longer
// than most clients' per-request timeout in a test, so it reaches them.
const chaosDefaultLatency = 5 * time.Second

// How an upstream speaks MCP (chaosUpstream.mcp).
const (
	chaosMCPHTTP  = "streamable-http" // --upstream NAME=URL --mcp NAME
	chaosMCPStdio = "stdio"           // --mcp-stdio NAME='CMD ARGS'
)

type chaosUpstream struct {
	name, url string
	// mcp is "" for an HTTP API, else how the MCP server is reached:
	// chaosMCPHTTP or chaosMCPStdio.
	mcp string
	// command is a stdio MCP server's command line (--mcp-stdio).
	command []string
}

// provider is what the upstream's effects name: NAME lower-cased.
func (u chaosUpstream) provider() string { return strings.ToLower(u.name) }

// envName is the variable the command finds the proxy in: its URL, or
// for a stdio MCP server the command line that launches it.
func (u chaosUpstream) envName() string {
	if u.mcp == chaosMCPStdio {
		return "ONCETRACE_MCP_" + strings.ToUpper(u.name) + "_COMMAND"
	}
	return "ONCETRACE_UPSTREAM_" + strings.ToUpper(u.name)
}

type chaosOptions struct {
	upstreams []chaosUpstream
	faults    []sandbox.Fault
	server    string // an external oncetrace server; "" for an embedded one per run
	token     string // the external server's ingest (and read) token
	env       []string
	timeout   time.Duration
	json      bool
	keep      string
	demo      bool
	faultsSet bool            // --faults was given; --demo has faults of its own otherwise
	spanMaps  spanMapFlags    // spanmap.go: --span-map, for the embedded servers
	spanMap   *ingest.SpanMap // nil: the built-in one
	command   []string
}

var chaosNameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// upstream is the upstream named name (case-insensitively), or nil.
func (o *chaosOptions) upstream(name string) *chaosUpstream {
	for i := range o.upstreams {
		if strings.EqualFold(o.upstreams[i].name, name) {
			return &o.upstreams[i]
		}
	}
	return nil
}

func chaosFlags(args []string, errOut io.Writer) (chaosOptions, error) {
	o := chaosOptions{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprint(errOut, "Usage: oncetrace chaos [flags] -- COMMAND [ARGS...]\n\n"+
			"Runs COMMAND once without faults, then once per unsafe request and fault with that fault striking that request only,\n"+
			"and reports the calls that are not safe to retry. Exit 1 when one duplicated or lost its effect. See docs/chaos.md.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.Func("upstream", "NAME=URL: an API the command calls; it gets ONCETRACE_UPSTREAM_<NAME> = a recording proxy's URL in front of URL (repeatable; NAME is letters, digits, _; the effects' provider is NAME lower-cased)", func(v string) error {
		name, raw, ok := strings.Cut(v, "=")
		if !ok || !chaosNameRE.MatchString(name) {
			return fmt.Errorf("want NAME=URL with NAME 1 to 64 letters, digits or _, e.g. stripe=https://api.stripe.com")
		}
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q: the URL must be an http or https URL", v)
		}
		if o.upstream(name) != nil {
			return fmt.Errorf("%q: upstream %s given twice", v, name)
		}
		o.upstreams = append(o.upstreams, chaosUpstream{name: name, url: raw})
		return nil
	})
	var mcpNames []string
	fs.Func("mcp", "NAME: the --upstream NAME is an MCP server over Streamable HTTP; its call sites are the tools/call messages of tools not annotated read-only (repeatable)", func(v string) error {
		mcpNames = append(mcpNames, v)
		return nil
	})
	fs.Func("mcp-stdio", "NAME='CMD ARGS': a stdio MCP server the command launches; it gets ONCETRACE_MCP_<NAME>_COMMAND, a command line that runs oncetrace mcp-stdio around CMD ARGS (repeatable)", func(v string) error {
		name, line, ok := strings.Cut(v, "=")
		if !ok || !chaosNameRE.MatchString(name) {
			return fmt.Errorf("want NAME='CMD ARGS' with NAME 1 to 64 letters, digits or _, e.g. invoices='node server.mjs'")
		}
		command, err := shellWords(line)
		if err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
		if len(command) == 0 {
			return fmt.Errorf("%q: no command: give the server's command line, e.g. invoices='node server.mjs'", v)
		}
		if o.upstream(name) != nil {
			return fmt.Errorf("%q: upstream %s given twice", v, name)
		}
		o.upstreams = append(o.upstreams, chaosUpstream{name: name, mcp: chaosMCPStdio, command: command})
		return nil
	})
	faults := fs.String("faults", "lose-response", "the faults to inject, comma-separated: lose-response, fail-before, latency (5s; latency=DURATION for another delay)")
	fs.StringVar(&o.server, "server", "", "an oncetrace server that receives every run's effects and traces (default: an embedded server on a fresh database per run)")
	fs.StringVar(&o.token, "token", envOr("ONCETRACE_INGEST_TOKEN", ""), "with --server: its ingest token, also sent on reads (env ONCETRACE_INGEST_TOKEN)")
	fs.Func("env", "KEY=VALUE: set in the command's environment (repeatable)", func(v string) error {
		k, _, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want KEY=VALUE", v)
		}
		o.env = append(o.env, v)
		return nil
	})
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long one run may take; then its process group is killed and the run reported as agent failed")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON (docs/chaos.md)")
	fs.StringVar(&o.keep, "keep", "", "keep each run's database and output in this directory (default: a temporary directory, removed at the end)")
	fs.BoolVar(&o.demo, "demo", false, "run chaos against the built-in demo agent, naive and keyed, with the sandbox mail API as upstream")
	o.spanMaps.register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.command = fs.Args()
	fs.Visit(func(f *flag.Flag) { o.faultsSet = o.faultsSet || f.Name == "faults" })
	for _, name := range mcpNames {
		u := o.upstream(name)
		switch {
		case u == nil:
			return o, fmt.Errorf("chaos: --mcp %s: no --upstream %s=URL to say it of: --mcp names an upstream given with --upstream", name, name)
		case u.mcp == chaosMCPStdio:
			return o, fmt.Errorf("chaos: --mcp %s: %s is a --mcp-stdio server; --mcp is for a Streamable HTTP one given with --upstream", name, name)
		}
		u.mcp = chaosMCPHTTP
	}
	var err error
	if o.faults, err = parseChaosFaults(*faults); err != nil {
		return o, fmt.Errorf("chaos: --faults: %w", err)
	}
	if o.timeout <= 0 {
		return o, errors.New("chaos: --timeout must be positive")
	}
	if o.spanMap, err = o.spanMaps.spanMap("chaos"); err != nil {
		return o, err
	}
	if o.spanMap != nil && o.server != "" {
		return o, errors.New("chaos: --span-map applies to the embedded servers; give it to the --server's serve instead")
	}
	if o.server != "" {
		if u, err := url.Parse(o.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, fmt.Errorf("chaos: --server %q: must be an http or https URL such as http://127.0.0.1:8080", o.server)
		}
		o.server = strings.TrimRight(o.server, "/")
	}
	if o.demo {
		if len(o.upstreams) > 0 || len(o.command) > 0 {
			return o, errors.New("chaos: --demo runs the built-in demo agent: give no --upstream, --mcp-stdio or command with it")
		}
		return o, nil
	}
	if len(o.upstreams) == 0 {
		return o, errors.New("chaos: --upstream NAME=URL is required (the API the command calls), e.g. --upstream stripe=https://api.stripe.com, or --mcp-stdio NAME='CMD ARGS' for a stdio MCP server")
	}
	if len(o.command) == 0 {
		return o, errors.New("chaos: no command to run: give it after --, e.g. oncetrace chaos --upstream stripe=https://api.stripe.com -- python agent.py")
	}
	return o, nil
}

// parseChaosFaults reads --faults: each fault at most once, struck with
// certainty at its one request.
func parseChaosFaults(spec string) ([]sandbox.Fault, error) {
	var out []sandbox.Fault
	seen := map[sandbox.FaultKind]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if item == string(sandbox.Latency) {
			item += "=" + chaosDefaultLatency.String()
		}
		kind, _, _ := strings.Cut(item, "=")
		switch sandbox.FaultKind(kind) {
		case sandbox.LoseResponse, sandbox.FailBefore, sandbox.Latency:
		default:
			return nil, fmt.Errorf("unknown fault %q: want lose-response, fail-before or latency (latency=DURATION)", item)
		}
		if strings.Contains(item, ";") {
			return nil, fmt.Errorf("fault %q: no options here; chaos strikes each fault at one request with certainty", item)
		}
		f, err := sandbox.ParseFaults(item)
		if err != nil {
			return nil, err
		}
		if seen[f[0].Kind] {
			return nil, fmt.Errorf("fault %s given twice", f[0].Kind)
		}
		seen[f[0].Kind] = true
		out = append(out, f[0])
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one fault: lose-response, fail-before or latency")
	}
	return out, nil
}

// faultName is a fault as the report names it.
func faultName(f sandbox.Fault) string {
	if f.Kind == sandbox.Latency && f.Delay != chaosDefaultLatency {
		return f.String()
	}
	return string(f.Kind)
}

// runChaosCommand is the "chaos" command. failed is true when a call site
// duplicated or lost its effect (exit 1); an error is a usage or setup
// error, or an agent that fails without faults (exit 2).
func runChaosCommand(args []string, out, errOut io.Writer) (failed bool, err error) {
	o, err := chaosFlags(args, errOut)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, err
	}
	ctx, stop := signalContext()
	defer stop()
	if o.demo {
		return runChaosDemo(ctx, o, out, errOut)
	}
	report, err := runChaos(ctx, o, errOut)
	if err != nil {
		return false, err
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return report.Failed, enc.Encode(report)
	}
	report.print(out)
	return report.Failed, nil
}

// chaosReport is what chaos found; --json prints it as it is.
type chaosReport struct {
	Command []string `json:"command"`
	// Server is the external server's URL, or "embedded".
	Server    string              `json:"server"`
	Faults    []string            `json:"faults"`
	Upstreams []chaosUpstreamJSON `json:"upstreams"`
	Baseline  chaosRun            `json:"baseline"`
	CallSites []chaosCallSite     `json:"call_sites"`
	Runs      []chaosRun          `json:"runs"`
	Summary   chaosSummary        `json:"summary"`
	// Failed is true when any call site duplicated or lost: the exit code 1.
	Failed bool `json:"failed"`
	// Kept is --keep: where the runs' databases and output are.
	Kept string `json:"kept,omitempty"`
}

type chaosUpstreamJSON struct {
	Name     string `json:"name"`
	URL      string `json:"url,omitempty"`
	Provider string `json:"provider"`
	Env      string `json:"env"`
	// MCP is how an MCP server is reached: "streamable-http" or "stdio".
	MCP string `json:"mcp,omitempty"`
	// Command is a stdio MCP server's own command line.
	Command []string `json:"command,omitempty"`
}

// chaosCallSite is one unsafe request of the baseline run, in order
// across all upstreams: an HTTP request, or an MCP tools/call (Method
// "tools/call", no path, the tool named).
type chaosCallSite struct {
	N        int    `json:"n"`
	Upstream string `json:"upstream"`
	Method   string `json:"method"`
	Path     string `json:"path,omitempty"`
	Step     string `json:"step,omitempty"`
	Tool     string `json:"tool,omitempty"`
}

// call names the call site as the agent made it: POST /v1/charges, or
// tools/call send_invoice_email.
func (s chaosCallSite) call() string {
	if s.Method == mcpToolsCall {
		return s.Method + " " + s.Tool
	}
	return s.Method + " " + s.Path
}

// stepText is the step that made the call, and its tool when the call
// does not name it already.
func (s chaosCallSite) stepText() string {
	if s.Tool == "" || s.Method == mcpToolsCall {
		return s.Step
	}
	return strings.TrimSpace(s.Step + " " + s.Tool)
}

type chaosSummary struct {
	Runs        int `json:"runs"`
	Safe        int `json:"safe"`
	Duplicate   int `json:"duplicate"`
	Lost        int `json:"lost"`
	AgentFailed int `json:"agent_failed"`
	NotReached  int `json:"not_reached"`
}

// chaosRun is one run of the command.
type chaosRun struct {
	// Run is "baseline" or CALLSITE-FAULT, as ONCETRACE_CHAOS_RUN says.
	Run      string `json:"run"`
	CallSite int    `json:"call_site,omitempty"`
	Fault    string `json:"fault,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	// Struck is false when the run made fewer unsafe requests than its call
	// site's number: the fault never struck.
	Struck   bool   `json:"struck"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out"`
	Note     string `json:"note,omitempty"`
	// UnsafeRequests counts the unsafe requests the proxies saw.
	UnsafeRequests int `json:"unsafe_requests"`
	// Effects counts distinct effects by upstream name; BaselineEffects
	// the baseline's, for comparison.
	Effects         map[string]int   `json:"effects"`
	BaselineEffects map[string]int   `json:"baseline_effects,omitempty"`
	Executions      []chaosExecution `json:"executions"`
	Findings        []chaosFinding   `json:"findings"`
	// Database is the run's own database with --keep (embedded server).
	Database   string  `json:"database,omitempty"`
	Output     string  `json:"output,omitempty"` // the file holding its stdout and stderr, with --keep
	StderrTail string  `json:"stderr_tail,omitempty"`
	Seconds    float64 `json:"seconds"`
}

// chaosExecution is an execution the run's trace or events named.
type chaosExecution struct {
	ID   string `json:"execution_id"`
	Path string `json:"path"`          // its page on the run's server
	URL  string `json:"url,omitempty"` // the page's URL, on an external server
	// EarlierEvents: on a shared server, the execution had events from
	// before the run, so its findings are not only this run's.
	EarlierEvents bool `json:"earlier_events,omitempty"`
}

// chaosFinding is a critical finding of one of the run's executions.
type chaosFinding struct {
	Rule        string `json:"rule"`
	ExecutionID string `json:"execution_id"`
	Step        string `json:"step,omitempty"`
	Message     string `json:"message"`
}

// verdict decides a fault run's outcome from effects and the exit code
// alone: an extra effect happened even if the agent then failed.
func verdict(run, baseline map[string]int, exitCode int) string {
	fewer := false
	for name, n := range baseline {
		if run[name] < n {
			fewer = true
		}
	}
	for name, n := range run {
		if n > baseline[name] {
			return chaosDuplicate
		}
	}
	if exitCode != 0 {
		return chaosFailed
	}
	if fewer {
		return chaosLost
	}
	return chaosSafe
}

func (r *chaosReport) summarize() {
	r.Summary = chaosSummary{Runs: len(r.Runs)}
	for _, run := range r.Runs {
		switch run.Outcome {
		case chaosSafe:
			r.Summary.Safe++
		case chaosDuplicate:
			r.Summary.Duplicate++
		case chaosLost:
			r.Summary.Lost++
		case chaosFailed:
			r.Summary.AgentFailed++
		case chaosNotReached:
			r.Summary.NotReached++
		}
	}
	r.Failed = r.Summary.Duplicate+r.Summary.Lost > 0
}

// effectsText is "stripe 2" or "mail 1, stripe 2" for one run.
func (r *chaosReport) effectsText(effects map[string]int) string {
	var parts []string
	for _, u := range r.Upstreams {
		n := effects[u.Name]
		if len(r.Upstreams) == 1 {
			return fmt.Sprint(n)
		}
		parts = append(parts, fmt.Sprintf("%s %d", u.Name, n))
	}
	return strings.Join(parts, ", ")
}

// print writes the report as a table, then its findings and links, then a
// one-line summary.
func (r *chaosReport) print(out io.Writer) {
	fmt.Fprintf(out, "baseline: %d unsafe request(s), effects %s, exit 0 (%.2fs)\n\n", len(r.CallSites), r.effectsText(r.Baseline.Effects), r.Baseline.Seconds)
	rows := [][]string{{"#", "UPSTREAM", "CALL", "STEP", "FAULT", "OUTCOME", "EFFECTS", "RUN"}}
	for _, run := range r.Runs {
		site := r.CallSites[run.CallSite-1]
		outcome := run.Outcome
		if run.Note != "" {
			outcome += " (" + run.Note + ")"
		}
		rows = append(rows, []string{fmt.Sprint(site.N), site.Upstream, site.call(), cmpOrDash(site.stepText()), run.Fault, outcome,
			r.effectsText(run.Effects) + "/" + r.effectsText(r.Baseline.Effects), run.Run})
	}
	writeTable(out, rows)
	var details []string
	for _, run := range append([]chaosRun{r.Baseline}, r.Runs...) {
		var lines []string
		for _, f := range run.Findings {
			where := f.ExecutionID
			if f.Step != "" {
				where += " " + f.Step
			}
			lines = append(lines, fmt.Sprintf("  CRITICAL %s %s: %s", f.Rule, where, f.Message))
		}
		for _, x := range run.Executions {
			link := x.URL
			if link == "" {
				link = x.Path
				if run.Database != "" {
					link += "  (oncetrace serve --db " + run.Database + ")"
				}
			}
			line := "  execution " + x.ID + ": " + link
			if x.EarlierEvents {
				line += "  — it had events from before this run: its findings are not only this run's"
			}
			lines = append(lines, line)
		}
		if run.Outcome == chaosFailed && run.StderrTail != "" {
			lines = append(lines, "  stderr: "+strings.ReplaceAll(lastLines(run.StderrTail, 3), "\n", "\n          "))
		}
		if len(lines) > 0 {
			details = append(details, run.Run+":\n"+strings.Join(lines, "\n"))
		}
	}
	if len(details) > 0 {
		fmt.Fprintf(out, "\n%s\n", strings.Join(details, "\n"))
	}
	if r.Server == "embedded" && r.Kept == "" && slices.ContainsFunc(append(r.Runs, r.Baseline), func(run chaosRun) bool { return len(run.Executions) > 0 }) {
		fmt.Fprintln(out, "(each run had a database of its own, removed now: --keep DIR keeps them, to browse with oncetrace serve --db DIR/RUN.db)")
	}
	fmt.Fprintf(out, "\n%s\n", r.summaryLine())
}

func (r *chaosReport) summaryLine() string {
	s := r.Summary
	line := fmt.Sprintf("%d call site(s) × %d fault(s): %d safe, %d duplicate, %d lost, %d agent failed", len(r.CallSites), len(r.Faults),
		s.Safe, s.Duplicate, s.Lost, s.AgentFailed)
	if s.NotReached > 0 {
		line += fmt.Sprintf(", %d not reached", s.NotReached)
	}
	if r.Failed {
		return "FAIL " + line + ": a fault made the agent act twice or not at all"
	}
	return "ok   " + line
}

func cmpOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeTable writes rows in columns two spaces apart.
func writeTable(out io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(cell))+2))
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// keepDir is the directory the runs' files go to: --keep, else a new
// temporary one that cleanup removes.
func keepDir(keep string) (dir string, cleanup func(), err error) {
	if keep != "" {
		if err := os.MkdirAll(keep, 0o755); err != nil {
			return "", nil, fmt.Errorf("chaos: --keep: %w", err)
		}
		return keep, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "oncetrace-chaos-")
	if err != nil {
		return "", nil, fmt.Errorf("chaos: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
