package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// pruneWorld stores, around now, an old execution that shares a key with a
// recent one, and everything a prune must take with it or leave alone.
//
//   - exec_old (40 days old): a step that timed out and was retried under
//     key ik_shared, two effects naming it (a duplicate), a message kept
//     for one of them, an HTTP span of trace trace_old and a tool attempt
//     of that trace, an effect joined to it by trace context alone, and a
//     step that sent ik_only_old, whose effect names no execution.
//   - exec_new (1 day old) sent ik_shared too and was answered from a
//     stored response: while exec_old exists its only effect belongs to
//     another execution (suppressed_as_repeat, key_shared_across_executions).
//     Both have attempts in trace_shared, whose effect c_shared names no
//     execution.
//   - exec_other (1 day old) with its own effect, so mail-api stays fed.
//   - exec_timeless: no time at all, received now.
//   - orphan effects o_old (40 days) and o_new (1 day).
func pruneWorld(t *testing.T, now time.Time) (*store.DB, *writer.Writer) {
	t.Helper()
	db, w := openDB(t)
	old, recent := now.Add(-40*24*time.Hour), now.Add(-24*time.Hour)
	at := func(base time.Time, s int) string { return stamp(base.Add(time.Duration(s) * time.Second)) }
	write(t, w,
		map[string]any{"type": "execution", "execution_id": "exec_old", "name": "billing-agent", "status": "completed",
			"started_at": at(old, 0), "ended_at": at(old, 60), "labels": map[string]any{"customer": "acme"}},
		map[string]any{"type": "attempt", "execution_id": "exec_old", "step_id": "s1", "attempt": 1, "effect": "write", "provider": "mail-api",
			"idempotency_key": "ik_shared", "started_at": at(old, 1), "ended_at": at(old, 11), "outcome": "timeout"},
		map[string]any{"type": "attempt", "execution_id": "exec_old", "step_id": "s1", "attempt": 2, "effect": "write", "provider": "mail-api",
			"idempotency_key": "ik_shared", "started_at": at(old, 12), "ended_at": at(old, 13), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "m_old1", "idempotency_key": "ik_shared",
			"execution_id": "exec_old", "step_id": "s1", "at": at(old, 2)},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "m_old2", "idempotency_key": "ik_shared",
			"execution_id": "exec_old", "step_id": "s1", "at": at(old, 12)},
		map[string]any{"type": "attempt", "execution_id": "exec_old", "step_id": "lookup", "attempt": 1, "effect": "write",
			"trace_id": "trace_old", "span_id": "tool1", "started_at": at(old, 20), "ended_at": at(old, 21), "outcome": "ok"},
		map[string]any{"type": "span", "execution_id": "exec_old", "trace_id": "trace_old", "span_id": "http1", "parent_span_id": "tool1",
			"role": "http", "name": "POST", "http_method": "POST", "started_at": at(old, 20), "ended_at": at(old, 21)},
		map[string]any{"type": "effect", "provider": "crm", "effect_id": "c_trace", "trace_id": "trace_old", "span_id": "http1", "at": at(old, 21)},
		map[string]any{"type": "attempt", "execution_id": "exec_old", "step_id": "s2", "attempt": 1, "effect": "write", "provider": "mail-api",
			"idempotency_key": "ik_only_old", "started_at": at(old, 30), "ended_at": at(old, 31), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "m_key_only", "idempotency_key": "ik_only_old", "at": at(recent, 0)},

		map[string]any{"type": "execution", "execution_id": "exec_new", "name": "billing-agent", "status": "completed",
			"started_at": at(recent, 0), "ended_at": at(recent, 60)},
		map[string]any{"type": "attempt", "execution_id": "exec_new", "step_id": "s1", "attempt": 1, "effect": "write", "provider": "mail-api",
			"idempotency_key": "ik_shared", "started_at": at(recent, 1), "ended_at": at(recent, 2), "outcome": "ok", "deduplicated": true},

		// A trace both executions have attempts in: its effect stays with exec_new.
		map[string]any{"type": "attempt", "execution_id": "exec_old", "step_id": "lookup2", "attempt": 1, "effect": "read",
			"trace_id": "trace_shared", "span_id": "tool2", "started_at": at(old, 40), "ended_at": at(old, 41), "outcome": "ok"},
		map[string]any{"type": "attempt", "execution_id": "exec_new", "step_id": "check", "attempt": 1, "effect": "write",
			"trace_id": "trace_shared", "span_id": "tool3", "started_at": at(recent, 3), "ended_at": at(recent, 4), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "crm", "effect_id": "c_shared", "trace_id": "trace_shared", "span_id": "tool3", "at": at(recent, 3)},

		map[string]any{"type": "execution", "execution_id": "exec_other", "status": "completed", "started_at": at(recent, 100), "ended_at": at(recent, 160)},
		map[string]any{"type": "attempt", "execution_id": "exec_other", "step_id": "send", "attempt": 1, "effect": "write", "provider": "mail-api",
			"idempotency_key": "ik_other", "started_at": at(recent, 101), "ended_at": at(recent, 102), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "m_other", "idempotency_key": "ik_other",
			"execution_id": "exec_other", "step_id": "send", "at": at(recent, 101)},

		map[string]any{"type": "execution", "execution_id": "exec_timeless", "status": "running"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "o_old", "idempotency_key": "ik_nobody", "at": at(old, 5)},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "o_new", "idempotency_key": "ik_nobody_either", "at": at(recent, 5)},
	)
	err := db.PutMessage(context.Background(), store.Message{Provider: "mail-api", EffectID: "m_old1", From: "billing@acme.dev",
		Recipients: []string{"jordan@acme.dev"}, ReceivedAt: old, Raw: []byte("Subject: your invoice\r\n\r\nexec_old's mail")})
	if err != nil {
		t.Fatal(err)
	}
	return db, w
}

// rawDB opens the database file as plain SQL, to look at every table.
func rawDB(t *testing.T, db *store.DB) *sql.DB {
	t.Helper()
	raw, err := sql.Open(rawDriver(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// mentions counts, table by table, the rows that name s anywhere.
func mentions(t *testing.T, raw *sql.DB, s string) map[string]int {
	t.Helper()
	queries := map[string]string{
		"events":     `SELECT count(*) FROM events WHERE execution_id = ?1 OR instr(body, ?1) > 0`,
		"executions": `SELECT count(*) FROM executions WHERE execution_id = ?1`,
		"steps":      `SELECT count(*) FROM steps WHERE execution_id = ?1`,
		"attempts":   `SELECT count(*) FROM attempts WHERE execution_id = ?1`,
		"spans":      `SELECT count(*) FROM spans WHERE execution_id = ?1 OR trace_id = ?1`,
		"effects":    `SELECT count(*) FROM effects WHERE execution_id = ?1 OR effect_id = ?1 OR trace_id = ?1`,
		"findings":   `SELECT count(*) FROM findings WHERE execution_id = ?1 OR effect_id = ?1 OR instr(body, ?1) > 0`,
		"messages":   `SELECT count(*) FROM messages WHERE effect_id = ?1 OR instr(raw, ?1) > 0`,
	}
	if engine == "postgres" {
		queries["events"] = `SELECT count(*) FROM events WHERE execution_id = $1 OR strpos(body, $1) > 0`
		queries["findings"] = `SELECT count(*) FROM findings WHERE execution_id = $1 OR effect_id = $1 OR strpos(body, $1) > 0`
		queries["messages"] = `SELECT count(*) FROM messages WHERE effect_id = $1 OR position(convert_to($1, 'UTF8') in raw) > 0`
		for table, q := range queries {
			queries[table] = strings.ReplaceAll(q, "?1", "$1")
		}
	}
	out := map[string]int{}
	for table, q := range queries {
		var n int
		if err := raw.QueryRow(q, s).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

func findingRules(t *testing.T, db *store.DB, executionID string) []string {
	t.Helper()
	fs, err := db.Findings(context.Background(), store.FindingFilter{ExecutionID: executionID})
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, f := range fs {
		rules = append(rules, string(f.Rule))
	}
	slices.Sort(rules)
	return rules
}

// snapshot is everything derived that a reader sees: the executions list
// with counts, findings and audit states, every finding, every effect with
// its match state.
func snapshot(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	add := func(prefix string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, prefix+string(b))
	}
	for cursor := ""; ; {
		page, next, err := db.ListExecutions(ctx, store.ExecutionFilter{Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page {
			add("execution ", x)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	findings, err := db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		add("finding ", f)
	}
	for cursor := ""; ; {
		rows, next, err := db.Effects(ctx, store.EffectFilter{Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			add("effect ", r)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// rebuilt loads db's remaining raw log into a new database through the
// writer: what everything derived must be once a prune is done.
func rebuilt(t *testing.T, db *store.DB) *store.DB {
	t.Helper()
	ctx := context.Background()
	var events []trace.Event
	err := db.ExportEvents(ctx, func(_ int64, body []byte) error {
		ev, err := ingest.ParseStored(body)
		events = append(events, ev)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh, w := openDB(t)
	if _, err := w.Write(ctx, events); err != nil {
		t.Fatal(err)
	}
	return fresh
}

func checkLikeRebuilt(t *testing.T, db *store.DB) {
	t.Helper()
	got, want := snapshot(t, db), snapshot(t, rebuilt(t, db))
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for _, l := range gl {
			if !slices.Contains(wl, l) {
				t.Errorf("after the prune, only in the pruned database: %s", l)
			}
		}
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				t.Errorf("after the prune, only in a database rebuilt from its remaining events: %s", l)
			}
		}
	}
}

func TestPruneDeletesOldExecutionsWithEverythingNamingThem(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	db, _ := pruneWorld(t, now)
	ctx := context.Background()
	raw := rawDB(t, db)
	if got := mentions(t, raw, "exec_old"); len(got) < 6 {
		t.Fatalf("before the prune, rows naming exec_old: got %v, want them in most tables", got)
	}
	if got, want := findingRules(t, db, "exec_new"), []string{"key_shared_across_executions", "suppressed_as_repeat"}; !slices.Equal(got, want) {
		t.Fatalf("exec_new before the prune: got findings %v, want %v", got, want)
	}

	var batches []store.PruneBatch
	res, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), Reaudit: derive.Reaudit(trace.DefaultConfig),
		OnBatch: func(b store.PruneBatch) { batches = append(batches, b) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Executions != 1 {
		t.Errorf("executions deleted: got %d, want 1 (exec_old)", res.Executions)
	}
	// m_old1, m_old2, c_trace (joined by its trace alone) and o_old.
	if res.Effects != 4 {
		t.Errorf("effects deleted: got %d, want 4", res.Effects)
	}
	for _, s := range []string{"exec_old", "trace_old", "m_old1", "m_old2", "c_trace", "o_old"} {
		if got := mentions(t, raw, s); len(got) > 0 {
			t.Errorf("after the prune, rows naming %s: got %v, want none", s, got)
		}
	}
	for _, s := range []string{"exec_new", "exec_other", "exec_timeless", "o_new", "m_other", "m_key_only", "c_shared", "trace_shared"} {
		if got := mentions(t, raw, s); len(got) == 0 {
			t.Errorf("after the prune, rows naming %s: got none, want it kept", s)
		}
	}
	// exec_new no longer sees a peer that sent its key.
	if got := findingRules(t, db, "exec_new"); slices.Contains(got, "key_shared_across_executions") || slices.Contains(got, "suppressed_as_repeat") {
		t.Errorf("exec_new after the prune: got findings %v, want none about the pruned peer", got)
	}
	// The effect whose key only exec_old sent now matches nothing.
	states, err := db.EffectStates(ctx, []trace.EffectRef{{Provider: "mail-api", ID: "m_key_only"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := states[trace.EffectRef{Provider: "mail-api", ID: "m_key_only"}]; got != trace.MatchOrphan {
		t.Errorf("m_key_only after the prune: got state %q, want orphan", got)
	}
	if n, err := db.PendingReaudits(ctx); err != nil || n != 0 {
		t.Errorf("pending re-audits after the prune: got %d (%v), want 0", n, err)
	}
	if res.Reaudited == 0 {
		t.Errorf("re-audited: got 0, want exec_new at least")
	}
	checkLikeRebuilt(t, db)

	var phases []string
	for _, b := range batches {
		if !slices.Contains(phases, b.Phase) {
			phases = append(phases, b.Phase)
		}
	}
	want := []string{"executions", "reaudit-key", "reaudit-trace", "reaudit-execution", "effects", "vacuum", "checkpoint"}
	if engine == "postgres" {
		want = want[:5] // autovacuum reclaims; there is no file to check
	}
	if !slices.Equal(phases, want) {
		t.Errorf("phases: got %v, want %v", phases, want)
	}
	if st := db.PruneStats(); st.Runs != 1 || st.Executions != 1 || st.Effects != 4 || st.Rows != res.Rows || st.Rows == 0 {
		t.Errorf("PruneStats: got %+v, want 1 run, 1 execution, 4 effects, %d rows", st, res.Rows)
	}

	// A second prune finds nothing more.
	again, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), Reaudit: derive.Reaudit(trace.DefaultConfig)})
	if err != nil || again.Rows != 0 {
		t.Errorf("a second prune: got %d rows deleted (%v), want 0", again.Rows, err)
	}
}

func TestPruneTimelessExecutionsByWhenTheyArrived(t *testing.T) {
	now := time.Now().UTC()
	db, _ := pruneWorld(t, now)
	ctx := context.Background()
	// Received just now: a cutoff a minute ago keeps it, one in the
	// future (everything older than it) deletes it.
	if _, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-time.Minute), Reaudit: derive.Reaudit(trace.DefaultConfig)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Run(ctx, "exec_timeless"); err != nil {
		t.Errorf("exec_timeless after a prune of what is older than a minute: got %v, want it kept", err)
	}
	res, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(time.Hour), Reaudit: derive.Reaudit(trace.DefaultConfig)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Run(ctx, "exec_timeless"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("exec_timeless after a prune of everything: got %v, want ErrNotFound", err)
	}
	var left int
	if err := rawDB(t, db).QueryRow(`SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM executions) + (SELECT count(*) FROM effects)
		+ (SELECT count(*) FROM findings) + (SELECT count(*) FROM attempts) + (SELECT count(*) FROM spans) + (SELECT count(*) FROM messages)`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 || res.Executions == 0 {
		t.Errorf("after pruning everything: got %d rows left (%d executions deleted), want 0", left, res.Executions)
	}
}

// TestPruneResumesWhatWasLeftToReaudit: a prune without Reaudit (or cut
// short) leaves the remaining executions' derived state stale but queued;
// the next prune re-derives it.
func TestPruneResumesWhatWasLeftToReaudit(t *testing.T) {
	now := time.Now().UTC()
	db, _ := pruneWorld(t, now)
	ctx := context.Background()
	if _, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PendingReaudits(ctx); err != nil || n == 0 {
		t.Fatalf("pending re-audits after a prune without Reaudit: got %d (%v), want some", n, err)
	}
	if got := findingRules(t, db, "exec_new"); !slices.Contains(got, "key_shared_across_executions") {
		t.Fatalf("exec_new, not yet re-audited: got %v, want its stale findings still there", got)
	}
	res, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), Reaudit: derive.Reaudit(trace.DefaultConfig)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Executions != 0 || res.Reaudited == 0 {
		t.Errorf("the second prune: got %d executions deleted and %d re-audited, want 0 and some", res.Executions, res.Reaudited)
	}
	if n, err := db.PendingReaudits(ctx); err != nil || n != 0 {
		t.Errorf("pending re-audits after the second prune: got %d (%v), want 0", n, err)
	}
	checkLikeRebuilt(t, db)
}

func TestOpenCreatesIncrementalVacuumFiles(t *testing.T) {
	sqliteOnly(t)
	db, _ := openDB(t)
	var mode int
	if err := rawDB(t, db).QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Errorf("auto_vacuum of a new database: got %d, want 2 (incremental)", mode)
	}
	var journal string
	if err := rawDB(t, db).QueryRow(`PRAGMA journal_mode`).Scan(&journal); err != nil || journal != "wal" {
		t.Errorf("journal_mode: got %q (%v), want wal", journal, err)
	}
}
