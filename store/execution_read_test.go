package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// openCountingDB is openDB with the readers' statements counted.
func openCountingDB(t *testing.T) (*store.DB, *writer.Writer, *queryCounter) {
	sqliteOnly(t) // the count is of SQLite's driver calls
	t.Helper()
	db, counter := openCounting(t, filepath.Join(t.TempDir(), "oncetrace.db"))
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(func() {
		w.Close()
		db.Close()
	})
	return db, w, counter
}

// countQueries returns how many statements fn ran on the readers.
func countQueries(t *testing.T, c *queryCounter, fn func() error) int64 {
	t.Helper()
	before := c.Count()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	return c.Count() - before
}

// executionEvents is an execution of steps write steps of attempts
// attempts each (all but the last timing out), the first effects of them
// with an effect in mail-api's outbox; every step carries its own key.
func executionEvents(id string, start time.Time, steps, attempts, effects int) []map[string]any {
	events := []map[string]any{{"type": "execution", "execution_id": id, "name": "billing-agent", "status": "completed",
		"started_at": stamp(start), "ended_at": stamp(start.Add(time.Hour))}}
	at := start
	for s := range steps {
		stepID, key := fmt.Sprintf("send-%03d", s), fmt.Sprintf("%s-ik-%03d", id, s)
		for n := 1; n <= attempts; n++ {
			outcome := "timeout"
			if n == attempts {
				outcome = "ok"
			}
			at = at.Add(time.Second)
			events = append(events, map[string]any{"type": "attempt", "execution_id": id, "step_id": stepID, "attempt": n,
				"effect": "write", "provider": "mail-api", "idempotency_key": key,
				"started_at": stamp(at), "ended_at": stamp(at.Add(500 * time.Millisecond)), "outcome": outcome})
		}
		if s < effects {
			events = append(events, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "m-" + key,
				"idempotency_key": key, "execution_id": id, "step_id": stepID, "at": stamp(at.Add(100 * time.Millisecond))})
		}
	}
	return events
}

// retriedUnsafe is a step of execution id that must not be retried,
// retried: a finding.
func retriedUnsafe(id string, start time.Time) []map[string]any {
	var events []map[string]any
	for n := 1; n <= 2; n++ {
		events = append(events, map[string]any{"type": "attempt", "execution_id": id, "step_id": "wire", "attempt": n, "effect": "unsafe",
			"started_at": stamp(start.Add(time.Duration(n) * time.Second)), "ended_at": stamp(start.Add(time.Duration(n)*time.Second + 500*time.Millisecond)),
			"outcome": []string{"timeout", "ok"}[n-1]})
	}
	return events
}

// nearbyAlways asks ReadExecution for orphans in every case, so that the
// counts below include that query.
func nearbyAlways(r trace.Run, _ []trace.Finding) store.OrphanWindow {
	return store.OrphanWindow{From: r.Execution.StartedAt, To: r.Execution.EndedAt, Limit: 20}
}

func TestReadExecutionQueriesDoNotGrowWithTheExecution(t *testing.T) {
	db, w, counter := openCountingDB(t)
	write(t, w, append(executionEvents("small", base, 5, 2, 5), retriedUnsafe("small", base)...)...)
	write(t, w, append(executionEvents("large", base.Add(2*time.Hour), 100, 10, 100), retriedUnsafe("large", base.Add(2*time.Hour))...)...)
	ctx := context.Background()

	counts := map[string]int64{}
	reads := map[string]store.ExecutionRead{}
	for _, id := range []string{"small", "large"} {
		counts[id] = countQueries(t, counter, func() (err error) {
			reads[id], err = db.ReadExecution(ctx, id, nearbyAlways)
			return err
		})
	}
	large := reads["large"]
	attempts := 0
	for _, s := range large.Run.Steps {
		attempts += len(s.Attempts)
	}
	if attempts != 1002 || len(large.Run.Effects) != 100 || len(large.States) != 100 {
		t.Fatalf("large execution: got %d attempts, %d effects, %d states, want 1002, 100, 100", attempts, len(large.Run.Effects), len(large.States))
	}
	if len(large.Findings) == 0 {
		t.Fatal("large execution: got no findings, want the retried writes' (the count must include that query)")
	}
	// The change token, one for the fed providers, six for the run
	// (execution, attempts, spans; the run's keys and traces, effects
	// with their states, key peers), findings, nearby orphans; and the
	// change token again, of the second snapshot the keys, effects, peers
	// and findings are read on.
	const want = 11
	if counts["small"] != want || counts["large"] != want {
		t.Errorf("queries: got %d for 12 attempts and 5 effects, %d for 1,002 attempts and 100 effects, want %d each",
			counts["small"], counts["large"], want)
	}

	// What one read returns is what the separate reads return.
	run, err := db.Run(ctx, "large")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(run, large.Run) {
		t.Error("ReadExecution's run differs from Run's")
	}
	findings, err := db.Findings(ctx, store.FindingFilter{ExecutionID: "large"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(findings, large.Findings) {
		t.Errorf("findings: got %d, want %d as Findings returns", len(large.Findings), len(findings))
	}
	for _, f := range large.Run.Effects {
		if large.States[f.Ref()] != trace.MatchMatched {
			t.Errorf("state of %s: got %q, want %q", f.ID, large.States[f.Ref()], trace.MatchMatched)
		}
	}
}

func TestEffectStatesOneQuery(t *testing.T) {
	db, w, counter := openCountingDB(t)
	write(t, w, executionEvents("x", base, 40, 1, 30)...)
	write(t, w, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "stray", "at": stamp(base)})
	ctx := context.Background()
	run, err := db.Run(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	refs := []trace.EffectRef{{Provider: "mail-api", ID: "stray"}}
	for _, f := range run.Effects {
		refs = append(refs, f.Ref())
	}
	var states map[trace.EffectRef]trace.MatchState
	n := countQueries(t, counter, func() (err error) {
		states, err = db.EffectStates(ctx, refs)
		return err
	})
	if n != 1 {
		t.Errorf("queries for %d states: got %d, want 1", len(refs), n)
	}
	if len(states) != 31 || states[refs[0]] != trace.MatchOrphan || states[refs[1]] != trace.MatchMatched {
		t.Errorf("states: got %d (stray %q, first %q), want 31 (orphan, matched)", len(states), states[refs[0]], states[refs[1]])
	}
	if _, err := db.EffectStates(ctx, []trace.EffectRef{{Provider: "mail-api", ID: "never-sent"}}); err == nil {
		t.Error("state of an effect never stored: got no error, want not found")
	}
}

func TestListExecutionsQueriesDoNotGrowWithThePage(t *testing.T) {
	db, w, counter := openCountingDB(t)
	var events []map[string]any
	for i := range 60 {
		events = append(events, executionEvents(fmt.Sprintf("exec_%03d", i), base.Add(time.Duration(i)*time.Hour), 2, 2, 1)...)
	}
	write(t, w, events...)
	ctx := context.Background()
	for _, q := range []string{"", "billing"} {
		counts := map[int]int64{}
		for _, limit := range []int{5, 50} {
			counts[limit] = countQueries(t, counter, func() error {
				list, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Q: q, Limit: limit})
				if err == nil && len(list) != limit {
					err = fmt.Errorf("q %q: got %d rows, want %d", q, len(list), limit)
				}
				return err
			})
		}
		// The page is one query; a search adds its term lookup.
		want := int64(1)
		if q != "" {
			want = 2
		}
		if counts[5] != want || counts[50] != want {
			t.Errorf("q %q: got %d queries for 5 rows, %d for 50, want %d each", q, counts[5], counts[50], want)
		}
	}
}

// keyEvents is n executions each retrying a charge under one shared key,
// with an effect of it, besides their own steps.
func keyEvents(n int) []map[string]any {
	var events []map[string]any
	for i := range n {
		id := fmt.Sprintf("k_%02d", i)
		start := base.Add(time.Duration(i) * time.Hour)
		events = append(events, executionEvents(id, start, 3, 2, 2)...)
		for a := 1; a <= 2; a++ {
			events = append(events, map[string]any{"type": "attempt", "execution_id": id, "step_id": "charge", "attempt": a,
				"effect": "write", "provider": "pay", "idempotency_key": "ik_shared",
				"started_at": stamp(start.Add(time.Duration(10*a) * time.Minute)), "ended_at": stamp(start.Add(time.Duration(10*a+1) * time.Minute)),
				"outcome": []string{"timeout", "ok"}[a-1]})
		}
		events = append(events, map[string]any{"type": "effect", "provider": "pay", "effect_id": "ch-" + id, "idempotency_key": "ik_shared",
			"execution_id": id, "step_id": "charge", "at": stamp(start.Add(21 * time.Minute))})
	}
	return events
}

func TestReadKeyQueriesDoNotGrowWithItsExecutions(t *testing.T) {
	ctx := context.Background()
	counts := map[int]int64{}
	for _, n := range []int{2, 20} {
		db, w, counter := openCountingDB(t)
		write(t, w, keyEvents(n)...)
		var r store.KeyRead
		counts[n] = countQueries(t, counter, func() (err error) {
			r, err = db.ReadKey(ctx, "ik_shared")
			return err
		})
		if len(r.Attempts) != 2*n || len(r.Runs) != n || len(r.Effects) != n {
			t.Fatalf("%d executions: got %d attempts, %d runs, %d effects, want %d, %d, %d",
				n, len(r.Attempts), len(r.Runs), len(r.Effects), 2*n, n, n)
		}
		// Read together, each run is what reading it alone gives.
		for id, got := range r.Runs {
			want, err := db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%d executions: run %s read with the others differs from it read alone", n, id)
			}
		}
	}
	// Attempts, fed providers, five for the runs, effects, findings.
	const want = 9
	if counts[2] != want || counts[20] != want {
		t.Errorf("queries: got %d for a key of 2 executions, %d for 20, want %d each", counts[2], counts[20], want)
	}
}

func TestReadExecutionIsOneSnapshot(t *testing.T) {
	db, w := openDB(t)
	write(t, w,
		map[string]any{"type": "execution", "execution_id": "x", "name": "billing-agent", "status": "running", "started_at": stamp(base)},
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "wire", "attempt": 1, "effect": "unsafe",
			"started_at": stamp(base.Add(time.Second)), "ended_at": stamp(base.Add(2 * time.Second)), "outcome": "timeout"})
	ctx := context.Background()

	// The retry commits after the read has read the run, before it reads
	// the findings: both must be from before it.
	var once sync.Once
	store.SetAfterRunRead(t, func() {
		once.Do(func() {
			write(t, w, map[string]any{"type": "attempt", "execution_id": "x", "step_id": "wire", "attempt": 2, "effect": "unsafe",
				"started_at": stamp(base.Add(3 * time.Second)), "ended_at": stamp(base.Add(4 * time.Second)), "outcome": "ok"})
		})
	})
	before, err := db.ChangeToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	during, err := db.ReadExecution(ctx, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := db.ReadExecution(ctx, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.Run.Steps[0].Attempts); n != 2 || len(after.Findings) == 0 {
		t.Fatalf("after the retry: got %d attempts and %d findings, want 2 and the retried unsafe step's", n, len(after.Findings))
	}
	if n := len(during.Run.Steps[0].Attempts); n != 1 || len(during.Findings) != 0 {
		t.Errorf("read across the retry's commit: got %d attempts and %d findings, want 1 and 0 (the state before it)", n, len(during.Findings))
	}
	// The token is the snapshot's: the read across the commit names the
	// state before it, the one after a new state.
	if during.Token != before || after.Token == during.Token {
		t.Errorf("change tokens: got %+v before, %+v across the commit, %+v after; want the first two equal, the last different",
			before, during.Token, after.Token)
	}
}

// TestPagesQueriesDoNotGrowWithTheirRows serves the executions list, as
// a page and as JSON, at 5 and at 50 rows, and an execution's page and
// JSON twin for 12 and for 1,002 attempts: each handler runs the same
// number of queries however many rows or attempts it shows, none per row.
// It lives here because the statements are counted by this package's
// test driver.
func TestPagesQueriesDoNotGrowWithTheirRows(t *testing.T) {
	db, w, counter := openCountingDB(t)
	var events []map[string]any
	for i := range 60 {
		events = append(events, executionEvents(fmt.Sprintf("exec_%03d", i), base.Add(time.Duration(i)*time.Hour), 2, 2, 1)...)
	}
	write(t, w, events...)
	write(t, w, append(executionEvents("small", base.Add(-3*time.Hour), 5, 2, 5), retriedUnsafe("small", base.Add(-3*time.Hour))...)...)
	write(t, w, append(executionEvents("large", base.Add(-2*time.Hour), 100, 10, 100), retriedUnsafe("large", base.Add(-2*time.Hour))...)...)
	// Nothing built ahead: every query counted is a request's.
	srv := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, NoBuildAhead: true})
	t.Cleanup(srv.Close)

	// serve GETs path and returns how many queries it ran and what it
	// answered.
	serve := func(path string) (int64, string) {
		t.Helper()
		var body string
		n := countQueries(t, counter, func() error {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusOK {
				return fmt.Errorf("GET %s: got %d %s, want 200", path, rec.Code, rec.Body)
			}
			body = rec.Body.String()
			return nil
		})
		return n, body
	}
	rowsOf := map[string]func(string) int{
		"/": func(body string) int { return strings.Count(body, `data-testid="execution-row"`) },
		"/api/v1/executions": func(body string) int {
			var list struct{ Executions []json.RawMessage }
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatalf("executions list: %v", err)
			}
			return len(list.Executions)
		},
	}
	for path, rows := range rowsOf {
		counts := map[int]int64{}
		for _, limit := range []int{5, 50} {
			var body string
			counts[limit], body = serve(path + "?limit=" + strconv.Itoa(limit))
			if got := rows(body); got != limit {
				t.Errorf("GET %s?limit=%d: got %d rows, want %d", path, limit, got, limit)
			}
		}
		// The store's one query; the handler adds none.
		if counts[5] != 1 || counts[50] != 1 {
			t.Errorf("GET %s: got %d queries for 5 rows, %d for 50, want 1 each", path, counts[5], counts[50])
		}
	}

	for _, path := range []string{"/executions/", "/api/v1/executions/"} {
		counts := map[string]int64{}
		for _, id := range []string{"small", "large"} {
			var body string
			counts[id], body = serve(path + id)
			if !strings.Contains(body, "send-099") && id == "large" {
				t.Errorf("GET %s%s: got no step send-099, want all 100 steps", path, id)
			}
		}
		// The page: ReadExecution's queries (the change token, the fed
		// providers, six for the run, findings, the second snapshot's
		// token); these executions are not
		// unverified, so no orphans are read, and the web keeps no model of
		// them yet. The JSON twin, with nothing
		// committed since: the model the page's read built, after one
		// query, the change token's.
		want := int64(10)
		if path == "/api/v1/executions/" {
			want = 1
		}
		if counts["small"] != want || counts["large"] != want {
			t.Errorf("GET %s: got %d queries for 12 attempts, %d for 1,002, want %d each", path, counts["small"], counts["large"], want)
		}
	}
	// Read again with nothing committed since, the model the first read
	// built answers: one query, the change token's. After a commit, of
	// any execution, the token differs and the page is read afresh.
	if n, _ := serve("/executions/large"); n != 1 {
		t.Errorf("GET /executions/large again: got %d queries, want 1 (the change token; the model kept)", n)
	}
	write(t, w, map[string]any{"type": "execution", "execution_id": "other", "name": "other-agent", "status": "running"})
	if n, _ := serve("/executions/large"); n != 11 {
		t.Errorf("GET /executions/large after a commit: got %d queries, want 11 (the token, then the whole read)", n)
	}
}

// The empty key is no key: the attempts that carry none are not one key's
// attempts, and the reads by key (attempts_key holds only keyed attempts)
// find none of them.
func TestEmptyKeyFindsNoAttempts(t *testing.T) {
	db, w := openDB(t)
	write(t, w,
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "read", "attempt": 1, "effect": "read",
			"started_at": stamp(base), "ended_at": stamp(base.Add(time.Second)), "outcome": "ok"},
		map[string]any{"type": "attempt", "execution_id": "y", "step_id": "pay", "attempt": 1, "effect": "unsafe", "idempotency_key": "ik_y",
			"started_at": stamp(base), "ended_at": stamp(base.Add(time.Second)), "outcome": "ok"})
	ctx := context.Background()
	if got, err := db.AttemptsWithKey(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("attempts with the empty key: got %d (%v), want none", len(got), err)
	}
	if got, err := db.AttemptsWithKey(ctx, "ik_y"); err != nil || len(got) != 1 || got[0].ExecutionID != "y" {
		t.Errorf("attempts with ik_y: got %+v (%v), want y's one", got, err)
	}
}
