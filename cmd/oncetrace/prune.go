package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// Retention and redaction (docs/security.md): serve's --retain,
// --retain-effects and --redact, import's --redact, and the prune command.

// retentionFlags are serve's data-keeping flags.
type retentionFlags struct {
	retain        time.Duration // 0: keep everything
	retainEffects time.Duration // 0: as retain
	redact        string        // comma-separated terms; "" redacts nothing
}

func (r *retentionFlags) register(fs *flag.FlagSet) {
	var err error
	if r.retain, err = parseRetention(os.Getenv("ONCETRACE_RETAIN")); err != nil {
		r.retain = 0 // reported by check, which sees the flag's value too
	}
	r.retainEffects, _ = parseRetention(os.Getenv("ONCETRACE_RETAIN_EFFECTS"))
	fs.Func("retain", "delete executions older than this (by their start, else their earliest attempt or effect), e.g. 30d or 72h, with "+
		"their steps, attempts, spans, events, effects, findings and messages; off by default (env ONCETRACE_RETAIN)", func(v string) error {
		d, err := parseRetention(v)
		r.retain = d
		return err
	})
	fs.Func("retain-effects", "with --retain: delete orphan effects (naming no execution, matching no attempt) older than this; "+
		"default: as --retain (env ONCETRACE_RETAIN_EFFECTS)", func(v string) error {
		d, err := parseRetention(v)
		r.retainEffects = d
		return err
	})
	r.redact = defaultRedactFlag()
	fs.StringVar(&r.redact, "redact", r.redact, "mask the values of these names (comma-separated; matched on the name's parts, any case; +n1,n2 adds to the default) "+
		"in attempt args and results, labels, and URLs, query strings and headers inside any stored string, before they are stored; '' masks nothing (env ONCETRACE_REDACT; docs/security.md § Redaction)")
}

// check reports what the environment got wrong (flags report their own).
func (r *retentionFlags) check() error {
	if _, err := parseRetention(os.Getenv("ONCETRACE_RETAIN")); err != nil {
		return fmt.Errorf("serve: ONCETRACE_RETAIN: %w", err)
	}
	if _, err := parseRetention(os.Getenv("ONCETRACE_RETAIN_EFFECTS")); err != nil {
		return fmt.Errorf("serve: ONCETRACE_RETAIN_EFFECTS: %w", err)
	}
	if r.retainEffects > 0 && r.retain == 0 {
		return errors.New("serve: --retain-effects needs --retain")
	}
	return nil
}

// redactor is the Redactor the flag asks for; nil redacts nothing.
func (r *retentionFlags) redactor() (*ingest.Redactor, error) {
	return parseRedactFlag(r.redact)
}

// defaultRedactFlag is --redact's default: the environment's, else
// ingest's default terms.
func defaultRedactFlag() string {
	return envOr("ONCETRACE_REDACT", strings.Join(ingest.DefaultRedactKeys, ","))
}

func parseRedactFlag(v string) (*ingest.Redactor, error) {
	terms, err := ingest.ParseRedactKeys(v)
	if err != nil {
		return nil, fmt.Errorf("--redact: %w", err)
	}
	return ingest.NewRedactor(terms), nil
}

// parseRetention reads a window: a Go duration (72h, 90m) or a number of
// days (30d) or weeks (2w); "", "0" and "off" mean none.
func parseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "", "0", "off":
		return 0, nil
	}
	var d time.Duration
	if n, unit := v[:len(v)-1], v[len(v)-1]; unit == 'd' || unit == 'w' {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || days <= 0 || math.IsInf(days, 0) || days > 100*365 {
			return 0, fmt.Errorf("%q: want a number of days (30d), weeks (2w) or a duration (72h)", v)
		}
		if unit == 'w' {
			days *= 7
		}
		d = time.Duration(days * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("%q: want a number of days (30d), weeks (2w) or a duration (72h)", v)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be positive", v)
	}
	return d, nil
}

// pruneInterval is how often serve prunes: a tenth of the window, between
// a second and an hour, so that nothing stays much past its window.
func pruneInterval(retain time.Duration) time.Duration {
	return min(time.Hour, max(time.Second, retain/10))
}

// pruner runs serve's retention in the background: once at start, then
// every pruneInterval. stop cancels it between transactions and waits.
type pruner struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startPruner(ctx context.Context, db *store.DB, r retentionFlags, cfg trace.Config, logger *slog.Logger, observe func(error)) *pruner {
	p := &pruner{cancel: func() {}}
	if r.retain <= 0 {
		return p
	}
	ctx, p.cancel = context.WithCancel(ctx)
	effects := r.retainEffects
	if effects <= 0 {
		effects = r.retain
	}
	interval := pruneInterval(r.retain)
	logger.Info("oncetrace retention", "retain", r.retain, "retain_effects", effects, "every", interval)
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		warned := false
		for {
			now := time.Now()
			res, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-r.retain), EffectsBefore: now.Add(-effects), Interleave: true,
				Reaudit: derive.Reaudit(cfg), RepeatWindow: cfg.RepeatWindow, VacuumConvertMax: store.DefaultVacuumConvertMax})
			if ctx.Err() != nil {
				return // stopped: what it committed stays, the next start resumes
			}
			if observe != nil {
				observe(err)
			}
			logPrune(logger, res, err)
			if res.Vacuum == "none" && !warned {
				warned = true
				logger.Warn("prune: this database predates incremental vacuum and is too large to convert while serving; freed space is reused "+
					"but the file does not shrink; stop the server and run `oncetrace prune --db FILE --before DATE` once to convert it", "db", db.Path)
			}
			t := time.NewTimer(interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *pruner) stop() {
	p.cancel()
	p.done.Wait()
}

func logPrune(logger *slog.Logger, res store.PruneResult, err error) {
	attrs := []any{"executions", res.Executions, "effects", res.Effects, "events", res.Events, "rows", res.Rows,
		"reaudited", res.Reaudited, "transactions", res.Batches, "max_hold", res.MaxHold.Round(time.Microsecond),
		"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter, "vacuum", res.Vacuum, "took", res.Duration.Round(time.Millisecond)}
	switch {
	case err != nil:
		logger.Error("prune failed", append(attrs, "err", err)...)
	case res.Rows > 0:
		logger.Info("prune", attrs...)
	default:
		logger.Debug("prune", attrs...)
	}
}

// runPrune is `oncetrace prune`: retention run once, offline or beside a
// running server (it takes the writer in short transactions, as serve's
// own does).
func runPrune(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	dbPath := fs.String("db", envOr("ONCETRACE_DB", "oncetrace.db"), "database: a SQLite file or a postgres:// URL (env ONCETRACE_DB)")
	before := fs.String("before", "", "delete executions whose start (else earliest attempt or effect) is before this: "+
		"a date (2026-06-01, UTC), an RFC 3339 time, or an age (30d, 72h); required")
	effectsBefore := fs.String("effects-before", "", "delete orphan effects (naming no execution, matching no attempt) before this; default: --before")
	vacuum := fs.Bool("vacuum", true, "return freed space to the file system; a database that predates incremental vacuum is rewritten once "+
		"(VACUUM: it needs as much free disk as the file, and holds the writer throughout)")
	cfg := trace.DefaultConfig
	fs.DurationVar(&cfg.GapThreshold, "gap-threshold", cfg.GapThreshold, "for the executions re-audited: shortest idle interval treated as a gap")
	fs.DurationVar(&cfg.KeyRetention, "key-retention", cfg.KeyRetention, "for the executions re-audited: key retention window of the receiving APIs")
	fs.DurationVar(&cfg.RepeatWindow, "repeat-window", cfg.RepeatWindow, "for the orphans re-checked: how close two identical effects with no run id must be for repeated_effect")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := refuseArguments("prune", fs); err != nil {
		return err
	}
	if *before == "" {
		return errors.New("prune: --before is required, e.g. --before 2026-06-01 or --before 30d")
	}
	now := time.Now()
	opts := store.PruneOptions{Reaudit: derive.Reaudit(cfg), RepeatWindow: cfg.RepeatWindow}
	var err error
	if opts.Before, err = parseBefore(*before, now); err != nil {
		return fmt.Errorf("prune: --before: %w", err)
	}
	if *effectsBefore != "" {
		if opts.EffectsBefore, err = parseBefore(*effectsBefore, now); err != nil {
			return fmt.Errorf("prune: --effects-before: %w", err)
		}
	}
	if *vacuum {
		opts.VacuumConvertMax = math.MaxInt64
	}
	ctx, stop := signalContext()
	defer stop()
	db, err := openExistingDB(ctx, "prune", *dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.Prune(ctx, opts)
	if err != nil {
		return fmt.Errorf("prune: %w (what was deleted stays deleted and consistent; run it again to finish)", err)
	}
	vacuumed := map[string]string{"incremental": "incremental vacuum", "full": "rewritten once by VACUUM, incremental from now on",
		"auto": "auto_vacuum", "none": "not vacuumed: freed pages are reused, the file keeps its size",
		"autovacuum": "PostgreSQL's autovacuum makes the space reusable"}[res.Vacuum]
	fmt.Fprintf(out, "pruned %d executions and %d effects before %s (%d rows, %d of them events) in %d transactions (longest %v); "+
		"re-audited %d executions; database %s -> %s (%s)\n",
		res.Executions, res.Effects, opts.Before.UTC().Format(time.RFC3339), res.Rows, res.Events, res.Batches, res.MaxHold.Round(time.Millisecond),
		res.Reaudited, mib(res.BytesBefore), mib(res.BytesAfter), vacuumed)
	return nil
}

// parseBefore reads a cutoff: a date (UTC midnight), an RFC 3339 time, or
// an age before now.
func parseBefore(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := parseRetention(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want a date (2026-06-01), an RFC 3339 time or an age (30d, 72h)", v)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
