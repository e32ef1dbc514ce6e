package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// importFormats are what import reads, the default first.
var importFormats = []string{"ndjson", "temporal"}

// runImport loads NDJSON events, or a Temporal workflow history, into a
// database through the same ingest path as the server, so ids, dedupe,
// merge rules and limits are the same.
func runImport(args []string, stdin io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	dbPath := fs.String("db", envOr("ONCETRACE_DB", "oncetrace.db"), "database to load into: a SQLite file or a postgres:// URL (env ONCETRACE_DB)")
	in := fs.String("in", "-", "file to read, - for standard input; the same as giving FILE after the flags")
	format := fs.String("format", "ndjson", "what the file holds: ndjson (oncetrace events, one a line, as export writes them) or temporal "+
		"(one workflow run's history as `temporal workflow show --output json` prints it; docs/temporal.md)")
	var tf temporalImportFlags
	tf.register(fs)
	redact := fs.String("redact", defaultRedactFlag(),
		"mask the values of these keys before storing, as serve does (prune.go); '' masks nothing (env ONCETRACE_REDACT)")
	limits := importLimits()
	registerEventLimitFlags(fs, &limits) // serve_decode.go: give the server's, to import what it accepted
	files, err := parseWithFiles(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case len(files) > 1:
		return fmt.Errorf("import: one file at a time: got %q; import them one after another into the same --db", files)
	case len(files) == 1 && *in != "-":
		return fmt.Errorf("import: both --in %q and the argument %q name a file to read: give one", *in, files[0])
	case len(files) == 1:
		*in = files[0]
	}
	if !slices.Contains(importFormats, *format) {
		return fmt.Errorf("import: --format %q: want one of %s", *format, strings.Join(importFormats, ", "))
	}
	if limits.Redact, err = parseRedactFlag(*redact); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	r := stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		r = f
	}
	ctx := context.Background()
	db, err := openDB(ctx, *dbPath, sqlite.SyncNormal)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := rebuildDerived(ctx, db, writer.DefaultConfig.Analysis, slog.New(slog.NewTextHandler(os.Stderr, nil)), nil); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	w := writer.New(db, writer.DefaultConfig)
	defer w.Close()
	if *format == "temporal" {
		return importTemporal(ctx, w, r, tf, limits, out)
	}

	var total writer.Result
	rejected, line := 0, 0
	chunk := make([]byte, 0, 1<<20)
	flush := func(firstLine int) error {
		if len(chunk) == 0 {
			return nil
		}
		batch, err := ingest.Decode(chunk, ingest.FormatNDJSON, limits)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		for _, rj := range batch.Rejected {
			fmt.Fprintf(os.Stderr, "import: line %d: %s\n", firstLine+rj.Index, rj.Error)
		}
		rejected += len(batch.Rejected)
		res, err := w.Write(ctx, batch.Events)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		total.Accepted += res.Accepted
		total.Duplicates += res.Duplicates
		chunk = chunk[:0]
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	first, inChunk := 1, 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if inChunk == 0 {
			first = line
		}
		chunk = append(append(chunk, sc.Bytes()...), '\n')
		inChunk++
		if inChunk == 1000 {
			if err := flush(first); err != nil {
				return err
			}
			inChunk = 0
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("import: line %d: %w", line+1, err)
	}
	if err := flush(first); err != nil {
		return err
	}
	fmt.Fprintf(out, "imported %d events, %d duplicates, %d rejected\n", total.Accepted, total.Duplicates, rejected)
	if rejected > 0 {
		// Nothing is cut to fit: a rejected event is not stored at all.
		return fmt.Errorf("import: %d events rejected (an export of a server with raised limits imports with the same --max-* flags)", rejected)
	}
	return nil
}

// temporalImportFlags say what a Temporal history alone does not.
type temporalImportFlags struct {
	namespace, workflowID, runID, toolClasses string
}

func (f *temporalImportFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.namespace, "namespace", "", "--format temporal: the run's Temporal namespace, kept as the execution's label namespace")
	fs.StringVar(&f.workflowID, "workflow-id", "", "--format temporal: the workflow id, for a history whose WorkflowExecutionStarted carries none")
	fs.StringVar(&f.runID, "run-id", "", "--format temporal: the run id, for a history that does not say it (see docs/temporal.md)")
	fs.StringVar(&f.toolClasses, "tool-class", envOr("ONCETRACE_TOOL_CLASS", ""),
		"--format temporal: classify activity types by glob, as serve --tool-class does tools, e.g. 'Send*=write,Get*=read'; others are unknown (env ONCETRACE_TOOL_CLASS)")
}

// importTemporal maps one workflow history onto events and stores them. A
// history that cannot be read or mapped is refused whole.
func importTemporal(ctx context.Context, w *writer.Writer, r io.Reader, f temporalImportFlags, limits ingest.Limits, out io.Writer) error {
	classes, err := ingest.ParseToolClasses(f.toolClasses)
	if err != nil {
		return fmt.Errorf("import: --tool-class: %w", err)
	}
	h, err := temporal.ReadHistoryJSON(r)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	events, err := temporal.MapHistory(h, temporal.MapOptions{Namespace: f.namespace, WorkflowID: f.workflowID, RunID: f.runID,
		ToolClasses: classes, Limits: limits})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	var total writer.Result
	for batch := range slices.Chunk(events, 1000) {
		res, err := w.Write(ctx, batch)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		total.Accepted += res.Accepted
		total.Duplicates += res.Duplicates
	}
	fmt.Fprintf(out, "imported %d events, %d duplicates, 0 rejected (workflow history: %d Temporal events)\n", total.Accepted, total.Duplicates, len(h.GetEvents()))
	return nil
}

// parseWithFiles parses flags given before, between or after the file
// arguments (flag.Parse alone stops at the first argument, so
// "import FILE --db x.db" would leave --db unread) and returns the files.
func parseWithFiles(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return files, nil
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// importLimits are serve's default limits on one event; the limits on a
// request's size do not apply to a file read 1,000 lines at a time.
func importLimits() ingest.Limits {
	l := ingest.DefaultLimits
	l.Events = 1000
	l.BodyBytes = 1 << 62
	return l
}

// runExport writes every stored event, in commit order, one a line, exactly
// as stored: importing the output into an empty database and exporting it
// again gives the same bytes.
func runExport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	dbPath := fs.String("db", envOr("ONCETRACE_DB", "oncetrace.db"), "database to read: a SQLite file or a postgres:// URL (env ONCETRACE_DB)")
	outPath := fs.String("out", "-", "file to write, - for standard output")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := refuseArguments("export", fs); err != nil {
		return err
	}
	// The database first, so that a mistyped --db leaves no empty --out.
	ctx := context.Background()
	db, err := openExistingDB(ctx, "export", *dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	w := stdout
	if *outPath != "-" {
		f, err := os.Create(*outPath)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	err = db.ExportEvents(ctx, func(_ int64, body []byte) error {
		bw.Write(body)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
