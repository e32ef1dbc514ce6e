// Command recordfixtures records the Temporal fixtures under
// ingest/testdata/frameworks/temporal/{naive,crash,keyed}/ for `make
// fixtures` (ingest/testdata/frameworks/gen/README.md § Temporal): it builds
// (or reuses) the cached Temporal CLI, starts a dev server and an `oncetrace
// serve`, plays each scenario through temporaldemo.Run with workers of the
// given oncetrace binary, and keeps what the workers sent (their OTLP
// requests and mail requests, through a recording server in front of the
// sandbox) and the history `temporal workflow show --output json` prints.
// Nothing is written unless every scenario's recording is complete.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal/devserver"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal/temporaldemo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "recordfixtures:", err)
		os.Exit(1)
	}
}

func run() error {
	oncetrace := flag.String("oncetrace", "", "the oncetrace binary whose serve and temporal-worker commands to run (required)")
	out := flag.String("out", "ingest/testdata/frameworks", "the framework fixtures directory; runs go to OUT/temporal/SCENARIO")
	module := flag.String("cli-module", "ingest/feed/temporal/devserver/temporalcli", "the Go module that builds the Temporal CLI")
	only := flag.String("only", "", "comma-separated scenarios to record (default: all): naive, crash, keyed")
	crashGap := flag.Duration("crash-gap", 6*time.Second, "crash: how long after killing worker A worker B starts (over serve's default 5 s --gap-threshold, so that the replayed gap shows)")
	flag.Parse()
	if *oncetrace == "" {
		return fmt.Errorf("--oncetrace is required")
	}
	bin, err := filepath.Abs(*oncetrace)
	if err != nil {
		return err
	}
	scenarios := temporaldemo.Scenarios
	if *only != "" {
		scenarios = nil
		for name := range strings.SplitSeq(*only, ",") {
			if err := temporaldemo.CheckScenario(name); err != nil {
				return fmt.Errorf("--only: %w", err)
			}
			scenarios = append(scenarios, name)
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	cli, err := devserver.Build(ctx, *module, os.Stderr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncetrace-temporal-fixtures-")
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	ds, err := devserver.Run(ctx, cli, devserver.Options{Dir: tmp})
	if err != nil {
		return err
	}
	defer ds.Stop()
	serve, err := startServe(ctx, bin, tmp)
	if err != nil {
		return err
	}
	defer serve.stop()
	rec, err := startRecorder(serve.url)
	if err != nil {
		return err
	}
	defer rec.close()

	recorded := map[string]string{} // scenario -> its directory under tmp
	for _, sc := range scenarios {
		dir := filepath.Join(tmp, "out", sc)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		rec.reset(dir)
		cfg := temporaldemo.Config{
			HostPort: ds.HostPort, Namespace: "default", Scenario: sc,
			MailURL: rec.url + temporaldemo.SandboxSendPath, OTLPURL: rec.url + "/v1/traces",
			Worker: func(args ...string) *exec.Cmd {
				return exec.Command(bin, append([]string{"temporal-worker"}, args...)...)
			},
			Log: os.Stderr,
		}
		if sc == temporaldemo.Crash {
			cfg.Gap = *crashGap
		}
		res, err := temporaldemo.Run(ctx, cfg)
		if err != nil {
			keep = true
			return fmt.Errorf("%s: %w (the dev server's log and the recording so far are in %s)", sc, err, tmp)
		}
		history, err := exec.CommandContext(ctx, cli, "workflow", "show", "--address", ds.HostPort, "--namespace", "default",
			"--workflow-id", res.WorkflowID, "--run-id", res.RunID, "--output", "json").Output()
		if err != nil {
			keep = true
			return fmt.Errorf("%s: temporal workflow show: %w", sc, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "history.json"), history, 0o644); err != nil {
			return err
		}
		reqs, err := rec.finish()
		if err != nil {
			return err
		}
		emails, err := temporaldemo.SandboxEmails(ctx, serve.url, "", res.TraceID)
		if err != nil {
			return err
		}
		m, err := check(dir, res, reqs, emails)
		if err != nil {
			keep = true
			return fmt.Errorf("%s: the recording is incomplete: %w (left in %s)", sc, err, dir)
		}
		if err := writeManifest(dir, m); err != nil {
			return err
		}
		recorded[sc] = dir
		fmt.Fprintf(os.Stderr, "temporal %s: recorded workflow %s run %s: %d OTLP request(s), %d mail request(s), %d email(s)\n",
			sc, res.WorkflowID, res.RunID, m.OTLPRequests, m.MailRequests, emails)
	}
	for _, sc := range slices.Sorted(maps.Keys(recorded)) {
		dst := filepath.Join(*out, "temporal", sc)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyDir(recorded[sc], dst); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "temporal %s: written to %s\n", sc, dst)
	}
	return nil
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
