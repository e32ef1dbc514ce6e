package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// floorConfig is oncebench floor's flags.
type floorConfig struct {
	runFlags
	spans int
}

func floorFlags(args []string) (floorConfig, error) {
	c := floorConfig{}
	fs := flag.NewFlagSet("oncebench floor", flag.ContinueOnError)
	c.register(fs, "SQLite synchronous mode", "-spans divided by 10")
	fs.IntVar(&c.spans, "spans", 100_000, "spans in each stage's run (compare's requests: 100 a request, half of each shape)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		c.spans /= 10
	}
	if c.spans < 1000 {
		return c, fmt.Errorf("-spans wants 1,000 or more")
	}
	return c, c.check()
}

// floorStage is one measured stage: what it does to the requests' spans,
// with the database file it leaves (or none).
type floorStage struct {
	name string
	run  func(ctx context.Context, path string, groups [][]byte) error
}

// emptyBody stands in for every body in the stage that weighs the log
// without them.
var emptyBody = []byte("{}")

// floorGroup is how many requests one commit takes: ten requests of 100
// spans, about what group commit gathers under compare's load.
const floorGroup = 10

// runFloor takes compare's OTLP requests apart into the stages a span goes
// through in serve and measures each from one goroutine, with no HTTP and
// no contention: the CPU and bytes each stage adds are the floor under
// the figures compare prints. With sequential trace ids every key the
// store writes arrives in order, as if rows were keyed by integers in
// arrival order, so that column bounds what that lever could pay.
func runFloor(c floorConfig, dir string, out io.Writer) error {
	ctx := context.Background()
	decode := func(body []byte) (ptraceotlp.ExportRequest, error) {
		req := ptraceotlp.NewExportRequest()
		return req, req.UnmarshalProto(body)
	}
	// intoLog inserts every group's events into a fresh store's event log
	// and nothing else, with their bodies or with {} for each.
	intoLog := func(ctx context.Context, path string, bodies [][]byte, emptied bool) error {
		db, err := sqlite.Open(ctx, path, c.sync)
		if err != nil {
			return err
		}
		defer db.Close()
		err = eachGroup(bodies, func(evs []trace.Event) error {
			if emptied {
				for i := range evs {
					evs[i].Body = emptyBody
				}
			}
			return db.Update(ctx, func(tx *store.Tx) error {
				_, err := tx.InsertEvents(evs, time.Now())
				return err
			})
		})
		if err != nil {
			return err
		}
		return db.Close()
	}
	stages := []floorStage{
		{"decode protobuf", func(_ context.Context, _ string, bodies [][]byte) error {
			for _, b := range bodies {
				if _, err := decode(b); err != nil {
					return err
				}
			}
			return nil
		}},
		{"decode, map to events", func(_ context.Context, _ string, bodies [][]byte) error {
			return eachGroup(bodies, func([]trace.Event) error { return nil })
		}},
		{"decode, map, insert into the event log only", func(ctx context.Context, path string, bodies [][]byte) error {
			return intoLog(ctx, path, bodies, false)
		}},
		{"the same, every body replaced by {} (the log's keys and indexes)", func(ctx context.Context, path string, bodies [][]byte) error {
			return intoLog(ctx, path, bodies, true)
		}},
		{"decode, map, the writer (all serve stores)", func(ctx context.Context, path string, bodies [][]byte) error {
			return runWriter(ctx, c.sync, path, bodies)
		}},
	}

	idKinds := []struct {
		name string
		ids  func(uint64) runIDs
	}{{"random ids", randomIDs}, {"sequential ids", sequentialIDs}}
	type figure struct {
		cpu  time.Duration // per span
		disk float64       // bytes per span, -1 without a file
	}
	results := make([][]figure, len(stages))
	for k, kind := range idKinds {
		bodies, spans, _, err := compareRequestsWith(c.spans, 1, "protobuf", kind.ids)
		if err != nil {
			return err
		}
		for s, st := range stages {
			path := filepath.Join(dir, fmt.Sprintf("floor-%d-%d.db", k, s))
			runtime.GC()
			begin := processCPU()
			if err := st.run(ctx, path, bodies[0]); err != nil {
				return fmt.Errorf("%s, %s: %w", st.name, kind.name, err)
			}
			f := figure{cpu: cpuSince(begin) / time.Duration(spans), disk: -1}
			if info, err := os.Stat(path); err == nil {
				f.disk = float64(info.Size()) / float64(spans)
			}
			results[s] = append(results[s], f)
		}
	}

	fmt.Fprintf(out, "compare's requests (%d spans, 100 a request, half oncetrace-shaped, half Vercel AI SDK-shaped), protobuf,\n", c.spans)
	fmt.Fprintf(out, "taken through serve's stages one after another from one goroutine, %d requests a commit, SQLite -sync %s.\n", floorGroup, c.sync)
	fmt.Fprintln(out, "CPU is this process's user+system time over the stage; bytes are the database file after it closes (checkpointed, no -wal left).")
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "stage\t")
	for _, kind := range idKinds {
		fmt.Fprintf(tw, "CPU µs/span, %s\tbytes/span, %s\t", kind.name, kind.name)
	}
	fmt.Fprintln(tw)
	for s, st := range stages {
		fmt.Fprintf(tw, "%s\t", st.name)
		for k := range idKinds {
			f := results[s][k]
			disk := "–"
			if f.disk >= 0 {
				disk = fmt.Sprintf("%.0f", f.disk)
			}
			fmt.Fprintf(tw, "%.1f\t%s\t", float64(f.cpu)/float64(time.Microsecond), disk)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	log, keys, full := results[2][0], results[3][0], results[4][0]
	fmt.Fprintf(out, "\ngoals: CPU ≤ %d µs a span, ≤ %d bytes on disk a span (random ids).\n", goalCPU.Microseconds(), goalDiskBytes)
	fmt.Fprintf(out, "the event log alone (random ids): %.1f µs and %.0f B a span, %.0f%% and %.0f%% of the goals;\n",
		float64(log.cpu)/float64(time.Microsecond), log.disk, 100*float64(log.cpu)/float64(goalCPU), 100*log.disk/goalDiskBytes)
	fmt.Fprintf(out, "of which its keys and indexes (bodies emptied): %.0f B a span, %.0f%% of the disk goal;\n", keys.disk, 100*keys.disk/goalDiskBytes)
	fmt.Fprintf(out, "everything derived from it adds %.1f µs and %.0f B a span.\n",
		float64(full.cpu-log.cpu)/float64(time.Microsecond), full.disk-log.disk)
	return nil
}

// decodeAndMap is serve's OTLP path up to the store: the request decoded
// and its spans mapped to events, none rejected.
func decodeAndMap(body []byte) ([]trace.Event, error) {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		return nil, err
	}
	res := ingest.MapOTLP(req.Traces(), ingest.OTLPConfig{Limits: ingest.DefaultLimits})
	if res.Rejected != 0 {
		return nil, fmt.Errorf("%d spans rejected: %v", res.Rejected, res.Reasons)
	}
	return res.Events, nil
}

// eachGroup maps the requests and calls fn with the events of floorGroup
// of them at a time, one commit's worth.
func eachGroup(bodies [][]byte, fn func([]trace.Event) error) error {
	var group []trace.Event
	for i, b := range bodies {
		evs, err := decodeAndMap(b)
		if err != nil {
			return err
		}
		group = append(group, evs...)
		if (i+1)%floorGroup == 0 || i == len(bodies)-1 {
			if err := fn(group); err != nil {
				return err
			}
			group = group[:0]
		}
	}
	return nil
}

// runWriter takes the requests through the writer into a fresh store at
// path, a group a commit: everything serve stores.
func runWriter(ctx context.Context, sync sqlite.Sync, path string, bodies [][]byte) error {
	db, err := sqlite.Open(ctx, path, sync)
	if err != nil {
		return err
	}
	defer db.Close()
	w := writer.New(db, writer.DefaultConfig)
	err = eachGroup(bodies, func(evs []trace.Event) error {
		_, err := w.Write(ctx, evs)
		return err
	})
	w.Close()
	if err != nil {
		return err
	}
	return db.Close()
}
