package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

var base = time.Date(2026, 6, 30, 8, 0, 0, 0, time.UTC)

func stamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

// openDB opens a fresh database file; the cleanup closes the writer first,
// so that it commits what is queued while the database is still open.
func openDB(t *testing.T) (*store.DB, *writer.Writer) {
	t.Helper()
	db := openEngine(t)
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(func() {
		w.Close()
		db.Close()
	})
	return db, w
}

// write stores events the way the server does: parsed by ingest, committed
// by the writer.
func write(t *testing.T, w *writer.Writer, events ...map[string]any) writer.Result {
	t.Helper()
	parsed := make([]trace.Event, 0, len(events))
	for _, e := range events {
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("event %s: %v", raw, err)
		}
		parsed = append(parsed, ev)
	}
	res, err := w.Write(context.Background(), parsed)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestOpenAppliesMigrationsOnce(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "oncetrace.db")
	first, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(first, writer.DefaultConfig)
	write(t, w, map[string]any{"type": "execution", "execution_id": "exec_1", "status": "running", "started_at": stamp(base)})
	w.Close()

	// A second handle while the first is open, then a reopen after both
	// closed: neither may apply a migration again or lose data.
	second, err := sqlite.Open(ctx, path, sqlite.SyncFull)
	if err != nil {
		t.Fatalf("second open while the first is open: %v", err)
	}
	second.Close()
	first.Close()
	third, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer third.Close()
	if _, err := third.Run(ctx, "exec_1"); err != nil {
		t.Errorf("exec_1 after reopening: got %v, want it found", err)
	}

	entries, err := os.ReadDir("sqlite/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			files = append(files, e.Name())
		}
	}
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.QueryContext(ctx, `SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		applied = append(applied, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, files) {
		t.Errorf("migrations table: got %v, want one row per file %v", applied, files)
	}

	// WAL is a property of the file, so a plain connection sees it.
	var mode string
	if err := raw.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode: got %q, want wal", mode)
	}
}

func TestOpenRejectsUnknownSync(t *testing.T) {
	sqliteOnly(t)
	_, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), sqlite.Sync("sometimes"))
	if err == nil || !strings.Contains(err.Error(), "sync") {
		t.Errorf("Open with sync sometimes: got %v, want an error naming sync", err)
	}
}

// fixtureExecution is what the list fixture knows about one execution, to
// compute the expected answer of each filter.
type fixtureExecution struct {
	id, name, key string
	status        trace.Status
	start         time.Time
	findings      bool
	steps, keys   []string
}

// listFixture stores 120 executions: statuses and names in cycles, some
// sharing a start time (so that pagination must break ties by id), every
// sixth with a retried unsafe step (a finding).
func listFixture(t *testing.T) (*store.DB, []fixtureExecution) {
	t.Helper()
	db, w := openDB(t)
	var fx []fixtureExecution
	var events []map[string]any
	for i := range 120 {
		x := fixtureExecution{
			id:     fmt.Sprintf("exec_%03d", i),
			name:   []string{"billing-agent", "support-agent", "ops-bot"}[i%3],
			status: trace.Statuses[i%4],
			start:  base.Add(time.Duration(i) * time.Minute),
		}
		if i%10 == 9 {
			x.start = base.Add(time.Duration(i-1) * time.Minute)
		}
		if i%4 == 0 {
			x.key = fmt.Sprintf("run_%03d", i)
		}
		ev := map[string]any{"type": "execution", "execution_id": x.id, "name": x.name, "status": string(x.status), "started_at": stamp(x.start)}
		if x.key != "" {
			ev["idempotency_key"] = x.key
		}
		if x.status.Terminal() {
			ev["ended_at"] = stamp(x.start.Add(50 * time.Second))
		}
		events = append(events, ev)

		stepID := "fetch"
		if i == 42 {
			stepID = "refund-7"
		}
		key := fmt.Sprintf("ik_%03d", i)
		x.steps, x.keys = []string{stepID, "record"}, []string{key}
		events = append(events,
			map[string]any{"type": "attempt", "execution_id": x.id, "step_id": stepID, "attempt": 1, "effect": "read",
				"started_at": stamp(x.start.Add(time.Second)), "ended_at": stamp(x.start.Add(2 * time.Second)), "outcome": "ok"},
			map[string]any{"type": "attempt", "execution_id": x.id, "step_id": "record", "attempt": 1, "effect": "write",
				"idempotency_key": key, "started_at": stamp(x.start.Add(3 * time.Second)), "ended_at": stamp(x.start.Add(4 * time.Second)), "outcome": "ok"})
		if i%6 == 0 {
			x.findings = true
			x.steps = append(x.steps, "wire")
			for n := 1; n <= 2; n++ {
				events = append(events, map[string]any{"type": "attempt", "execution_id": x.id, "step_id": "wire", "attempt": n, "effect": "unsafe",
					"started_at": stamp(x.start.Add(time.Duration(4+n) * time.Second)), "ended_at": stamp(x.start.Add(time.Duration(4+n)*time.Second + 500*time.Millisecond)),
					"outcome": []string{"timeout", "ok"}[n-1]})
			}
		}
		fx = append(fx, x)
	}
	write(t, w, events...)
	return db, fx
}

// newestFirst is the order of the executions list.
func newestFirst(fx []fixtureExecution) []string {
	sorted := slices.Clone(fx)
	slices.SortFunc(sorted, func(a, b fixtureExecution) int {
		if c := b.start.Compare(a.start); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	var ids []string
	for _, x := range sorted {
		ids = append(ids, x.id)
	}
	return ids
}

func TestListExecutionsFilters(t *testing.T) {
	db, fx := listFixture(t)
	yes, no := true, false
	tests := []struct {
		name   string
		filter store.ExecutionFilter
		want   func(fixtureExecution) bool
	}{
		{"everything", store.ExecutionFilter{}, func(fixtureExecution) bool { return true }},
		{"status", store.ExecutionFilter{Status: trace.StatusFailed}, func(x fixtureExecution) bool { return x.status == trace.StatusFailed }},
		{"name", store.ExecutionFilter{Name: "ops-bot"}, func(x fixtureExecution) bool { return x.name == "ops-bot" }},
		{"has findings", store.ExecutionFilter{HasFindings: &yes}, func(x fixtureExecution) bool { return x.findings }},
		{"has no findings", store.ExecutionFilter{HasFindings: &no}, func(x fixtureExecution) bool { return !x.findings }},
		{"q: execution id prefix", store.ExecutionFilter{Q: "exec_04"}, func(x fixtureExecution) bool { return strings.HasPrefix(x.id, "exec_04") }},
		{"q: whole execution id", store.ExecutionFilter{Q: "exec_042"}, func(x fixtureExecution) bool { return x.id == "exec_042" }},
		// _ and % are literal in a search, not LIKE wildcards.
		{"q: underscore is literal", store.ExecutionFilter{Q: "exec_1_"}, func(fixtureExecution) bool { return false }},
		{"q: percent is literal", store.ExecutionFilter{Q: "exec%"}, func(fixtureExecution) bool { return false }},
		{"q: step id", store.ExecutionFilter{Q: "refund-7"}, func(x fixtureExecution) bool { return slices.Contains(x.steps, "refund-7") }},
		{"q: attempt key", store.ExecutionFilter{Q: "ik_017"}, func(x fixtureExecution) bool { return slices.Contains(x.keys, "ik_017") }},
		{"q: execution key", store.ExecutionFilter{Q: "run_008"}, func(x fixtureExecution) bool { return x.key == "run_008" }},
		{"q: step id of many", store.ExecutionFilter{Q: "wire"}, func(x fixtureExecution) bool { return slices.Contains(x.steps, "wire") }},
		{"from and to, inclusive", store.ExecutionFilter{From: base.Add(30 * time.Minute), To: base.Add(40 * time.Minute)},
			func(x fixtureExecution) bool {
				return !x.start.Before(base.Add(30*time.Minute)) && !x.start.After(base.Add(40*time.Minute))
			}},
		{"status, name and findings together",
			store.ExecutionFilter{Status: trace.StatusRunning, Name: "billing-agent", HasFindings: &yes},
			func(x fixtureExecution) bool {
				return x.status == trace.StatusRunning && x.name == "billing-agent" && x.findings
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []fixtureExecution
			for _, x := range fx {
				if tt.want(x) {
					want = append(want, x)
				}
			}
			f := tt.filter
			f.Limit = store.MaxPageSize
			list, next, err := db.ListExecutions(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range list {
				got = append(got, s.ID)
			}
			if wantIDs := newestFirst(want); !slices.Equal(got, wantIDs) {
				t.Errorf("got %v, want %v", got, wantIDs)
			}
			if next != "" {
				t.Errorf("next: got %q, want none on the only page", next)
			}
		})
	}
}

// TestListExecutionsByAuditState: the audit state filter gives the rows of
// that state, newest first (the list's own audit_state says which).
func TestListExecutionsByAuditState(t *testing.T) {
	db, _ := listFixture(t)
	ctx := context.Background()
	all, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	byState := map[trace.AuditState][]string{}
	for _, s := range all {
		byState[s.AuditState] = append(byState[s.AuditState], s.ID)
	}
	if len(byState[trace.StateCritical]) == 0 || len(byState[trace.StateCritical]) == len(all) {
		t.Fatalf("the fixture has %d critical executions of %d; want some, not all", len(byState[trace.StateCritical]), len(all))
	}
	for _, state := range []trace.AuditState{trace.StateCritical, trace.StateUnverified, trace.StateClean} {
		list, _, err := db.ListExecutions(ctx, store.ExecutionFilter{AuditState: state, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range list {
			got = append(got, s.ID)
		}
		if !slices.Equal(got, byState[state]) {
			t.Errorf("%s: got %v, want %v", state, got, byState[state])
		}
	}
}

func TestListExecutionsRowCounts(t *testing.T) {
	db, _ := listFixture(t)
	list, _, err := db.ListExecutions(context.Background(), store.ExecutionFilter{Q: "exec_006"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("got %d rows, want 1", len(list))
	}
	s := list[0]
	got := fmt.Sprintf("steps %d attempts %d retries %d findings %d critical %d", s.Steps, s.Attempts, s.Retries, s.Findings, s.CriticalFindings)
	if want := "steps 3 attempts 4 retries 1 findings 1 critical 1"; got != want {
		t.Errorf("exec_006: got %s, want %s", got, want)
	}
}

func TestListExecutionsPagination(t *testing.T) {
	db, fx := listFixture(t)
	ctx := context.Background()
	var got []string
	var pages []int
	cursor := ""
	for {
		list, next, err := db.ListExecutions(ctx, store.ExecutionFilter{Cursor: cursor, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, len(list))
		for _, s := range list {
			got = append(got, s.ID)
		}
		if next == "" {
			break
		}
		if len(pages) > 10 {
			t.Fatal("more than 10 pages of 50 for 120 executions: the cursor does not advance")
		}
		cursor = next
	}
	if want := []int{50, 50, 20}; !slices.Equal(pages, want) {
		t.Errorf("page sizes: got %v, want %v", pages, want)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Errorf("%s: got it twice, want every execution once", id)
		}
		seen[id] = true
	}
	if want := newestFirst(fx); !slices.Equal(got, want) {
		t.Errorf("walk: got %v, want all 120 newest first %v", got, want)
	}

	for _, bad := range []string{"not base64!", "bm8gbnVsIGhlcmU", "YWJjAGRlZg"} {
		_, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Cursor: bad})
		if !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: got %v, want ErrBadCursor", bad, err)
		}
	}
}

// effectFixture is one effect and the state the audit must give it.
type effectFixture struct {
	provider, id string
	at           time.Time
	state        trace.MatchState
}

// outboxFixture stores 30 executions, each with one keyed write step, and
// their effects: one per step (matched), two for every fifth step
// (duplicate), and effects with a key nobody sent (orphan).
func outboxFixture(t *testing.T) (*store.DB, []effectFixture) {
	t.Helper()
	db, w := openDB(t)
	var events []map[string]any
	var fx []effectFixture
	effect := func(provider, id, key string, at time.Time, state trace.MatchState) {
		events = append(events, map[string]any{"type": "effect", "provider": provider, "effect_id": id, "idempotency_key": key, "at": stamp(at)})
		fx = append(fx, effectFixture{provider, id, at.UTC(), state})
	}
	for i := range 30 {
		id, key := fmt.Sprintf("exec_%02d", i), fmt.Sprintf("ik_%02d", i)
		provider := []string{"mail-api", "pay-api"}[i%2]
		start := base.Add(time.Duration(i) * time.Minute)
		events = append(events, map[string]any{"type": "attempt", "execution_id": id, "step_id": "send", "attempt": 1, "effect": "write",
			"provider": provider, "idempotency_key": key, "started_at": stamp(start), "ended_at": stamp(start.Add(time.Second)), "outcome": "ok"})
		// Every third effect shares its time with another, so that the
		// order must fall back to the id.
		at := start.Add(time.Duration(i%3) * 100 * time.Millisecond)
		if i%5 == 0 {
			effect(provider, fmt.Sprintf("m_%02d", i), key, at, trace.MatchDuplicate)
			effect(provider, fmt.Sprintf("d_%02d", i), key, at, trace.MatchDuplicate)
		} else {
			effect(provider, fmt.Sprintf("m_%02d", i), key, at, trace.MatchMatched)
		}
	}
	for k := range 6 {
		effect([]string{"mail-api", "pay-api"}[k%2], fmt.Sprintf("o_%d", k), fmt.Sprintf("ik_none_%d", k), base.Add(time.Hour), trace.MatchOrphan)
	}
	write(t, w, events...)
	return db, fx
}

func TestEffectsFiltersAndPagination(t *testing.T) {
	db, fx := outboxFixture(t)
	ctx := context.Background()
	rank := map[trace.MatchState]int{trace.MatchDuplicate: 0, trace.MatchOrphan: 1, trace.MatchMatched: 2}
	slices.SortFunc(fx, func(a, b effectFixture) int {
		if rank[a.state] != rank[b.state] {
			return rank[a.state] - rank[b.state]
		}
		if c := strings.Compare(a.provider, b.provider); c != 0 {
			return c
		}
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	tests := []struct {
		name   string
		filter store.EffectFilter
	}{
		{"everything", store.EffectFilter{}},
		{"duplicates", store.EffectFilter{State: trace.MatchDuplicate}},
		{"orphans", store.EffectFilter{State: trace.MatchOrphan}},
		{"matched", store.EffectFilter{State: trace.MatchMatched}},
		{"one provider", store.EffectFilter{Provider: "pay-api"}},
		{"provider and state", store.EffectFilter{Provider: "mail-api", State: trace.MatchMatched}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, e := range fx {
				if (tt.filter.State == "" || e.state == tt.filter.State) && (tt.filter.Provider == "" || e.provider == tt.filter.Provider) {
					want = append(want, fmt.Sprintf("%s %s %s", e.state, e.provider, e.id))
				}
			}
			if len(want) == 0 {
				t.Fatal("the fixture has nothing this filter selects")
			}
			for _, limit := range []int{store.MaxPageSize, 4} {
				var got []string
				f := tt.filter
				f.Limit = limit
				for pages := 0; ; pages++ {
					if pages > len(fx) {
						t.Fatal("the cursor does not advance")
					}
					rows, next, err := db.Effects(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					if len(rows) > limit {
						t.Fatalf("page: got %d rows, want at most %d", len(rows), limit)
					}
					for _, r := range rows {
						got = append(got, fmt.Sprintf("%s %s %s", r.State, r.Provider, r.ID))
					}
					if next == "" {
						break
					}
					f.Cursor = next
				}
				if !slices.Equal(got, want) {
					t.Errorf("pages of %d: got %v, want %v", limit, got, want)
				}
			}
		})
	}
	for _, bad := range []string{"not base64!", "WyIxIl0", "WyJ4IiwibWFpbC1hcGkiLCIwIiwibV8wMCJd"} {
		_, _, err := db.Effects(ctx, store.EffectFilter{Cursor: bad})
		if !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: got %v, want ErrBadCursor", bad, err)
		}
	}
}

func TestExportEventsInCommitOrder(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	// Later events first: the export follows commit order, not event time.
	batches := [][]map[string]any{
		{
			{"type": "execution", "id": "e-3", "execution_id": "exec_1", "status": "completed", "ended_at": stamp(base.Add(time.Minute))},
			{"type": "effect", "provider": "mail-api", "effect_id": "m1", "execution_id": "exec_1", "step_id": "s1", "at": stamp(base.Add(2 * time.Second))},
		},
		{
			{"type": "attempt", "execution_id": "exec_1", "step_id": "s1", "attempt": 1, "effect": "write", "started_at": stamp(base.Add(time.Second))},
			{"type": "execution", "id": "e-3", "execution_id": "exec_1", "status": "completed", "ended_at": stamp(base.Add(time.Minute))}, // a re-send
		},
		{
			{"type": "execution", "id": "e-1", "execution_id": "exec_1", "status": "running", "started_at": stamp(base)},
		},
	}
	var want []string
	for _, b := range batches {
		res := write(t, w, b...)
		for _, e := range b[:res.Accepted] {
			raw, _ := json.Marshal(e)
			ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, string(ev.Body))
		}
	}
	var got []string
	var last int64
	err := db.ExportEvents(ctx, func(seq int64, body []byte) error {
		if seq <= last {
			t.Errorf("seq %d after %d: want strictly increasing", seq, last)
		}
		last = seq
		got = append(got, string(body))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("export:\n got %q\nwant %q", got, want)
	}

	stop := errors.New("stop")
	n := 0
	err = db.ExportEvents(ctx, func(int64, []byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("a callback error: got %v after %d calls, want it returned after 1", err, n)
	}
}

func TestExecutionNames(t *testing.T) {
	db, w := openDB(t)
	write(t, w, executionEvents("names-1", base, 1, 1, 0)...)
	got, err := db.ExecutionNames(context.Background(), []string{"names-1", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"names-1": "billing-agent"}; !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestExecutionSizes: an execution's size is its attempts, effects and
// findings; the newest n are the list's first n.
func TestExecutionSizes(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	write(t, w, executionEvents("sizes-old", base, 3, 2, 1)...)
	write(t, w, executionEvents("sizes-new", base.Add(time.Hour), 2, 3, 2)...)
	got, err := db.ExecutionSizes(ctx, []string{"sizes-old", "sizes-new", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, s := range list {
		want[s.ID] = s.Attempts + s.Effects + s.Findings
	}
	if want["sizes-old"] < 6+1 || !maps.Equal(got, want) {
		t.Fatalf("got sizes %v, want %v (the old one at least its 6 attempts and 1 effect)", got, want)
	}
	newest, err := db.NewestExecutionSizes(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if wantNewest := map[string]int{list[0].ID: want[list[0].ID]}; list[0].ID != "sizes-new" || !maps.Equal(newest, wantNewest) {
		t.Fatalf("newest 1: got %v, want %v", newest, wantNewest)
	}
}

// TestExecutionsSharing: the executions that sent a key, came from a
// trace, or that an effect carrying one names; not the others.
func TestExecutionsSharing(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	write(t, w, executionEvents("share-a", base, 2, 1, 1)...)
	write(t, w, executionEvents("share-b", base, 1, 1, 0)...)
	write(t, w, map[string]any{"type": "attempt", "execution_id": "share-c", "step_id": "s", "attempt": 1, "idempotency_key": "share-a-ik-001"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "m-d", "idempotency_key": "share-a-ik-000", "execution_id": "share-d"},
		map[string]any{"type": "span", "execution_id": "share-e", "trace_id": "trace-e", "span_id": "s1", "role": "context"},
		map[string]any{"type": "attempt", "execution_id": "share-f", "step_id": "s", "attempt": 1, "trace_id": "trace-f", "span_id": "s2"})
	got, err := db.ExecutionsSharing(ctx, []string{"share-a-ik-000", "share-a-ik-001"}, []string{"trace-e", "trace-f"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"share-a", "share-c", "share-d", "share-e", "share-f"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (not share-b: it shares nothing)", got, want)
	}
}

// TestListExecutionsBySeverity: sorted by severity, the list gives the
// critical executions, then the unverified, then the rest, each newest
// first, and pages of any size walk it whole, each row once.
func TestListExecutionsBySeverity(t *testing.T) {
	db, _ := listFixture(t)
	ctx := context.Background()
	all, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, state := range []trace.AuditState{trace.StateCritical, trace.StateUnverified, trace.StateClean} {
		for _, s := range all {
			if s.AuditState == state {
				want = append(want, s.ID)
			}
		}
	}
	if len(want) != len(all) || want[0] == all[0].ID {
		t.Fatalf("the fixture's newest execution is critical or some is in no state: got %d of %d in states", len(want), len(all))
	}
	for _, size := range []int{1, 2, 3, store.MaxPageSize} {
		var got []string
		cursor := ""
		for range len(all) + 1 {
			list, next, err := db.ListExecutions(ctx, store.ExecutionFilter{BySeverity: true, Limit: size, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list {
				got = append(got, s.ID)
			}
			if cursor = next; next == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: got %v, want %v", size, got, want)
		}
	}
	if _, _, err := db.ListExecutions(ctx, store.ExecutionFilter{BySeverity: true, Cursor: "bm90IGEgY3Vyc29y"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a cursor of the newest-first order: got %v, want ErrBadCursor", err)
	}
}
