package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/trace"
)

// chaosDemoVariants are the demo agent's variants chaos --demo runs: the
// article's naive agent and the one that keys its send.
var chaosDemoVariants = []struct{ name, what string }{
	{"naive", "the demo agent retries a timed-out send without an idempotency key"},
	{"keyed", "the demo agent retries with the same idempotency key, derived from execution, step and arguments"},
}

// chaosDemoFaults are --demo's faults unless --faults is given.
const chaosDemoFaults = "lose-response,fail-before,latency"

// runChaosDemo runs chaos against the built-in demo agent, naive then
// keyed, with the sandbox mail API as its upstream. It fails (exit 1) only
// when the demo does not come out as it should: naive duplicate, keyed
// safe.
func runChaosDemo(ctx context.Context, o chaosOptions, out, errOut io.Writer) (bool, error) {
	exe, err := os.Executable()
	if err != nil {
		return false, fmt.Errorf("chaos: --demo: cannot find my own binary to run the demo agent: %w", err)
	}
	if !o.faultsSet {
		o.faults, _ = parseChaosFaults(chaosDemoFaults)
	}
	mail, err := startChaosSandbox()
	if err != nil {
		return false, err
	}
	defer mail.stop()
	reports := map[string]*chaosReport{}
	asExpected := true
	for i, v := range chaosDemoVariants {
		vo := o
		vo.demo = false
		vo.upstreams = []chaosUpstream{{name: "mail", url: mail.url}}
		vo.command = []string{exe, "chaos-demo-agent", "--variant", v.name}
		if o.keep != "" {
			vo.keep = filepath.Join(o.keep, v.name)
		}
		fmt.Fprintf(errOut, "chaos: --demo %s: %s\n", v.name, v.what)
		report, err := runChaos(ctx, vo, errOut)
		if err != nil {
			return false, fmt.Errorf("chaos: --demo %s: %w", v.name, err)
		}
		reports[v.name] = report
		duplicated := report.Summary.Duplicate > 0
		asExpected = asExpected && (v.name == "naive") == duplicated && (v.name == "naive" || report.Summary.Safe == report.Summary.Runs)
		if o.json {
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "== %s: %s\n$ %s\n\n", v.name, v.what, strings.Join(append([]string{"oncetrace chaos --upstream mail=" + mail.url + " --"},
			"oncetrace", "chaos-demo-agent", "--variant", v.name), " "))
		report.print(out)
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return false, err
		}
	}
	if !asExpected {
		fmt.Fprintln(errOut, "chaos: --demo: the demo did not come out as it should (naive duplicate, keyed safe)")
	}
	return !asExpected, nil
}

// chaosSandbox is the sandbox mail API on its own loopback port: the
// demo's provider, whose key store outlives every run, as a real
// provider's does.
type chaosSandbox struct {
	url    string
	server *http.Server
	served chan struct{}
}

// discardEffects is the sandbox's recorder in the demo: the recording
// proxies in front of it count and record the effects.
type discardEffects struct{}

func (discardEffects) RecordEffect(context.Context, trace.Effect) error { return nil }

func startChaosSandbox() (*chaosSandbox, error) {
	sb := sandbox.New(sandbox.Config{Recorder: discardEffects{}, Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+sandboxSendPath, sb.ServeSend)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: --demo: %w", err)
	}
	s := &chaosSandbox{url: "http://" + ln.Addr().String(), served: make(chan struct{}),
		server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.served)
		s.server.Serve(ln)
	}()
	return s, nil
}

func (s *chaosSandbox) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.server.Shutdown(ctx) != nil {
		s.server.Close()
	}
	<-s.served
}

// runChaosDemoAgent is the hidden "chaos-demo-agent" command: the demo
// agent of demo_agent.go as a user's agent would run under chaos, reading
// the server and the mail API's URL from chaos's environment.
func runChaosDemoAgent(args []string) error {
	fs := flag.NewFlagSet("chaos-demo-agent", flag.ContinueOnError)
	variant := fs.String("variant", "naive", "naive or keyed")
	// Twice the demo's own: a loaded machine must not time out a send
	// that no fault struck.
	timeout := fs.Duration("timeout", 2*time.Second, "per attempt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := refuseArguments("chaos-demo-agent", fs); err != nil {
		return err
	}
	if !slices.ContainsFunc(chaosDemoVariants, func(v struct{ name, what string }) bool { return v.name == *variant }) {
		return fmt.Errorf("chaos-demo-agent: --variant %q: want naive or keyed", *variant)
	}
	server, mail := os.Getenv("ONCETRACE_URL"), os.Getenv("ONCETRACE_UPSTREAM_MAIL")
	if server == "" || mail == "" {
		return errors.New("chaos-demo-agent: ONCETRACE_URL and ONCETRACE_UPSTREAM_MAIL must be set; oncetrace chaos --demo sets them")
	}
	dir, err := os.MkdirTemp("", "oncetrace-chaos-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A new execution id each run: the provider keeps keys across runs,
	// and the key is derived from the execution.
	id := fmt.Sprintf("chaos-%s-%s-%s", *variant, os.Getenv("ONCETRACE_CHAOS_RUN"), time.Now().UTC().Format("150405.000000"))
	j, err := openJournal(filepath.Join(dir, "journal.json"))
	if err != nil {
		return err
	}
	a := newAgent(server, os.Getenv("ONCETRACE_INGEST_TOKEN"), id, "chaos-"+*variant, *timeout)
	a.mailURL, a.mailProvider = strings.TrimRight(mail, "/")+sandboxSendPath, "mail"
	a.useKey, a.recordResults, a.journal = *variant == "keyed", *variant == "keyed", j
	ctx, cancel := signalContext()
	defer cancel()
	return a.run(ctx)
}
