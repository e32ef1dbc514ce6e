package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// searchConfig is oncebench search's flags.
type searchConfig struct {
	runFlags
	small, large int // executions at the two sizes compared
	samples      int // queries of each kind at each size
}

func searchFlags(args []string) (searchConfig, error) {
	c := searchConfig{}
	fs := flag.NewFlagSet("oncebench search", flag.ContinueOnError)
	c.register(fs, "SQLite synchronous mode while the database is built", "1,000 and 10,000 executions instead of 1,000 and 100,000")
	fs.IntVar(&c.small, "small", 1_000, "executions at the small size (10 events each)")
	fs.IntVar(&c.large, "large", 100_000, "executions at the large size (10 events each)")
	fs.IntVar(&c.samples, "samples", 200, "queries of each kind at each size, each for a different value")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		c.large = 10_000
	}
	if c.small < 1 || c.large <= c.small || c.samples < 1 {
		return c, fmt.Errorf("want 0 < -small < -large and -samples ≥ 1")
	}
	return c, c.check()
}

// searchEventsPer is the events each generated execution has: the
// execution, a lookup, two attempts of an email with its two deliveries
// (the duplicate on-call searches for), a charge and a chat message each
// with its effect.
const searchEventsPer = 10

// searchRun generates execution i's events. Values repeat as they do in
// production: 500 customers, 40 tools, 64 workers; recipients and message
// ids are each execution's own.
func searchRun(i int, rng *rand.Rand) []map[string]any {
	id := fmt.Sprintf("exec_%08d", i)
	start := time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	at := func(ms int) string { return start.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	customer := searchCustomer(i)
	tool := fmt.Sprintf("send_%s_email", searchTool(i))
	worker := fmt.Sprintf("worker-%d", i%64)
	key := fmt.Sprintf("inv-%d-email", i)
	recipient := searchRecipient(i)
	return []map[string]any{
		{"type": "execution", "execution_id": id, "name": "billing-agent", "status": "completed", "started_at": at(0), "ended_at": at(30_000),
			"labels": map[string]any{"customer": customer, "region": []string{"eu-west", "us-east", "ap-south"}[i%3]}},
		{"type": "attempt", "execution_id": id, "step_id": "lookup", "attempt": 1, "tool": "lookup_customer", "effect": "read",
			"worker": worker, "started_at": at(10), "ended_at": at(200), "outcome": "ok"},
		{"type": "attempt", "execution_id": id, "step_id": "email", "attempt": 1, "tool": tool, "effect": "write", "provider": "mail",
			"idempotency_key": key, "worker": worker, "started_at": at(300), "ended_at": at(10_300), "outcome": "timeout"},
		{"type": "attempt", "execution_id": id, "step_id": "email", "attempt": 2, "tool": tool, "effect": "write", "provider": "mail",
			"idempotency_key": key, "worker": worker, "started_at": at(10_400), "ended_at": at(10_900), "outcome": "ok"},
		{"type": "effect", "provider": "mail", "effect_id": searchMessageID(rng), "idempotency_key": key, "target": recipient, "at": at(650)},
		{"type": "effect", "provider": "mail", "effect_id": searchMessageID(rng), "idempotency_key": key, "target": recipient, "at": at(10_600)},
		{"type": "attempt", "execution_id": id, "step_id": "charge", "attempt": 1, "tool": "charge_card", "effect": "write", "provider": "payments",
			"idempotency_key": "pay-" + id, "worker": worker, "started_at": at(11_000), "ended_at": at(11_400), "outcome": "ok"},
		{"type": "effect", "provider": "payments", "effect_id": fmt.Sprintf("ch_%d_%08x", i, rng.Uint32()), "idempotency_key": "pay-" + id,
			"target": "cus_" + customer, "at": at(11_200)},
		{"type": "attempt", "execution_id": id, "step_id": "notify", "attempt": 1, "tool": "post_slack", "effect": "write", "provider": "slack",
			"worker": worker, "started_at": at(12_000), "ended_at": at(12_100), "outcome": "ok"},
		{"type": "effect", "provider": "slack", "effect_id": fmt.Sprintf("ts_%d.%06d", 1719000000+i, i%1_000_000), "execution_id": id,
			"step_id": "notify", "target": "#billing-" + customer, "at": at(12_050)},
	}
}

func searchCustomer(i int) string  { return fmt.Sprintf("cust%03d", i%500) }
func searchTool(i int) string      { return fmt.Sprintf("kind%02d", i%40) }
func searchRecipient(i int) string { return fmt.Sprintf("user%d@%s.example", i, searchCustomer(i)) }

// searchMessageID is a provider's id as mail APIs make them: random hex.
func searchMessageID(rng *rand.Rand) string {
	return fmt.Sprintf("msg_%016x", rng.Uint64())
}

// searchKind is one kind of query: its words for execution i of n.
type searchKind struct {
	name  string
	words func(i int, messageID string) string
}

var searchKinds = []searchKind{
	{"recipient", func(i int, _ string) string { return searchRecipient(i) }},
	{"recipient token (customer domain)", func(i int, _ string) string { return searchCustomer(i) }},
	{"message id, whole", func(_ int, m string) string { return m }},
	{"message id, prefix of 10", func(_ int, m string) string { return m[:10] }},
	{"label customer:value", func(i int, _ string) string { return "customer:" + searchCustomer(i) }},
	{"tool (1 of 40)", func(i int, _ string) string { return fmt.Sprintf("send_%s_email", searchTool(i)) }},
	{"worker (1 of 64)", func(i int, _ string) string { return fmt.Sprintf("worker-%d", i%64) }},
	{"provider (every execution)", func(int, string) string { return "payments" }},
	{"execution id", func(i int, _ string) string { return fmt.Sprintf("exec_%08d", i) }},
	{"idempotency key", func(i int, _ string) string { return fmt.Sprintf("inv-%d-email", i) }},
	{"two words: customer and tool", func(i int, _ string) string {
		return "customer:" + searchCustomer(i) + " " + fmt.Sprintf("send_%s_email", searchTool(i))
	}},
	{"two words matching apart, none together", func(i int, _ string) string {
		return searchCustomer(i) + " " + searchCustomer(i+1)
	}},
	{"no match", func(i int, _ string) string { return fmt.Sprintf("nobody%d@nowhere.example", i) }},
	// The worst case: two words each in a third of the executions, never
	// together, so no index range is small and every execution is read.
	{"two broad words, never together", func(int, string) string { return "eu-west us-east" }},
}

// runSearch builds a database of -small executions, times every kind of
// query, grows it to -large and times them again.
func runSearch(c searchConfig, dir string, out io.Writer) error {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "search.db"), c.sync)
	if err != nil {
		return err
	}
	defer db.Close()
	w := writer.New(db, writer.DefaultConfig)
	defer w.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	messageIDs := make([]string, 0, c.large)

	fmt.Fprintf(out, "%d events an execution; every query lists the newest 50 matches (the list page's size), %d values a kind\n\n",
		searchEventsPer, c.samples)
	var small map[string]time.Duration
	for _, size := range []int{c.small, c.large} {
		begin, had := time.Now(), len(messageIDs)
		keep := func(_, n int, ev trace.Event) {
			if n == 4 {
				messageIDs = append(messageIDs, ev.Effect.ID)
			}
		}
		if err := buildDB(ctx, w, had, size, rng, searchRun, keep); err != nil {
			return err
		}
		built := time.Since(begin)
		terms, err := searchTermRows(ctx, db.Path)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "built %d executions (%d events): %.0f events/s through the writer; the index holds %d rows, %.1f an execution\n",
			size, size*searchEventsPer, float64((size-had)*searchEventsPer)/built.Seconds(), terms, float64(terms)/float64(size))
		times, err := timeSearches(ctx, db, size, c.samples, messageIDs)
		if err != nil {
			return err
		}
		if small == nil {
			small = times
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "query\tms at %d events\tms at %d events\tratio\t\n", c.small*searchEventsPer, size*searchEventsPer)
		for _, k := range searchKinds {
			fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.2f\t\n", k.name, millis(small[k.name]), millis(times[k.name]),
				float64(times[k.name])/float64(small[k.name]))
		}
		tw.Flush()
	}
	return nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// buildDB writes executions [from, to), as run generates them, through
// the writer, as the server does, from 8 senders so that group commit
// batches them; keep sees each parsed event (execution i's n-th). Batches
// are generated as the senders take them, so a million executions never
// sit in memory at once.
func buildDB(ctx context.Context, w *writer.Writer, from, to int, rng *rand.Rand,
	run func(int, *rand.Rand) []map[string]any, keep func(i, n int, ev trace.Event)) error {
	const perRequest = 100 // executions, 1,000 events
	next := make(chan []trace.Event)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for batch := range next {
				if _, err := w.Write(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	stop := func(err error) error {
		close(next)
		wg.Wait()
		if err != nil {
			return err
		}
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	}
	for start := from; start < to; start += perRequest {
		var batch []trace.Event
		for i := start; i < min(start+perRequest, to); i++ {
			for n, e := range run(i, rng) {
				raw, err := json.Marshal(e)
				if err != nil {
					return stop(err)
				}
				ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
				if err != nil {
					return stop(fmt.Errorf("generated event %s: %w", raw, err))
				}
				keep(i, n, ev)
				batch = append(batch, ev)
			}
		}
		select {
		case next <- batch:
		case err := <-errs:
			return stop(err)
		}
	}
	return stop(nil)
}

// timeSearches runs each kind of query for samples executions spread over
// the database and returns the median time of each kind. Every query must
// find what it was made from, so a fast empty answer cannot pass.
func timeSearches(ctx context.Context, db *store.DB, size, samples int, messageIDs []string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, k := range searchKinds {
		var times []time.Duration
		for s := range samples {
			i := (s*7919 + 13) % size
			q := k.words(i, messageIDs[i])
			begin := time.Now()
			list, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Q: q, Limit: 50})
			times = append(times, time.Since(begin))
			if err != nil {
				return nil, fmt.Errorf("search %q: %w", q, err)
			}
			wantNone := k.name == "no match" || k.name == "two words matching apart, none together" || k.name == "two broad words, never together"
			if wantNone != (len(list) == 0) {
				return nil, fmt.Errorf("search %q (%s): got %d executions", q, k.name, len(list))
			}
		}
		slices.Sort(times)
		out[k.name] = times[len(times)/2]
	}
	return out, nil
}

// searchTermRows counts the index's rows, over a connection of its own:
// the store has no reason to offer it.
func searchTermRows(ctx context.Context, path string) (int, error) {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM search_terms`).Scan(&n)
	return n, err
}
