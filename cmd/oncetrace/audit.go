package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// runAudit prints the findings of a database or a server and reports
// whether any is critical, so that CI can fail on it.
func runAudit(args []string, out io.Writer) (critical bool, err error) {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	dbPath := fs.String("db", "", "audit this database (a SQLite file or a postgres:// URL): what a server on it would answer")
	server := fs.String("server", "", "audit the oncetrace server at this URL (e.g. http://127.0.0.1:8080)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	readToken := fs.String("read-token", envOr("ONCETRACE_READ_TOKEN", envOr("ONCETRACE_INGEST_TOKEN", "")),
		"with --server: the server's read token, sent as Authorization: Bearer; a server on the network protects reads (env ONCETRACE_READ_TOKEN, else ONCETRACE_INGEST_TOKEN)")
	cfg := trace.DefaultConfig
	fs.DurationVar(&cfg.GapThreshold, "gap-threshold", cfg.GapThreshold, "with --db: shortest idle interval treated as a gap")
	fs.DurationVar(&cfg.KeyRetention, "key-retention", cfg.KeyRetention, "with --db: key retention window of the receiving APIs")
	fs.DurationVar(&cfg.RepeatWindow, "repeat-window", cfg.RepeatWindow, "with --db: how close two identical effects with no run id must be for repeated_effect")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, err
	}
	if err := refuseArguments("audit", fs); err != nil {
		return false, err
	}
	if (*dbPath == "") == (*server == "") {
		return false, errors.New("audit: give exactly one of --db FILE or --server URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var findings []trace.Finding
	var unverified []string // executions nothing proves happened once
	if *dbPath != "" {
		findings, unverified, err = auditDB(ctx, *dbPath, cfg)
	} else {
		findings, unverified, err = auditServer(ctx, *server, *readToken)
	}
	if err != nil {
		return false, err
	}
	// Both sources page in the store's order, which compares ids as text;
	// with every finding in hand, the report is in natural order (step-2,
	// step-14, step-123), the same as the execution page's.
	slices.SortStableFunc(findings, trace.CompareFindingPlaces)
	slices.SortStableFunc(unverified, trace.CompareNatural)
	n := trace.CriticalCount(findings)
	// Clean is said only with effects to show it (docs/audit.md: an
	// unverified execution is not clean); the exit code fails CI on critical
	// findings alone.
	clean := n == 0 && len(unverified) == 0
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if findings == nil {
			findings = []trace.Finding{}
		}
		if unverified == nil {
			unverified = []string{}
		}
		return n > 0, enc.Encode(map[string]any{"findings": findings, "critical": n, "clean": clean, "unverified_executions": unverified})
	}
	for _, f := range findings {
		where := f.ExecutionID
		if f.StepID != "" {
			where += " " + f.StepID
		}
		fmt.Fprintf(out, "%-8s %-22s %s: %s\n", strings.ToUpper(string(f.Severity)), f.Rule, where, f.Message)
	}
	for _, id := range unverified {
		fmt.Fprintf(out, "%-8s %-22s %s: no outbox feed reported effects for some of its side-effecting steps: nothing proves they happened once\n",
			"UNVERIFIED", "", id)
	}
	switch {
	case clean:
		fmt.Fprintf(out, "clean: no critical findings, effects known for every side-effecting step (%d warnings)\n", len(findings))
	case n == 0:
		fmt.Fprintf(out, "no critical findings, but %d executions unverified (%d warnings)\n", len(unverified), len(findings))
	default:
		fmt.Fprintf(out, "%d critical findings, %d warnings, %d executions unverified\n", n, len(findings)-n, len(unverified))
	}
	return n > 0, nil
}

// auditDB reads what a server on the database would answer: the stored
// findings and audit states, which the writer derived (after bringing an
// older database's up to this binary's rules, as serve does), so that
// audit --db and audit --server cannot disagree.
func auditDB(ctx context.Context, path string, cfg trace.Config) ([]trace.Finding, []string, error) {
	db, err := openExistingDB(ctx, "audit", path)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	if err := rebuildDerived(ctx, db, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), nil); err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	findings, err := db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		return nil, nil, err
	}
	var unverified []string
	for cursor := ""; ; {
		page, next, err := db.ListExecutions(ctx, store.ExecutionFilter{AuditState: trace.StateUnverified, Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			return nil, nil, err
		}
		for _, x := range page {
			unverified = append(unverified, x.ID)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	return findings, unverified, nil
}

func auditServer(ctx context.Context, server, token string) ([]trace.Finding, []string, error) {
	var all []trace.Finding
	for cursor := ""; ; {
		var page struct {
			Findings []trace.Finding `json:"findings"`
			Next     string          `json:"next"`
		}
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := getServerJSON(ctx, server, token, "/api/v1/findings", q, &page); err != nil {
			return nil, nil, err
		}
		all = append(all, page.Findings...)
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	var unverified []string
	for cursor := ""; ; {
		var page struct {
			Executions []struct {
				ID string `json:"execution_id"`
			} `json:"executions"`
			Next string `json:"next"`
		}
		q := url.Values{"audit": {string(trace.StateUnverified)}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := getServerJSON(ctx, server, token, "/api/v1/executions", q, &page); err != nil {
			return nil, nil, err
		}
		for _, x := range page.Executions {
			unverified = append(unverified, x.ID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	return all, unverified, nil
}

// getServerJSON decodes the JSON answer of GET server+path?query, sent with
// the read token when there is one.
func getServerJSON(ctx context.Context, server, token, path string, query url.Values, into any) error {
	u, err := url.JoinPath(server, path)
	if err != nil {
		return fmt.Errorf("audit: --server %q: %w", server, err)
	}
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("audit: %s answered %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("audit: decode %s: %w", u, err)
	}
	return nil
}
