package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

type serveConfig struct {
	addr, db, sync, token string
	insecure              bool
	groupCommit           bool
	analysis              trace.Config
	limits                ingest.Limits
}

func serveFlags(args []string) (serveConfig, error) {
	c := serveConfig{analysis: trace.DefaultConfig, limits: ingest.DefaultLimits}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", envOr("ONCETRACE_ADDR", "127.0.0.1:8080"), "listen address (env ONCETRACE_ADDR)")
	fs.StringVar(&c.db, "db", envOr("ONCETRACE_DB", "oncetrace.db"), "SQLite database file (env ONCETRACE_DB)")
	fs.StringVar(&c.sync, "sync", envOr("ONCETRACE_SYNC", "normal"), "durability: normal survives a process crash, full also a power loss (env ONCETRACE_SYNC)")
	fs.StringVar(&c.token, "ingest-token", envOr("ONCETRACE_INGEST_TOKEN", ""), "token POST endpoints require as Authorization: Bearer (env ONCETRACE_INGEST_TOKEN)")
	fs.BoolVar(&c.insecure, "insecure", false, "allow a non-loopback address without an ingest token")
	fs.BoolVar(&c.groupCommit, "group-commit", true, "commit concurrent ingest requests in one transaction")
	fs.DurationVar(&c.analysis.GapThreshold, "gap-threshold", c.analysis.GapThreshold, "shortest idle interval shown as a gap")
	fs.DurationVar(&c.analysis.KeyRetention, "key-retention", c.analysis.KeyRetention, "how long receiving APIs keep idempotency keys (retry_beyond_retention)")
	fs.Int64Var(&c.limits.BodyBytes, "max-body-bytes", c.limits.BodyBytes, "largest request body, after decompression")
	fs.IntVar(&c.limits.Events, "max-events", c.limits.Events, "most events in one request")
	fs.IntVar(&c.limits.IDBytes, "max-id-bytes", c.limits.IDBytes, "longest id, key, provider or worker")
	fs.IntVar(&c.limits.JSONBytes, "max-json-bytes", c.limits.JSONBytes, "largest args or result, as canonical JSON")
	fs.IntVar(&c.limits.TextBytes, "max-text-bytes", c.limits.TextBytes, "longest name, tool, target or error")
	fs.IntVar(&c.limits.Labels, "max-labels", c.limits.Labels, "most labels on an execution")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, checkExposure(c.addr, c.token, c.insecure)
}

// checkExposure refuses to serve ingest to a network without a token: anyone
// who can reach the port could write traces.
func checkExposure(addr, token string, insecure bool) error {
	if token != "" || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("serve: --addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("serve: refusing to listen on %q without an ingest token: anyone who reaches it could write traces; "+
		"set --ingest-token (or ONCETRACE_INGEST_TOKEN), listen on 127.0.0.1, or pass --insecure", addr)
}

func runServe(args []string) error {
	c, err := serveFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := store.Open(ctx, c.db, store.Sync(c.sync))
	if err != nil {
		return err
	}
	defer db.Close()
	wcfg := ingest.DefaultWriterConfig
	wcfg.Analysis = c.analysis
	wcfg.GroupCommit = c.groupCommit
	writer := ingest.NewWriter(db, wcfg)
	srv := web.New(web.Config{DB: db, Writer: writer, Limits: c.limits, Analysis: c.analysis, IngestToken: c.token, Logger: logger})

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		writer.Close()
		return fmt.Errorf("serve: %w", err)
	}
	httpServer := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("oncetrace serving", "url", "http://"+ln.Addr().String(), "db", c.db, "sync", c.sync, "version", version)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpServer.Serve(ln) }()

	select {
	case err := <-serveErr:
		writer.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing requests, then draining the writer")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = httpServer.Shutdown(shutdownCtx)
	writer.Close() // commits whatever is queued before the database closes
	return err
}
