package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// runAudit prints the findings of a database or a server and reports
// whether any is critical, so that CI can fail on it.
func runAudit(args []string, out io.Writer) (critical bool, err error) {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	dbPath := fs.String("db", "", "audit this database file, computing every finding afresh")
	server := fs.String("server", "", "audit the oncetrace server at this URL (e.g. http://127.0.0.1:8080)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	cfg := trace.DefaultConfig
	fs.DurationVar(&cfg.GapThreshold, "gap-threshold", cfg.GapThreshold, "with --db: shortest idle interval treated as a gap")
	fs.DurationVar(&cfg.KeyRetention, "key-retention", cfg.KeyRetention, "with --db: key retention window of the receiving APIs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, err
	}
	if (*dbPath == "") == (*server == "") {
		return false, errors.New("audit: give exactly one of --db FILE or --server URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var findings []trace.Finding
	if *dbPath != "" {
		findings, err = auditDB(ctx, *dbPath, cfg)
	} else {
		findings, err = auditServer(ctx, *server)
	}
	if err != nil {
		return false, err
	}
	n := trace.CriticalCount(findings)
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if findings == nil {
			findings = []trace.Finding{}
		}
		return n > 0, enc.Encode(map[string]any{"findings": findings, "critical": n, "clean": n == 0})
	}
	for _, f := range findings {
		where := f.ExecutionID
		if f.StepID != "" {
			where += " " + f.StepID
		}
		fmt.Fprintf(out, "%-8s %-22s %s: %s\n", strings.ToUpper(string(f.Severity)), f.Rule, where, f.Message)
	}
	if n == 0 {
		fmt.Fprintf(out, "clean: no critical findings (%d warnings)\n", len(findings))
	} else {
		fmt.Fprintf(out, "%d critical findings, %d warnings\n", n, len(findings)-n)
	}
	return n > 0, nil
}

func auditDB(ctx context.Context, path string, cfg trace.Config) ([]trace.Finding, error) {
	db, err := store.Open(ctx, path, store.SyncNormal)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	w, err := db.World(ctx)
	if err != nil {
		return nil, err
	}
	return trace.Audit(w, cfg), nil
}

func auditServer(ctx context.Context, server string) ([]trace.Finding, error) {
	u, err := url.JoinPath(server, "/api/v1/findings")
	if err != nil {
		return nil, fmt.Errorf("audit: --server %q: %w", server, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("audit: %s answered %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var body struct {
		Findings []trace.Finding `json:"findings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("audit: decode %s: %w", u, err)
	}
	return body.Findings, nil
}
