package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// readsConfig is oncebench reads' flags.
type readsConfig struct {
	runFlags
	sizes   []int // executions in each database, smallest first
	samples int   // requests of each kind at each size
}

// readsGoal is issue 14's: every read at the largest size costs at most
// this many times what it costs at the smallest.
const readsGoal = 1.5

func readsFlags(args []string) (readsConfig, error) {
	c := readsConfig{}
	fs := flag.NewFlagSet("oncebench reads", flag.ContinueOnError)
	c.register(fs, "SQLite synchronous mode while the databases are built", "1,000 and 10,000 executions, 21 samples")
	sizes := fs.String("sizes", "10000,100000", "executions in each database, comma-separated, smallest first")
	million := fs.Bool("million", false, "add a database of 1,000,000 executions (builds for several minutes)")
	fs.IntVar(&c.samples, "samples", 101, "requests of each kind at each size, each for a different execution")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		*sizes, c.samples = "1000,10000", 21
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || (len(c.sizes) > 0 && n <= c.sizes[len(c.sizes)-1]) {
			return c, fmt.Errorf("-sizes wants increasing positive counts, not %q", *sizes)
		}
		c.sizes = append(c.sizes, n)
	}
	if *million && c.sizes[len(c.sizes)-1] < 1_000_000 {
		c.sizes = append(c.sizes, 1_000_000)
	}
	if len(c.sizes) < 2 || c.samples < 1 {
		return c, fmt.Errorf("want two sizes or more and -samples ≥ 1")
	}
	return c, c.check()
}

// readsExecution is what the reads look one generated execution up by.
type readsExecution struct {
	id, key, step, recipient string
}

// readsRun generates execution i's 10 events with random ids, as SDKs
// make them: a lookup, an email sent twice under one key (a duplicate, so
// a finding), a charge and a chat message, each write with its effect.
func readsRun(i int, rng *rand.Rand) []map[string]any {
	random := func(prefix string, n int) string {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		return prefix + hex.EncodeToString(b)
	}
	id := random("run_", 12)
	start := time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	at := func(ms int) string { return start.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	customer := searchCustomer(i)
	worker := fmt.Sprintf("worker-%d", i%64)
	emailStep, chargeStep, notifyStep := random("call_", 8), random("call_", 8), random("call_", 8)
	key, payKey := random("idem_", 10), random("pay_", 10)
	recipient := searchRecipient(i)
	return []map[string]any{
		{"type": "execution", "execution_id": id, "name": "billing-agent", "status": "completed", "started_at": at(0), "ended_at": at(30_000),
			"labels": map[string]any{"customer": customer}},
		{"type": "attempt", "execution_id": id, "step_id": random("call_", 8), "attempt": 1, "tool": "lookup_customer", "effect": "read",
			"worker": worker, "started_at": at(10), "ended_at": at(200), "outcome": "ok"},
		{"type": "attempt", "execution_id": id, "step_id": emailStep, "attempt": 1, "tool": "send_email", "effect": "write", "provider": "mail",
			"idempotency_key": key, "worker": worker, "started_at": at(300), "ended_at": at(10_300), "outcome": "timeout"},
		{"type": "attempt", "execution_id": id, "step_id": emailStep, "attempt": 2, "tool": "send_email", "effect": "write", "provider": "mail",
			"idempotency_key": key, "worker": worker, "started_at": at(10_400), "ended_at": at(10_900), "outcome": "ok"},
		{"type": "effect", "provider": "mail", "effect_id": searchMessageID(rng), "idempotency_key": key, "target": recipient, "at": at(650)},
		{"type": "effect", "provider": "mail", "effect_id": searchMessageID(rng), "idempotency_key": key, "target": recipient, "at": at(10_600)},
		{"type": "attempt", "execution_id": id, "step_id": chargeStep, "attempt": 1, "tool": "charge_card", "effect": "write", "provider": "payments",
			"idempotency_key": payKey, "worker": worker, "started_at": at(11_000), "ended_at": at(11_400), "outcome": "ok"},
		{"type": "effect", "provider": "payments", "effect_id": random("ch_", 12), "idempotency_key": payKey,
			"target": "cus_" + customer, "at": at(11_200)},
		{"type": "attempt", "execution_id": id, "step_id": notifyStep, "attempt": 1, "tool": "post_slack", "effect": "write", "provider": "slack",
			"worker": worker, "started_at": at(12_000), "ended_at": at(12_100), "outcome": "ok"},
		{"type": "effect", "provider": "slack", "effect_id": random("ts_", 8), "execution_id": id,
			"step_id": notifyStep, "target": "#billing-" + customer, "at": at(12_050)},
	}
}

// readsDB is one size's database, its server and what to ask it.
type readsDB struct {
	size       int
	db         *store.DB
	writer     *writer.Writer
	server     *web.Server
	executions map[int]*readsExecution // only the ones the samples ask for
	outbox     []string                // cursors into the outbox's second half
	findings   []string                // cursors into the findings' second half
}

// readKind is one kind of read: the request for sample s, and the text
// its answer must hold so that a fast empty answer cannot pass (a search
// must link the execution, not just repeat the words asked).
type readKind struct {
	name    string
	request func(d *readsDB, s int) (path, want string)
}

// sampleIndex is the execution sample s asks for, spread over the database.
func sampleIndex(s, size int) int { return (s*7919 + 13) % size }

func (d *readsDB) sample(s int) readsExecution { return *d.executions[sampleIndex(s, d.size)] }

var readKinds = []readKind{
	{"search: execution id", func(d *readsDB, s int) (string, string) {
		e := d.sample(s)
		return "/?q=" + url.QueryEscape(e.id), "/executions/" + url.PathEscape(e.id)
	}},
	{"search: idempotency key", func(d *readsDB, s int) (string, string) {
		e := d.sample(s)
		return "/?q=" + url.QueryEscape(e.key), "/executions/" + url.PathEscape(e.id)
	}},
	{"search: step id", func(d *readsDB, s int) (string, string) {
		e := d.sample(s)
		return "/?q=" + url.QueryEscape(e.step), "/executions/" + url.PathEscape(e.id)
	}},
	{"search: recipient", func(d *readsDB, s int) (string, string) {
		e := d.sample(s)
		return "/?q=" + url.QueryEscape(e.recipient), "/executions/" + url.PathEscape(e.id)
	}},
	{"list page", func(*readsDB, int) (string, string) { return "/", "/executions/" }},
	{"execution page", func(d *readsDB, s int) (string, string) {
		e := d.sample(s)
		return "/executions/" + url.PathEscape(e.id), e.key
	}},
	{"outbox, first page", func(*readsDB, int) (string, string) { return "/outbox", "cursor=" }},
	{"outbox, deep page (cursor)", func(d *readsDB, s int) (string, string) {
		return "/outbox?cursor=" + url.QueryEscape(d.outbox[s%len(d.outbox)]), "cursor="
	}},
	{"effects API, first page", func(*readsDB, int) (string, string) { return "/api/v1/effects", `"next"` }},
	{"findings API, first page (default limit)", func(*readsDB, int) (string, string) { return "/api/v1/findings", `"next"` }},
	{"findings API, deep page (cursor)", func(d *readsDB, s int) (string, string) {
		return "/api/v1/findings?cursor=" + url.QueryEscape(d.findings[s%len(d.findings)]), `"next"`
	}},
}

// runReads builds a database of each size through the writer, then asks
// every size every kind of read in turn, samples times, and prints the
// median of each with the ratio of the largest size to the smallest.
func runReads(c readsConfig, dir string, out io.Writer) error {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var dbs []*readsDB
	defer func() {
		for _, d := range dbs {
			d.writer.Close()
			d.db.Close()
		}
	}()
	for _, size := range c.sizes {
		db, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("reads-%d.db", size)), c.sync)
		if err != nil {
			return err
		}
		// Only the sampled executions are kept, so that the peak RSS below
		// is the writer's and not this program's bookkeeping.
		d := &readsDB{size: size, db: db, writer: writer.New(db, writer.DefaultConfig), executions: map[int]*readsExecution{}}
		for s := range c.samples {
			d.executions[sampleIndex(s, size)] = &readsExecution{}
		}
		dbs = append(dbs, d)
		keep := func(i, n int, ev trace.Event) {
			e := d.executions[i]
			if e == nil {
				return
			}
			switch n {
			case 0:
				e.id = ev.Execution.ID
			case 2:
				e.key, e.step = ev.Attempt.IdempotencyKey, ev.Attempt.StepID
			case 4:
				e.recipient = ev.Effect.Target
			}
		}
		// What the builds before left behind is returned to the system
		// first, so that the peak is this build's.
		debug.FreeOSMemory()
		begin := time.Now()
		peak := watchPeakRSS()
		if err := buildDB(ctx, d.writer, 0, size, rand.New(rand.NewPCG(uint64(size), 2)), readsRun, keep); err != nil {
			return err
		}
		built, peakRSS := time.Since(begin), peak()
		// The reads get a writer of their own that has cached nothing, so
		// that the next build's peak holds no cache of this one.
		d.writer.Close()
		d.writer = writer.New(db, writer.DefaultConfig)
		if d.outbox, err = outboxCursors(ctx, db); err != nil {
			return err
		}
		if d.findings, err = findingCursors(ctx, db); err != nil {
			return err
		}
		d.server = web.New(web.Config{DB: db, Writer: d.writer, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, Logger: logger})
		fmt.Fprintf(out, "built %d executions (%d events) in %s: %.0f events/s through the writer; peak RSS while building %d MiB (goal < %d MiB), file %d MiB\n",
			size, size*searchEventsPer, built.Round(time.Second), float64(size*searchEventsPer)/built.Seconds(),
			peakRSS>>20, readsRSSGoal>>20, fileSize(filepath.Join(dir, fmt.Sprintf("reads-%d.db", size)))>>20)
	}

	times := make([]map[string][]time.Duration, len(dbs))
	for i := range times {
		times[i] = map[string][]time.Duration{}
	}
	for s := range c.samples {
		for i, d := range dbs {
			for _, k := range readKinds {
				path, want := k.request(d, s)
				req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
				rec := httptest.NewRecorder()
				begin := time.Now()
				d.server.ServeHTTP(rec, req)
				times[i][k.name] = append(times[i][k.name], time.Since(begin))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
					return fmt.Errorf("%s at %d executions: GET %s: %d, want %q in the answer", k.name, d.size, path, rec.Code, want)
				}
			}
		}
	}

	fmt.Fprintf(out, "\nmedian ms of %d requests of each kind, interleaved across kinds and sizes; goal: largest ≤ %.1f× smallest\n\n", c.samples, readsGoal)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "read\t")
	for _, d := range dbs {
		fmt.Fprintf(tw, "%s\t", countLabel(d.size))
	}
	fmt.Fprintf(tw, "%s/%s\tgoal\t\n", countLabel(dbs[len(dbs)-1].size), countLabel(dbs[0].size))
	met := 0
	for _, k := range readKinds {
		fmt.Fprintf(tw, "%s\t", k.name)
		var medians []time.Duration
		for i := range dbs {
			m := medianDuration(times[i][k.name])
			medians = append(medians, m)
			fmt.Fprintf(tw, "%.3f\t", millis(m))
		}
		ratio := float64(medians[len(medians)-1]) / float64(medians[0])
		verdict := "not met"
		if ratio <= readsGoal {
			verdict, met = "met", met+1
		}
		fmt.Fprintf(tw, "%.2f\t%s\t\n", ratio, verdict)
	}
	tw.Flush()
	fmt.Fprintf(out, "\n%d of %d reads meet the goal\n", met, len(readKinds))
	return nil
}

// readsRSSGoal is issue 14's bound on resident memory throughout a
// 1M-execution ingest.
const readsRSSGoal = 200 << 20

// watchPeakRSS samples this process's resident memory every 100 ms until
// the function it returns is called, which answers the highest sample.
// The process holds the generator, the writer and the database handles,
// so this is an upper bound on what a server ingesting the same would hold.
func watchPeakRSS() func() int64 {
	done := make(chan struct{})
	result := make(chan int64)
	go func() {
		peak := processRSS()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				peak = max(peak, processRSS())
			case <-done:
				result <- max(peak, processRSS())
				return
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

// fileSize is the size of the file at path, with its -wal, or 0.
func fileSize(path string) int64 {
	var total int64
	for _, p := range []string{path, path + "-wal"} {
		if info, err := os.Stat(p); err == nil {
			total += info.Size()
		}
	}
	return total
}

// countLabel is 10k, 100k, 1M: how the issue names the sizes.
func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.Itoa(n)
}

// outboxCursors reads the whole outbox a page of 250 at a time and keeps
// the cursors of its second half, where a deep page starts.
func outboxCursors(ctx context.Context, db *store.DB) ([]string, error) {
	var cursors []string
	for cursor := ""; ; {
		_, next, err := db.Effects(ctx, store.EffectFilter{Cursor: cursor, Limit: 250})
		if err != nil {
			return nil, err
		}
		if next == "" {
			break
		}
		cursors, cursor = append(cursors, next), next
	}
	if len(cursors) == 0 {
		return nil, fmt.Errorf("the outbox has a single page")
	}
	return cursors[len(cursors)/2:], nil
}

// findingCursors is outboxCursors for the findings list.
func findingCursors(ctx context.Context, db *store.DB) ([]string, error) {
	var cursors []string
	for cursor := ""; ; {
		_, next, err := db.FindingsPage(ctx, store.FindingFilter{Cursor: cursor, Limit: 250})
		if err != nil {
			return nil, err
		}
		if next == "" {
			break
		}
		cursors, cursor = append(cursors, next), next
	}
	if len(cursors) == 0 {
		return nil, fmt.Errorf("the findings list has a single page")
	}
	return cursors[len(cursors)/2:], nil
}
