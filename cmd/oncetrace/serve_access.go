package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/ingest/writer/alert"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

// accessFlags are serve's flags for who may read (--read-token, the login
// session) and whom it tells about critical findings (--alert-webhook).
type accessFlags struct {
	readToken    string
	sessionTTL   time.Duration
	alertWebhook string
	publicURL    string
}

func (a *accessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.readToken, "read-token", envOr("ONCETRACE_READ_TOKEN", ""),
		"token reads need (the UI through its login form, GET /api/v1/*, the live stream and WebSocket, /sandbox/log, /metrics) as Authorization: Bearer; "+
			"on a non-loopback --addr the ingest token protects reads when this is unset (env ONCETRACE_READ_TOKEN)")
	fs.DurationVar(&a.sessionTTL, "session-ttl", web.DefaultSessionTTL, "how long a login through the form lasts")
	fs.StringVar(&a.alertWebhook, "alert-webhook", envOr("ONCETRACE_ALERT_WEBHOOK", ""),
		"post a JSON message (Slack-compatible text, and the finding) to this URL once per new critical finding (env ONCETRACE_ALERT_WEBHOOK)")
	fs.StringVar(&a.publicURL, "public-url", envOr("ONCETRACE_PUBLIC_URL", ""),
		"the address people reach the UI at, e.g. https://oncetrace.example.com, for links in alerts (env ONCETRACE_PUBLIC_URL)")
}

func (a *accessFlags) check() error {
	if a.alertWebhook != "" {
		if err := checkHTTPURL(a.alertWebhook); err != nil {
			return fmt.Errorf("serve: --alert-webhook: %w", err)
		}
	}
	if a.publicURL != "" {
		if err := checkHTTPURL(a.publicURL); err != nil {
			return fmt.Errorf("serve: --public-url: %w", err)
		}
	}
	if a.sessionTTL <= 0 {
		return fmt.Errorf("serve: --session-ttl must be positive, not %s", a.sessionTTL)
	}
	return nil
}

func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL", raw)
	}
	return nil
}

// isLoopbackAddr reports whether a listen address is reachable from this
// machine only: localhost or a loopback IP. An empty host (":8080") listens
// on every interface.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// auth is the server's read protection: exposed when --addr is not
// loopback, where the ingest token also protects reads unless --read-token
// names another. --otlp-addr serves only the OTLP write paths, so it does
// not expose reads.
func (c serveConfig) auth() web.AuthConfig {
	return web.AuthConfig{ReadToken: c.access.readToken, Exposed: !isLoopbackAddr(c.addr), SessionTTL: c.access.sessionTTL}
}

// effectiveReadToken is the token reads need, or "" when they are open:
// what the demo must send to read its results back.
func (c serveConfig) effectiveReadToken() string { return c.auth().Token(c.token) }

// warnInsecure prints, when --insecure is given, what it leaves open: in
// capitals, on stderr as well as in the log, since it is the one line an
// operator must not miss.
func warnInsecure(c serveConfig, stderr io.Writer, logger *slog.Logger) {
	if !c.insecure {
		return
	}
	var open []string
	exposed := !isLoopbackAddr(c.addr)
	if exposed && c.token == "" {
		open = append(open, "anyone who reaches "+c.addr+" can WRITE traces, send sandbox mail and change sandbox faults")
	}
	if exposed && c.effectiveReadToken() == "" {
		open = append(open, "anyone who reaches "+c.addr+" can READ every trace (customers' emails, tool arguments), the live feed and /metrics")
	}
	if c.otlpAddr != "" && !isLoopbackAddr(c.otlpAddr) && c.token == "" {
		open = append(open, "anyone who reaches "+c.otlpAddr+" can write traces over OTLP")
	}
	if c.smtpAddr != "" && !isLoopbackAddr(c.smtpAddr) && c.token == "" {
		open = append(open, "anyone who reaches "+c.smtpAddr+" can record mail over SMTP")
	}
	for _, t := range c.taps {
		if !isLoopbackAddr(t.listen) { // a tap has no authentication, token or not
			open = append(open, "anyone who reaches "+t.listen+" can send requests through the tap to "+t.upstream)
		}
	}
	if len(open) == 0 {
		logger.Warn("--insecure given but changes nothing: every listener is loopback or protected by a token")
		return
	}
	bar := strings.Repeat("!", 78)
	fmt.Fprintf(stderr, "%s\n!!! WARNING: --insecure: this server is open to the network without a token.\n", bar)
	for _, o := range open {
		fmt.Fprintf(stderr, "!!!   - %s\n", o)
	}
	// Worded apart from the refusal without --insecure, which names the
	// token flags.
	fmt.Fprintf(stderr, "!!! Give it a token, or listen on 127.0.0.1: see docs/security.md.\n%s\n", bar)
	logger.Warn("INSECURE: serving to the network without a token", "open", strings.Join(open, "; "))
}

// startAlerts starts the alert webhook's notifier, or returns nil without
// --alert-webhook. Links in alerts need --public-url.
func startAlerts(a accessFlags, logger *slog.Logger) *alert.Notifier {
	if a.alertWebhook == "" {
		return nil
	}
	cfg := alert.Config{URL: a.alertWebhook, Logger: logger}
	if base := strings.TrimRight(a.publicURL, "/"); base != "" {
		cfg.ExecutionURL = func(id string) string { return base + views.ExecutionURL(id) }
	}
	return alert.New(cfg)
}

// stopAlerts delivers what is queued for up to 5 s, then gives up on the rest.
func stopAlerts(n *alert.Notifier) {
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.Close(ctx)
}

// withAlerts makes the writer's OnCommit also hand each commit's new
// critical findings to the notifier (which queues them and returns), and
// shows the notifier's counters in metrics.
func withAlerts(onCommit func(writer.Commit), alerts *alert.Notifier, metrics *web.Metrics) func(writer.Commit) {
	if alerts == nil {
		return onCommit
	}
	metrics.WatchAlerts(alerts)
	return func(cm writer.Commit) {
		if onCommit != nil {
			onCommit(cm)
		}
		alerts.Notify(cm.NewCritical)
	}
}
