package store_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// searchWorld is an invoice run, a payment run and a traced run:
//   - exec_inv: customer acme; step-1 send_invoice_email on worker-7 sent
//     two emails to jordan@acme.dev under key inv-42-email (the effects
//     name no execution: they join it by the key);
//   - exec_pay: customer globex; charge_card on worker-2, one email to
//     sam@globex.io naming its execution;
//   - exec_trace: an OpenTelemetry run whose effect joins it by its trace.
func searchWorld(t *testing.T) (*store.DB, *writer.Writer, []map[string]any) {
	t.Helper()
	db, w := openDB(t)
	at := func(s int) string { return stamp(base.Add(time.Duration(s) * time.Second)) }
	events := []map[string]any{
		{"type": "execution", "execution_id": "exec_inv", "name": "billing-agent", "status": "completed",
			"started_at": at(0), "ended_at": at(60), "labels": map[string]any{"customer": "acme", "region": "eu-west"}},
		{"type": "attempt", "execution_id": "exec_inv", "step_id": "step-1", "attempt": 1, "tool": "send_invoice_email", "effect": "write",
			"provider": "mail", "idempotency_key": "inv-42-email", "worker": "worker-7", "started_at": at(1), "ended_at": at(11), "outcome": "timeout"},
		{"type": "attempt", "execution_id": "exec_inv", "step_id": "step-1", "attempt": 2, "tool": "send_invoice_email", "effect": "write",
			"provider": "mail", "idempotency_key": "inv-42-email", "worker": "worker-7", "started_at": at(12), "ended_at": at(13), "outcome": "ok"},
		{"type": "effect", "provider": "mail", "effect_id": "msg_6a0799cc07", "idempotency_key": "inv-42-email",
			"target": "jordan@acme.dev", "at": at(2)},
		{"type": "effect", "provider": "mail", "effect_id": "msg_6a07aa1234", "idempotency_key": "inv-42-email",
			"target": "jordan@acme.dev", "at": at(12)},

		{"type": "execution", "execution_id": "exec_pay", "name": "payments", "status": "completed",
			"started_at": at(100), "ended_at": at(160), "labels": map[string]any{"customer": "globex"}},
		{"type": "attempt", "execution_id": "exec_pay", "step_id": "charge", "attempt": 1, "tool": "charge_card", "effect": "write",
			"provider": "mail", "worker": "worker-2", "started_at": at(101), "ended_at": at(102), "outcome": "ok"},
		{"type": "effect", "provider": "mail", "effect_id": "msg_ff0011", "execution_id": "exec_pay", "step_id": "charge",
			"target": "sam@globex.io", "at": at(101)},

		{"type": "attempt", "execution_id": "exec_trace", "step_id": "notify", "attempt": 1, "tool": "post_slack", "effect": "write",
			"trace_id": "trace_9", "span_id": "tool1", "started_at": at(200), "ended_at": at(201), "outcome": "ok"},
		{"type": "effect", "provider": "slack", "effect_id": "ts_1719", "trace_id": "trace_9", "span_id": "tool1",
			"target": "#ops-alerts", "at": at(200)},
	}
	write(t, w, events...)
	return db, w, events
}

func searchIDs(t *testing.T, db *store.DB, q string) []string {
	t.Helper()
	list, _, err := db.ListExecutions(context.Background(), store.ExecutionFilter{Q: q, Limit: store.MaxPageSize})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	ids := []string{}
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

var searchCases = []struct {
	name, q string
	want    []string
}{
	{"recipient", "jordan@acme.dev", []string{"exec_inv"}},
	{"recipient in capitals", "Jordan@ACME.dev", []string{"exec_inv"}},
	{"a token of the recipient", "acme", []string{"exec_inv"}},
	{"the recipient's domain", "acme.dev", []string{"exec_inv"}},
	{"message id", "msg_6a0799cc07", []string{"exec_inv"}},
	{"message id prefix", "msg_6a0799", []string{"exec_inv"}},
	{"message id prefix of two effects of one run", "msg_6a07", []string{"exec_inv"}},
	{"message id of an effect naming its execution", "msg_ff0011", []string{"exec_pay"}},
	{"label key:value", "customer:acme", []string{"exec_inv"}},
	{"label key:value of another", "customer:globex", []string{"exec_pay"}},
	{"label value, free text", "globex", []string{"exec_pay"}},
	{"label value token", "eu-west", []string{"exec_inv"}},
	{"tool", "send_invoice_email", []string{"exec_inv"}},
	{"tool prefix", "charge", []string{"exec_pay"}},
	{"a part of a tool", "invoice", []string{"exec_inv"}},
	{"an id is found by its start, not by a part", "6a0799cc07", []string{}},
	{"worker", "worker-7", []string{"exec_inv"}},
	{"worker of another", "worker-2", []string{"exec_pay"}},
	{"effect joined by its trace", "#ops-alerts", []string{"exec_trace"}},
	{"effect id joined by its trace", "ts_1719", []string{"exec_trace"}},
	{"idempotency key", "inv-42-email", []string{"exec_inv"}},
	{"step id", "step-1", []string{"exec_inv"}},
	{"execution id prefix", "exec_", []string{"exec_inv", "exec_pay", "exec_trace"}},
	{"provider matches both", "mail", []string{"exec_inv", "exec_pay"}},
	{"two words, all must match", "mail acme", []string{"exec_inv"}},
	{"two words of different runs", "acme globex", []string{}},
	{"nothing", "nobody@nowhere.example", []string{}},
	{"the start of the recipient", "jordan@acme", []string{"exec_inv"}},
	{"the recipient's top-level domain", "dev", []string{"exec_inv"}},
	{"a two-letter word is a prefix", "eu", []string{"exec_inv"}},
	{"a one-letter word matches whole terms only", "e", []string{}},
}

func TestSearchExecutions(t *testing.T) {
	db, _, _ := searchWorld(t)
	for _, tt := range searchCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := searchIDs(t, db, tt.q); !slices.Equal(got, tt.want) {
				t.Errorf("q=%q: got %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

// Every word broad: the plan a million events take for common words, which
// walks the executions newest first and probes the index for each.
func TestSearchExecutionsEveryWordBroad(t *testing.T) {
	store.SetBroadSearchWord(t, 1)
	db, _, _ := searchWorld(t)
	for _, tt := range searchCases {
		if got := searchIDs(t, db, tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("q=%q: got %v, want %v", tt.q, got, tt.want)
		}
	}
}

// An effect that arrives before its execution's attempts is found from
// that execution once they are there: it joins by the key it carries.
func TestSearchEffectBeforeExecution(t *testing.T) {
	db, w := openDB(t)
	at := func(s int) string { return stamp(base.Add(time.Duration(s) * time.Second)) }
	write(t, w, map[string]any{"type": "effect", "provider": "mail", "effect_id": "msg_early1", "idempotency_key": "ik-late",
		"target": "ops@initech.test", "at": at(5)})
	if got := searchIDs(t, db, "ops@initech.test"); len(got) != 0 {
		t.Fatalf("before its execution: got %v, want no execution yet", got)
	}
	write(t, w,
		map[string]any{"type": "execution", "execution_id": "exec_late", "status": "completed", "started_at": at(0),
			"labels": map[string]any{"customer": "initech"}},
		map[string]any{"type": "attempt", "execution_id": "exec_late", "step_id": "mail", "attempt": 1, "effect": "write",
			"provider": "mail", "idempotency_key": "ik-late", "started_at": at(4), "ended_at": at(6), "outcome": "ok"})
	for _, q := range []string{"ops@initech.test", "msg_early", "initech", "customer:initech ops"} {
		if got := searchIDs(t, db, q); !slices.Equal(got, []string{"exec_late"}) {
			t.Errorf("q=%q: got %v, want [exec_late]", q, got)
		}
	}

	// An effect naming its execution before the execution's own events:
	// found from it as soon as it is stored, and still after.
	write(t, w, map[string]any{"type": "effect", "provider": "mail", "effect_id": "msg_named", "execution_id": "exec_named",
		"target": "kim@hooli.test", "at": at(7)})
	if got := searchIDs(t, db, "kim@hooli.test"); !slices.Equal(got, []string{"exec_named"}) {
		t.Errorf("effect naming its execution: got %v, want [exec_named]", got)
	}
	write(t, w, map[string]any{"type": "execution", "execution_id": "exec_named", "status": "completed", "started_at": at(7),
		"labels": map[string]any{"customer": "hooli"}})
	if got := searchIDs(t, db, "hooli kim"); !slices.Equal(got, []string{"exec_named"}) {
		t.Errorf("after its execution: got %v, want [exec_named]", got)
	}
}

// Posting everything again changes nothing: one row an execution.
func TestSearchRepostedEventsDoNotDuplicate(t *testing.T) {
	db, w, events := searchWorld(t)
	before := searchTermRows(t, db)
	write(t, w, events...)
	if after := searchTermRows(t, db); !slices.Equal(after, before) {
		t.Errorf("search terms after re-posting: got %d rows, want the %d there were", len(after), len(before))
	}
	for _, q := range []string{"jordan@acme.dev", "mail", "exec_"} {
		list, _, err := db.ListExecutions(context.Background(), store.ExecutionFilter{Q: q, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, s := range list {
			if seen[s.ID] {
				t.Errorf("q=%q: %s listed twice", q, s.ID)
			}
			seen[s.ID] = true
		}
	}
}

// The migration's back-fill, written in SQL, makes the very terms the
// writer makes in Go: a database from before it is searchable as a new one.
func TestSearchBackfillMatchesWriter(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	db, _, _ := searchWorld(t)
	written := searchTermRows(t, db)
	if len(written) == 0 {
		t.Fatal("the writer stored no search terms")
	}

	// Undo the migration, as a database from before it would be, and
	// open the file again, which applies it.
	raw, err := sql.Open("sqlite", "file:"+db.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE search_terms`, `DELETE FROM migrations WHERE name = '0007_search.sql'`} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	reopened, err := sqlite.Open(ctx, db.Path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	filled := searchTermRows(t, reopened)
	if !slices.Equal(filled, written) {
		t.Errorf("back-filled terms differ from the writer's:\n got  %v\n want %v", filled, written)
	}
	for _, tt := range searchCases {
		if got := searchIDs(t, reopened, tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("after the back-fill, q=%q: got %v, want %v", tt.q, got, tt.want)
		}
	}
}

func searchTermRows(t *testing.T, db *store.DB) []string {
	t.Helper()
	raw, err := sql.Open(rawDriver(db))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT term || ' -> ' || execution_id FROM search_terms ORDER BY term, execution_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// An id may hold spaces and be 256 bytes long: the whole search, spaces
// and all, finds it, as it did before search had words.
func TestSearchWholeTextAsPhrase(t *testing.T) {
	db, w := openDB(t)
	long := "long/" + strings.Repeat("ü;%2F?#.. ", 22) + "xxxxxxxxx" // 256 bytes
	for _, id := range []string{"a b", long} {
		write(t, w, map[string]any{"type": "execution", "execution_id": id, "status": "completed", "started_at": stamp(base)})
	}
	write(t, w, map[string]any{"type": "execution", "execution_id": "exec_ab", "status": "completed", "started_at": stamp(base),
		"labels": map[string]any{"first": "alpha", "second": "beta"}})
	for _, tt := range []struct {
		q    string
		want []string
	}{
		{"a b", []string{"a b"}},
		{"  a b ", []string{"a b"}},
		{long, []string{long}},
		{long[:40], []string{long}},
		{"alpha beta", []string{"exec_ab"}}, // no value begins with the phrase: two words
	} {
		if got := searchIDs(t, db, tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("q=%q: got %q, want %q", tt.q, got, tt.want)
		}
	}
}
