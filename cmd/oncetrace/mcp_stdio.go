package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// mcpStdioOptions configure mcp-stdio: a stdio MCP server run as a child,
// its messages relayed and recorded (docs/mcp.md § stdio servers).
type mcpStdioOptions struct {
	provider, server, token string
	effectIDPointer         string
	keyMeta, keyArg         string
	faults                  []sandbox.Fault
	queueDir                string
	queueMaxBytes           int64
	recordTimeout           time.Duration
	maxLineBytes            int
	fingerprintIgnore       fingerprintIgnore
	command                 []string // CMD ARGS…
}

// mcpQueueSlots bounds the queue directories mcp-stdio processes of one
// provider take at once: one each, as a client launches one per session.
const mcpQueueSlots = 64

func mcpStdioFlags(args []string) (mcpStdioOptions, error) {
	o := mcpStdioOptions{}
	fs := flag.NewFlagSet("mcp-stdio", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: oncetrace mcp-stdio --provider NAME [flags] -- CMD ARGS…\n\n"+
			"Runs the stdio MCP server CMD in its place (put it where the MCP client's configuration names the server),\n"+
			"relays its stdin and stdout byte for byte and records each tools/call as an attempt, and the calls that acted as effects.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.provider, "provider", "", "the MCP server's name: the effects' provider, e.g. invoices")
	fs.StringVar(&o.server, "server", envOr("ONCETRACE_SERVER", "http://127.0.0.1:8080"), "the oncetrace server that receives the attempts and effects (env ONCETRACE_SERVER)")
	fs.StringVar(&o.token, "token", envOr("ONCETRACE_INGEST_TOKEN", ""), "the server's ingest token, if it has one (env ONCETRACE_INGEST_TOKEN)")
	fs.StringVar(&o.effectIDPointer, "mcp-effect-id", mcp.DefaultEffectIDPointer, "a JSON pointer into a tools/call result holding the effect's id; without it the id is a hash of the call")
	fs.StringVar(&o.keyMeta, "mcp-key", mcp.KeyMeta, "the params._meta entry holding a call's idempotency key")
	fs.StringVar(&o.keyArg, "mcp-key-arg", "", "a tool argument holding the idempotency key, read when params._meta has none, e.g. idempotency_key")
	fs.Func("fault", "a standing fault on calls of tools not annotated read-only: lose-response=0.1, fail-before=0.05, latency=500ms, or the sandbox's syntax lose-response;p=0.1 (repeatable; see docs/mcp.md)", func(v string) error {
		faults, err := tap.ParseFaults(v)
		o.faults = append(o.faults, faults...)
		return err
	})
	fs.StringVar(&o.queueDir, "queue-dir", envOr("ONCETRACE_MCP_QUEUE_DIR", ""), "where recordings wait while the server cannot take them (default: the user cache directory's oncetrace/mcp-queue/PROVIDER); each running mcp-stdio takes a numbered directory in it (env ONCETRACE_MCP_QUEUE_DIR)")
	fs.Int64Var(&o.queueMaxBytes, "queue-max-bytes", feed.DefaultQueueBytes, "the queue's cap; when full, the oldest recordings are dropped and counted")
	fs.DurationVar(&o.recordTimeout, "record-timeout", 5*time.Second, "how long a call's recording is tried before it is queued instead")
	fs.IntVar(&o.maxLineBytes, "max-line-bytes", mcp.DefaultMaxLine, "the longest message the proxy holds to read; a longer one passes through as it comes, unread (see docs/mcp.md § Limits)")
	if err := o.fingerprintIgnore.register(fs); err != nil {
		return o, fmt.Errorf("mcp-stdio: %w", err)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.command = fs.Args()
	switch {
	case o.provider == "":
		return o, errors.New("mcp-stdio: --provider is required: the name the MCP server's effects carry, e.g. --provider invoices")
	case len(o.command) == 0:
		return o, errors.New("mcp-stdio: no server command: give it after --, e.g. oncetrace mcp-stdio --provider invoices -- node server.mjs")
	case o.maxLineBytes <= 0:
		return o, errors.New("mcp-stdio: --max-line-bytes must be positive")
	case o.recordTimeout <= 0:
		return o, errors.New("mcp-stdio: --record-timeout must be positive")
	}
	if o.queueDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("mcp-stdio: no user cache directory for the queue (%v); set --queue-dir", err)
		}
		o.queueDir = filepath.Join(cache, "oncetrace", "mcp-queue", safeDirName(o.provider))
	}
	return o, nil
}

// runMCPStdio is the "mcp-stdio" command. It returns the exit status to
// end with: the server's. The stream is never broken for oncetrace's
// sake: no server, no queue, no recording stops the relay.
func runMCPStdio(args []string) (int, error) {
	o, err := mcpStdioFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return 2, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o.fingerprintIgnore.warnUnused(logger, o.provider)
	// A client that goes away closes the pipe of our stdout: a write then
	// fails (EPIPE) instead of killing the process before it records.
	// Caught, not ignored, so the child starts with the default.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	rec := startMCPRecorder(o, logger)
	defer rec.stop()
	observer, err := mcp.New(mcp.Config{Provider: o.provider, EffectIDPointer: o.effectIDPointer, KeyMeta: o.keyMeta, KeyArg: o.keyArg,
		Faults: o.faults, Recorder: rec, RecordTimeout: o.recordTimeout + 5*time.Second, FingerprintIgnore: o.fingerprintIgnore[o.provider],
		Logger: logger})
	if err != nil {
		return 2, fmt.Errorf("mcp-stdio: %w", err)
	}

	child := exec.Command(o.command[0], o.command[1:]...)
	child.Stderr = os.Stderr
	childIn, err := child.StdinPipe()
	if err != nil {
		return 2, fmt.Errorf("mcp-stdio: %w", err)
	}
	childOut, err := child.StdoutPipe()
	if err != nil {
		return 2, fmt.Errorf("mcp-stdio: %w", err)
	}
	if err := child.Start(); err != nil {
		// As a shell says it: 127 for a command not found, 126 for one
		// that would not run.
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127, fmt.Errorf("mcp-stdio: %w", err)
		}
		return 126, fmt.Errorf("mcp-stdio: %w", err)
	}
	stopSignals := forwardSignals(child.Process)
	defer stopSignals()

	session := observer.Session("")
	stats, relayErr := mcp.RelayStdio(session, mcp.StdioPipes{ClientIn: os.Stdin, ClientOut: os.Stdout, ChildIn: childIn, ChildOut: childOut},
		mcp.StdioConfig{MaxLine: o.maxLineBytes, Logger: logger})
	waitErr := child.Wait()
	session.Close()
	// Each call's recording is tried once, then queued: bounded by
	// --record-timeout, not by the server.
	ctx, cancel := context.WithTimeout(context.Background(), o.recordTimeout+10*time.Second)
	defer cancel()
	if err := observer.Wait(ctx); err != nil {
		logger.Warn("mcp-stdio: recordings still running at exit; they are lost", "err", err)
	}
	rec.drain(o.server, o.recordTimeout)
	c, q := observer.Counts(), rec.counts()
	logger.Info("mcp-stdio stopped", "provider", o.provider, "calls", c.Calls, "attempts", c.Attempts, "effects", c.Effects,
		"dropped", c.Dropped, "refused", c.Refused, "delayed", c.Delayed, "unobserved", stats.Unobserved,
		"recorded", q.Recorded, "queued", q.Queued, "record_failed", q.Failed+c.RecordFailures, "lost", q.Dropped, "rejected", q.Rejected)
	if relayErr != nil {
		logger.Warn("mcp-stdio: relaying", "err", relayErr)
	}
	return exitStatus(child, waitErr), nil
}

// exitStatus is the child's exit status, or 128 plus the signal that
// ended it, as a shell reports one.
func exitStatus(child *exec.Cmd, waitErr error) int {
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		return 1
	}
	if st, ok := child.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	return child.ProcessState.ExitCode()
}

// forwardSignals passes SIGINT and SIGTERM on to p, which decides when to
// end: mcp-stdio ends when it does. The returned function stops it.
func forwardSignals(p *os.Process) (stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case s := <-sigs:
				p.Signal(s) // an error: it has ended already
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-finished
	}
}

// mcpRecorder is what the observer records through: the server's POST
// /api/v1/events, with a disk queue in front for what fails.
type mcpRecorder struct {
	next    feed.HTTPRecorder
	queued  *feed.QueuedEventRecorder // nil when no queue could be opened
	queue   *feed.EventQueue
	cancel  context.CancelFunc
	retried chan struct{}
}

// startMCPRecorder opens a queue (one of the provider's slots; none if
// none can be opened, which is logged: the relay runs anyway) and starts
// retrying what an earlier process left in it.
func startMCPRecorder(o mcpStdioOptions, logger *slog.Logger) *mcpRecorder {
	r := &mcpRecorder{next: feed.HTTPRecorder{Server: o.server, Token: o.token, Feed: mcp.Feed, Client: &http.Client{}}}
	q, err := openQueueSlot(o.queueDir, o.queueMaxBytes)
	if err != nil {
		logger.Warn("mcp-stdio: no queue; a recording that fails is lost", "err", err)
	} else {
		r.queue = q
		r.queued = feed.NewQueuedEventRecorder(r.next, q, feed.QueuedConfig{Feed: mcp.Feed, Limits: ingest.DefaultLimits, Timeout: o.recordTimeout, Logger: logger})
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.retried = cancel, make(chan struct{})
	go func() {
		defer close(r.retried)
		if err := serverAnswers(ctx, o.server); err != nil && ctx.Err() == nil {
			logger.Warn("mcp-stdio: the oncetrace server does not answer; recordings will wait in the queue until it does", "server", o.server, "err", err)
		}
		if r.queued != nil {
			r.queued.Run(ctx)
		}
	}()
	dir, queued := "", 0
	if q != nil {
		dir, queued = q.Dir(), q.Len()
	}
	logger.Info("oncetrace mcp-stdio", "provider", o.provider, "server", o.server, "command", o.command[0], "queue", dir, "queued", queued)
	return r
}

// RecordEvents records a call's events, or queues them: a batch queued is
// no failure of the observer's, the queue retries it.
func (r *mcpRecorder) RecordEvents(ctx context.Context, events []json.RawMessage) error {
	if r.queued == nil {
		return r.next.RecordEvents(ctx, events)
	}
	return feed.QueuedEvents{Recorder: r.queued}.RecordEvents(ctx, events)
}

func (r *mcpRecorder) counts() feed.Counts {
	if r.queued == nil {
		return feed.Counts{}
	}
	return r.queued.Counts()
}

// drain gives the queue up to limit to empty itself, while the server
// answers and takes what it holds, so a short session leaves nothing
// behind; what is left waits on disk for the next mcp-stdio.
func (r *mcpRecorder) drain(server string, limit time.Duration) {
	if r.queued == nil || r.queued.Counts().Queued == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if serverAnswers(ctx, server) != nil {
		return
	}
	failed := r.queued.Counts().Failed
	for {
		c := r.queued.Counts()
		if c.Queued == 0 || c.Failed > failed {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops retrying and closes the queue: what is still in it stays on
// disk for the next mcp-stdio of the provider.
func (r *mcpRecorder) stop() {
	r.cancel()
	<-r.retried
	if r.queue != nil {
		r.queue.Close()
	}
}

// openQueueSlot opens the first of base's numbered queue directories no
// other process holds: a client runs one mcp-stdio per session, several
// at once, and a queue is one process's at a time.
func openQueueSlot(base string, maxBytes int64) (*feed.EventQueue, error) {
	for i := range mcpQueueSlots {
		q, err := feed.OpenEventQueue(filepath.Join(base, strconv.Itoa(i)), maxBytes)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
			return q, err
		}
	}
	return nil, fmt.Errorf("mcp-stdio: all %d queue directories of %s are in use", mcpQueueSlots, base)
}
