package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	historypb "go.temporal.io/api/history/v1"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal/follow"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// temporalFlags are serve's flags for following Temporal clusters
// (--temporal), named as Temporal's own CLI names them, prefixed
// --temporal-. The TLS and API key flags apply to every target.
type temporalFlags struct {
	targets                                       []string
	tls                                           optionalBool
	certPath, keyPath, caPath, serverName, apiKey string
	lookback, pollInterval                        time.Duration
	maxRuns                                       int
}

// maxTemporalRuns bounds --temporal-max-runs: each long-polled run keeps
// its history in memory (up to Temporal's 51,200 events).
const maxTemporalRuns = 10000

func (f *temporalFlags) register(fs *flag.FlagSet) {
	fs.Func("temporal", "follow a Temporal cluster through its frontend gRPC API: HOST:PORT[/NAMESPACE] (namespace default: default); "+
		"its running and recently closed workflow runs become executions (repeatable; see docs/configuration.md § Following Temporal)", func(v string) error {
		f.targets = append(f.targets, v)
		return nil
	})
	fs.Var(&f.tls, "temporal-tls", "with --temporal: connect with TLS; on by default when a --temporal-tls-* flag or an API key is given (--temporal-tls=false turns it off)")
	fs.StringVar(&f.certPath, "temporal-tls-cert-path", "", "with --temporal: the client certificate (PEM) for mTLS; needs --temporal-tls-key-path")
	fs.StringVar(&f.keyPath, "temporal-tls-key-path", "", "with --temporal: the client certificate's private key (PEM)")
	fs.StringVar(&f.caPath, "temporal-tls-ca-path", "", "with --temporal: the CA certificate (PEM) the server's must chain to (default: the system's)")
	fs.StringVar(&f.serverName, "temporal-tls-server-name", "", "with --temporal: the server name TLS verifies (default: the target's host)")
	fs.StringVar(&f.apiKey, "temporal-api-key", envOr("ONCETRACE_TEMPORAL_API_KEY", ""), "with --temporal: an API key sent as a bearer token, e.g. Temporal Cloud's (env ONCETRACE_TEMPORAL_API_KEY; prefer it to the flag, which other users can see)")
	fs.DurationVar(&f.lookback, "temporal-lookback", follow.DefaultLookback, "with --temporal: how far back closed runs are read at start")
	fs.DurationVar(&f.pollInterval, "temporal-poll-interval", follow.DefaultPollInterval, "with --temporal: the time between listings of the runs (open runs' histories are long-polled in between)")
	fs.IntVar(&f.maxRuns, "temporal-max-runs", follow.DefaultMaxRuns, "with --temporal: how many open runs are long-polled at once, each holding its history in memory; the others are read at each listing")
}

// config checks the flags and builds the targets, reading the TLS files
// now, so that a wrong path fails the start.
func (f *temporalFlags) config() ([]follow.Target, error) {
	if len(f.targets) == 0 {
		for _, flag := range []struct {
			name string
			set  bool
		}{{"--temporal-tls", f.tls.set}, {"--temporal-tls-cert-path", f.certPath != ""}, {"--temporal-tls-key-path", f.keyPath != ""},
			{"--temporal-tls-ca-path", f.caPath != ""}, {"--temporal-tls-server-name", f.serverName != ""}} {
			if flag.set {
				return nil, fmt.Errorf("serve: %s: needs --temporal", flag.name)
			}
		}
		return nil, nil
	}
	switch {
	case f.lookback <= 0:
		return nil, fmt.Errorf("serve: --temporal-lookback: %s is not positive", f.lookback)
	case f.pollInterval < 100*time.Millisecond || f.pollInterval > time.Hour:
		return nil, fmt.Errorf("serve: --temporal-poll-interval: %s is outside 100ms to 1h", f.pollInterval)
	case f.maxRuns < 1 || f.maxRuns > maxTemporalRuns:
		return nil, fmt.Errorf("serve: --temporal-max-runs: %d is outside 1 to %d", f.maxRuns, maxTemporalRuns)
	}
	tlsConfig, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	var targets []follow.Target
	seen := map[string]bool{}
	for _, v := range f.targets {
		t, err := follow.ParseTarget(v)
		if err != nil {
			return nil, fmt.Errorf("serve: --temporal %w", err)
		}
		if seen[t.String()] {
			return nil, fmt.Errorf("serve: --temporal %q: given twice", t.String())
		}
		seen[t.String()] = true
		t.TLS, t.APIKey = tlsConfig, f.apiKey
		targets = append(targets, t)
	}
	return targets, nil
}

// tlsConfig is nil for plaintext. As in Temporal's CLI, TLS is on when
// asked for, or when any TLS option or an API key is given and it was not
// turned off.
func (f *temporalFlags) tlsConfig() (*tls.Config, error) {
	options := f.certPath != "" || f.keyPath != "" || f.caPath != "" || f.serverName != ""
	on := f.tls.value
	if !f.tls.set {
		on = options || f.apiKey != ""
	}
	if !on {
		if options {
			return nil, fmt.Errorf("serve: --temporal-tls=false with TLS options (--temporal-tls-*): leave one out")
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if (f.certPath == "") != (f.keyPath == "") {
		return nil, fmt.Errorf("serve: --temporal-tls-cert-path and --temporal-tls-key-path: give both or neither")
	}
	if f.certPath != "" {
		cert, err := tls.LoadX509KeyPair(f.certPath, f.keyPath)
		if err != nil {
			return nil, fmt.Errorf("serve: --temporal-tls-cert-path, --temporal-tls-key-path: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.caPath != "" {
		pem, err := os.ReadFile(f.caPath)
		if err != nil {
			return nil, fmt.Errorf("serve: --temporal-tls-ca-path: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("serve: --temporal-tls-ca-path %s: no PEM certificate in it", f.caPath)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// optionalBool is a boolean flag that knows whether it was given.
type optionalBool struct{ set, value bool }

func (b *optionalBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	b.set, b.value = true, v
	return nil
}

func (b *optionalBool) IsBoolFlag() bool { return true }

// temporalMapper is what a followed run's history becomes: its execution,
// steps, attempts and failures (package temporal's MapHistory), activities
// classed by --tool-class.
func temporalMapper(lim ingest.Limits, classes ingest.ToolClasses) follow.Mapper {
	return func(h *historypb.History, run follow.Run) ([]trace.Event, error) {
		return temporal.MapHistory(h, temporal.MapOptions{Namespace: run.Namespace, WorkflowID: run.WorkflowID, RunID: run.RunID,
			ToolClasses: classes, Limits: lim})
	}
}

// temporalFollowers are the running followers, one per --temporal.
type temporalFollowers []*follow.Follower

// startTemporal starts a follower per target, writing through w. They run
// in the background; a cluster that cannot be reached delays nothing.
func startTemporal(ctx context.Context, targets []follow.Target, f temporalFlags, w follow.Writer, lim ingest.Limits, classes ingest.ToolClasses, logger *slog.Logger) temporalFollowers {
	var fs temporalFollowers
	for _, t := range targets {
		logger.Info("oncetrace temporal", "target", t.String(), "tls", t.TLS != nil, "api_key", t.APIKey != "",
			"lookback", f.lookback.String(), "max_runs", f.maxRuns)
		fs = append(fs, follow.Start(ctx, follow.Config{Target: t, Map: temporalMapper(lim, classes), Writer: w,
			Lookback: f.lookback, PollInterval: f.pollInterval, MaxRuns: f.maxRuns, Logger: logger}))
	}
	return fs
}

// stop stops every follower and waits for them (before the writer closes).
func (fs temporalFollowers) stop() {
	for _, f := range fs {
		f.Stop()
	}
}

// status is the followers' status for /healthz and /metrics; nil without
// --temporal, so that neither mentions it.
func (fs temporalFollowers) status() func() []web.FollowStatus {
	if len(fs) == 0 {
		return nil
	}
	return func() []web.FollowStatus {
		out := make([]web.FollowStatus, len(fs))
		for i, f := range fs {
			st := f.Status()
			out[i] = web.FollowStatus{Feed: "temporal", Target: st.Target, State: st.State, LastPoll: st.LastPoll, Lag: st.Lag,
				RunsFollowed: st.RunsFollowed, RunsPolled: st.RunsPolled, EventsWritten: st.EventsWritten, Errors: st.Errors}
		}
		return out
	}
}
