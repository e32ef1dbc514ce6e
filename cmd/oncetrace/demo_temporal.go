package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal/temporaldemo"
	"github.com/oncetrace/oncetrace/views"
)

// temporalTarget is --temporal HOST:PORT[/NAMESPACE].
type temporalTarget struct{ hostPort, namespace string }

func parseTemporalTarget(s string) (temporalTarget, error) {
	t := temporalTarget{hostPort: s, namespace: "default"}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		t.hostPort, t.namespace = s[:i], s[i+1:]
		if t.namespace == "" {
			return t, fmt.Errorf("--temporal %q: the namespace after / is empty; want HOST:PORT[/NAMESPACE]", s)
		}
	}
	if _, port, err := net.SplitHostPort(t.hostPort); err != nil || port == "" {
		return t, fmt.Errorf("--temporal %q: want HOST:PORT[/NAMESPACE], such as 127.0.0.1:7233/default", s)
	}
	return t, nil
}

// parseTemporalScenarios reads --scenario for --temporal: naive, crash,
// keyed; all of them when empty.
func parseTemporalScenarios(list string) ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if err := temporaldemo.CheckScenario(name); err != nil {
			return nil, fmt.Errorf("demo: --scenario: %w", err)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		names = temporaldemo.Scenarios
	}
	return names, nil
}

// temporalDemoResult is one scenario's run as `demo --temporal` saw it.
type temporalDemoResult struct {
	temporaldemo.Result
	Emails int // the sandbox's deliveries in the workflow's trace
}

// runTemporalDemo runs the article's scenarios as Temporal workflows on
// the user's cluster: workers of this binary (temporal-worker) send the
// email through the sandbox of the oncetrace server o.server names and
// export their spans to it.
func runTemporalDemo(ctx context.Context, o demoOptions, target temporalTarget, scenarios []string) ([]temporalDemoResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: cannot find my own binary to start worker processes: %w", err)
	}
	server := strings.TrimRight(o.server, "/")
	readToken := o.readToken
	if readToken == "" {
		readToken = o.token
	}
	var results []temporalDemoResult
	for _, name := range scenarios {
		cfg := temporaldemo.Config{
			HostPort: target.hostPort, Namespace: target.namespace, Scenario: name,
			MailURL: server + temporaldemo.SandboxSendPath, OTLPURL: server + "/v1/traces", Token: o.token,
			Worker: func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"temporal-worker"}, args...)...)
			},
			Gap: o.gap, Log: o.out,
		}
		if o.runID != "" {
			cfg.WorkflowID = "invoice-" + name + "-" + o.runID
		}
		res, err := temporaldemo.Run(ctx, cfg)
		if err != nil {
			return results, fmt.Errorf("demo: temporal %s: %w", name, err)
		}
		r := temporalDemoResult{Result: res}
		if r.Emails, err = temporaldemo.SandboxEmails(ctx, server, readToken, res.TraceID); err != nil {
			return results, fmt.Errorf("demo: temporal %s: %w", name, err)
		}
		id := res.WorkflowID + "/" + res.RunID
		fmt.Fprintf(o.out, "demo: temporal %-6s %d email(s) sent — %s%s\n", name, r.Emails, server, views.ExecutionURL(id))
		results = append(results, r)
	}
	return results, nil
}

// runTemporalWorker is the hidden "temporal-worker" command: one worker
// process of `demo --temporal` and of the Temporal fixtures. It prints its
// events as JSON lines on stdout and stops on SIGTERM.
func runTemporalWorker(args []string) error {
	fs := flag.NewFlagSet("temporal-worker", flag.ContinueOnError)
	var cfg temporaldemo.WorkerConfig
	fs.StringVar(&cfg.HostPort, "address", "127.0.0.1:7233", "the Temporal frontend")
	fs.StringVar(&cfg.Namespace, "namespace", "default", "the namespace")
	fs.StringVar(&cfg.TaskQueue, "task-queue", "", "the task queue to poll")
	fs.StringVar(&cfg.Scenario, "scenario", "", "naive, crash or keyed")
	fs.StringVar(&cfg.MailURL, "mail-url", "", "the sandbox's send URL")
	fs.StringVar(&cfg.OTLPURL, "otlp-url", "", "the OTLP/HTTP traces URL")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := refuseArguments("temporal-worker", fs); err != nil {
		return err
	}
	cfg.Token = os.Getenv("ONCETRACE_INGEST_TOKEN")
	cfg.Out, cfg.Log = os.Stdout, os.Stderr
	ctx, cancel := signalContext()
	defer cancel()
	return temporaldemo.RunWorker(ctx, cfg)
}
