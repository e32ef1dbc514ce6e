package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the raw ceiling talks to SQLite directly

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// The ingest suite measures native ingest throughput: HTTP ingest with
// batches of 100 and of 1, the raw SQLite ceiling (the same rows inserted
// directly, none of the pipeline's work), and group commit on against off.
// Every case runs on a fresh database file.

type ingestConfig struct {
	runFlags
	events, batch, clients             int // HTTP with large batches, and the raw ceiling
	singleEvents, singleClients        int // HTTP with one event a request
	groupEvents, groupClients          int // group commit on against off
	cases                              map[string]bool
	activePerClient, rawTransactionLen int
}

func ingestFlags(args []string) (ingestConfig, error) {
	var c ingestConfig
	fs := flag.NewFlagSet("oncebench ingest", flag.ContinueOnError)
	fs.IntVar(&c.events, "events", 100_000, "events for the batched HTTP case and the raw ceiling")
	fs.IntVar(&c.batch, "batch", 100, "events a request in the batched case, and a transaction in the raw ceiling")
	fs.IntVar(&c.clients, "clients", 16, "concurrent clients in the batched case")
	fs.IntVar(&c.singleEvents, "single-events", 20_000, "events for the one-event-a-request case")
	fs.IntVar(&c.singleClients, "single-clients", 32, "concurrent clients in the one-event-a-request case")
	fs.IntVar(&c.groupEvents, "group-events", 10_000, "events for each group commit on/off case")
	fs.IntVar(&c.groupClients, "group-clients", 32, "concurrent clients in the group commit cases")
	cases := fs.String("cases", "batch,single,raw,group", "comma-separated cases to run: batch, single, raw, group")
	c.register(fs, "synchronous setting of the batched, single and raw cases: normal or full",
		"a CI-sized run of a few seconds: every size divided by 10")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	c.cases = map[string]bool{}
	for _, name := range strings.Split(*cases, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "batch", "single", "raw", "group":
			c.cases[name] = true
		case "":
		default:
			return c, fmt.Errorf("-cases: unknown case %q; known: batch, single, raw, group", name)
		}
	}
	if c.quick {
		c.events, c.singleEvents, c.groupEvents = c.events/10, c.singleEvents/10, c.groupEvents/10
	}
	for _, n := range []int{c.events, c.batch, c.clients, c.singleEvents, c.singleClients, c.groupEvents, c.groupClients} {
		if n < 1 {
			return c, errors.New("every size and client count must be ≥ 1")
		}
	}
	// Each client interleaves a few executions, as a collector batching
	// several live agents would.
	c.activePerClient = 4
	c.rawTransactionLen = c.batch
	return c, nil
}

// measurement is one row of the ingest table.
type measurement struct {
	name    string
	sync    sqlite.Sync
	events  int
	clients int
	batch   int
	elapsed time.Duration
	cpu     time.Duration // CPU of the whole process (server and clients); < 0 when unknown
	commits int           // transactions
}

func (m measurement) rate() float64 { return float64(m.events) / m.elapsed.Seconds() }

// cpuPerEvent is the figure other work on the machine skews least: a
// busy machine stretches the wall clock more than the CPU a run needs.
func (m measurement) cpuPerEvent() time.Duration {
	if m.cpu < 0 {
		return -1
	}
	return m.cpu / time.Duration(m.events)
}

// runIngest runs the cases -cases names, each on a new file in dir, and
// prints the table and the ratios.
func runIngest(c ingestConfig, dir string, out io.Writer) error {
	ctx := context.Background()
	fmt.Fprintln(out)

	var rows []measurement
	var batched, raw, groupFullOn, groupFullOff, groupNormalOn, groupNormalOff *measurement
	add := func(m measurement) *measurement {
		rows = append(rows, m)
		fmt.Fprintf(os.Stderr, "oncebench ingest: %s, sync %s: %.0f events/s\n", m.name, m.sync, m.rate())
		return &rows[len(rows)-1]
	}
	seq := 0
	file := func(name string) string {
		seq++
		return filepath.Join(dir, fmt.Sprintf("%02d-%s.db", seq, name))
	}

	if c.cases["batch"] || c.cases["raw"] {
		streams := generate(c.events, c.clients, c.activePerClient)
		if c.cases["batch"] {
			m, err := runHTTP(ctx, file("http-batch"), c.sync, true, requestBodies(streams, c.batch), c.events)
			if err != nil {
				return fmt.Errorf("HTTP, batches of %d: %w", c.batch, err)
			}
			m.name, m.batch = fmt.Sprintf("HTTP, batches of %d", c.batch), c.batch
			batched = add(m)
		}
		if c.cases["raw"] {
			m, err := runRaw(ctx, file("raw"), c.sync, streams, c.rawTransactionLen)
			if err != nil {
				return fmt.Errorf("raw ceiling: %w", err)
			}
			m.name = fmt.Sprintf("raw SQLite ceiling, tx of %d", c.rawTransactionLen)
			raw = add(m)
		}
	}
	if c.cases["single"] {
		streams := generate(c.singleEvents, c.singleClients, c.activePerClient)
		m, err := runHTTP(ctx, file("http-single"), c.sync, true, requestBodies(streams, 1), c.singleEvents)
		if err != nil {
			return fmt.Errorf("HTTP, batches of 1: %w", err)
		}
		m.name, m.batch = "HTTP, batches of 1", 1
		add(m)
	}
	if c.cases["group"] {
		bodies := requestBodies(generate(c.groupEvents, c.groupClients, c.activePerClient), 1)
		for _, gc := range []struct {
			sync sqlite.Sync
			on   bool
			dst  **measurement
		}{
			{sqlite.SyncFull, true, &groupFullOn}, {sqlite.SyncFull, false, &groupFullOff},
			{sqlite.SyncNormal, true, &groupNormalOn}, {sqlite.SyncNormal, false, &groupNormalOff},
		} {
			state := map[bool]string{true: "on", false: "off"}[gc.on]
			m, err := runHTTP(ctx, file("group-"+state+"-"+string(gc.sync)), gc.sync, gc.on, bodies, c.groupEvents)
			if err != nil {
				return fmt.Errorf("group commit %s, sync %s: %w", state, gc.sync, err)
			}
			m.name, m.batch = "HTTP, batches of 1, group commit "+state, 1
			*gc.dst = add(m)
		}
	}

	fmt.Fprintf(out, "%-40s %-6s %8s %7s %6s %13s %8s %9s %12s\n", "case", "sync", "events", "clients", "batch", "events/commit", "seconds", "events/s", "CPU µs/event")
	for _, m := range rows {
		cpu := "n/a"
		if m.cpu >= 0 {
			cpu = fmt.Sprintf("%.0f", float64(m.cpuPerEvent())/float64(time.Microsecond))
		}
		fmt.Fprintf(out, "%-40s %-6s %8d %7d %6d %13.1f %8.2f %9.0f %12s\n", m.name, m.sync, m.events, m.clients, m.batch,
			float64(m.events)/float64(max(m.commits, 1)), m.elapsed.Seconds(), m.rate(), cpu)
	}
	fmt.Fprintln(out)
	ratio := func(label string, a, b *measurement, target string) {
		if a != nil && b != nil {
			fmt.Fprintf(out, "%-40s %6.2f   (target %s)\n", label, a.rate()/b.rate(), target)
		}
	}
	ratio(fmt.Sprintf("HTTP (batches of %d) / raw ceiling:", c.batch), batched, raw, fmt.Sprintf("≥ %.1f, issue 14", nativeGoal))
	if batched != nil && raw != nil && batched.cpu > 0 && raw.cpu > 0 {
		fmt.Fprintf(out, "%-40s %6.2f   (raw CPU/event over HTTP CPU/event)\n", "  the same, by CPU per event:", float64(raw.cpuPerEvent())/float64(batched.cpuPerEvent()))
	}
	ratio("group commit on / off, sync full:", groupFullOn, groupFullOff, "≥ 3")
	ratio("group commit on / off, sync normal:", groupNormalOn, groupNormalOff, "none")
	return nil
}

// nativeGoal is issue 14's: native ingest over HTTP at least this share of
// the raw SQLite ceiling, at batches of 100 and of 1000.
const nativeGoal = 0.8

// generate returns each client's stream of events, as JSON, in the order
// the client sends them. Executions look like an agent's: a start, steps
// whose attempts each send a start and an end event, a timed-out write
// retried with the same key now and then (answered deduplicated), effects
// for write steps, and an end. Each client keeps `active` executions going
// at once and interleaves their events. Ids are explicit.
func generate(total, clients, active int) [][][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	var executions [][][]byte
	for n, i := 0, 0; n < total; i++ {
		evs := execution(rng, fmt.Sprintf("exec_%06d", i), base.Add(time.Duration(i)*time.Second))
		if n+len(evs) > total {
			evs = evs[:total-n]
		}
		executions = append(executions, evs)
		n += len(evs)
	}
	streams := make([][][]byte, clients)
	for c := range clients {
		// This client's executions, interleaved `active` at a time.
		var mine [][][]byte
		for i := c; i < len(executions); i += clients {
			mine = append(mine, executions[i])
		}
		for start := 0; start < len(mine); start += active {
			group := mine[start:min(start+active, len(mine))]
			for k := 0; ; k++ {
				emitted := false
				for _, evs := range group {
					if k < len(evs) {
						streams[c] = append(streams[c], evs[k])
						emitted = true
					}
				}
				if !emitted {
					break
				}
			}
		}
	}
	return streams
}

var benchTools = []struct {
	tool, effect, provider string
}{
	{"search_customer", "read", ""},
	{"render_invoice", "read", ""},
	{"send_invoice_email", "write", "mail-api"},
	{"charge_card", "write", "payments-api"},
	{"post_slack_message", "write", "chat-api"},
}

func execution(rng *rand.Rand, id string, start time.Time) [][]byte {
	var evs [][]byte
	emit := func(fields map[string]any) {
		fields["id"] = fmt.Sprintf("evt_%s_%02d", id, len(evs))
		b, err := json.Marshal(fields)
		if err != nil {
			panic(err)
		}
		evs = append(evs, b)
	}
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	worker := fmt.Sprintf("pid-%d", 4000+rng.IntN(64))
	emit(map[string]any{"type": "execution", "execution_id": id, "name": "billing-agent", "status": "running",
		"started_at": ts(start), "idempotency_key": "run_" + id, "labels": map[string]string{"customer": fmt.Sprintf("cust-%d", rng.IntN(500)), "env": "prod"}})
	at := start.Add(5 * time.Millisecond)
	steps := 3 + rng.IntN(4)
	for s := range steps {
		tool := benchTools[rng.IntN(len(benchTools))]
		stepID := fmt.Sprintf("step-%d", s+1)
		key := ""
		if tool.effect == "write" {
			key = fmt.Sprintf("ik_%s_%d", id, s+1)
		}
		args := map[string]any{"to": "jordan@acme.dev", "subject": "Your June invoice", "amount_cents": 1000 + rng.IntN(90000)}
		attempts := 1
		if tool.effect == "write" && rng.IntN(5) == 0 {
			attempts = 2 // the first times out and the retry is answered from the key
		}
		for a := 1; a <= attempts; a++ {
			attempt := map[string]any{"type": "attempt", "execution_id": id, "step_id": stepID, "attempt": a,
				"tool": tool.tool, "effect": tool.effect, "args": args, "worker": worker, "started_at": ts(at)}
			if tool.provider != "" {
				attempt["provider"] = tool.provider
			}
			if key != "" {
				attempt["idempotency_key"] = key
			}
			emit(attempt)
			end := map[string]any{"type": "attempt", "execution_id": id, "step_id": stepID, "attempt": a,
				"started_at": ts(at)}
			dur := time.Duration(20+rng.IntN(400)) * time.Millisecond
			if a < attempts {
				dur = 10 * time.Second
				end["outcome"], end["error"] = "timeout", "network timeout after 10s"
			} else {
				end["outcome"] = "ok"
				end["result"] = map[string]any{"status": "sent", "message_id": fmt.Sprintf("msg_%s_%d", id, s+1)}
				end["deduplicated"] = a > 1
			}
			end["ended_at"] = ts(at.Add(dur))
			emit(end)
			at = at.Add(dur + time.Millisecond)
		}
		if tool.provider != "" {
			emit(map[string]any{"type": "effect", "provider": tool.provider, "effect_id": fmt.Sprintf("msg_%s_%d", id, s+1),
				"idempotency_key": key, "execution_id": id, "step_id": stepID, "target": "jordan@acme.dev", "at": ts(at.Add(-time.Millisecond))})
		}
	}
	emit(map[string]any{"type": "execution", "execution_id": id, "status": "completed", "ended_at": ts(at)})
	return evs
}

// requestBodies cuts each client's stream into {"events":[...]} bodies of
// batch events.
func requestBodies(streams [][][]byte, batch int) [][][]byte {
	out := make([][][]byte, len(streams))
	for c, stream := range streams {
		for i := 0; i < len(stream); i += batch {
			var buf bytes.Buffer
			buf.WriteString(`{"events":[`)
			for j, ev := range stream[i:min(i+batch, len(stream))] {
				if j > 0 {
					buf.WriteByte(',')
				}
				buf.Write(ev)
			}
			buf.WriteString(`]}`)
			out[c] = append(out[c], buf.Bytes())
		}
	}
	return out
}

// runHTTP has one client per body list post its bodies in order to a real
// server over a fresh database; it times from the first request to the
// last answer, each of which comes after its commit.
func runHTTP(ctx context.Context, path string, syncMode sqlite.Sync, groupCommit bool, clients [][][]byte, want int) (measurement, error) {
	m := measurement{sync: syncMode, events: want, clients: len(clients)}
	srv, err := startServer(ctx, path, syncMode, groupCommit, 1024)
	if err != nil {
		return m, err
	}
	defer srv.Close()
	httpClient := keepAliveClient(len(clients), 2*time.Minute)
	defer httpClient.CloseIdleConnections()
	endpoint := "http://" + srv.addr + "/api/v1/events"

	var accepted atomic.Int64
	m.elapsed, m.cpu, err = postConcurrently(clients, func(body []byte) error {
		data, err := post(httpClient, endpoint, "application/json", false, body)
		if err != nil {
			return err
		}
		var answer struct {
			Accepted int `json:"accepted"`
		}
		if err := json.Unmarshal(data, &answer); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		accepted.Add(int64(answer.Accepted))
		return nil
	})
	m.commits = int(srv.commits.Load())
	if err != nil {
		return m, err
	}
	if n := int(accepted.Load()); n != want {
		return m, fmt.Errorf("accepted: got %d events, want %d", n, want)
	}
	return m, nil
}

// rawPragmas is sqlite.Open's pragma list, copied so the ceiling runs under
// the same settings; keep the two in step.
func rawPragmas(syncMode sqlite.Sync) []string {
	return []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(" + strings.ToUpper(string(syncMode)) + ")", "foreign_keys(1)"}
}

func rawDSN(path string, syncMode sqlite.Sync) string {
	pragmas := rawPragmas(syncMode)
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=" + url.QueryEscape(pragmas[0])
	for _, p := range pragmas[1:] {
		dsn += "&_pragma=" + url.QueryEscape(p)
	}
	return dsn + "&_txlock=immediate"
}

// The ceiling writes the rows the pipeline writes for each event (its raw
// log row and the row of the entity it describes) with the pipeline's SQL,
// minus dedupe, refolding and analysis.
const (
	rawInsertEvent  = `INSERT INTO events (id, type, entity, execution_id, body, received_at) VALUES (?, ?, ?, ?, ?, ?)`
	rawPutExecution = `INSERT INTO executions (execution_id, name, status, started_at, ended_at, idempotency_key, labels, conflicts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (execution_id) DO UPDATE SET name = excluded.name, status = excluded.status,
			started_at = excluded.started_at, ended_at = excluded.ended_at, idempotency_key = excluded.idempotency_key,
			labels = excluded.labels, conflicts = excluded.conflicts`
	rawPutAttempt = `INSERT OR REPLACE INTO attempts (execution_id, step_id, attempt, tool, effect, provider, outcome, deduplicated,
		idempotency_key, worker, started_at, ended_at, args, result, error, conflicts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	rawPutEffect = `INSERT INTO effects (provider, effect_id, idempotency_key, execution_id, step_id, target, at, conflicts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (provider, effect_id) DO UPDATE SET idempotency_key = excluded.idempotency_key,
			execution_id = excluded.execution_id, step_id = excluded.step_id, target = excluded.target,
			at = excluded.at, conflicts = excluded.conflicts`
)

// runRaw inserts the streams' events, in transactions of txLen, straight
// into a database sqlite.Open created. Parsing happens before the clock
// starts: the ceiling is SQLite's, not ours.
func runRaw(ctx context.Context, path string, syncMode sqlite.Sync, streams [][][]byte, txLen int) (measurement, error) {
	m := measurement{sync: syncMode, clients: 1, batch: txLen}
	var events []trace.Event
	for _, stream := range streams {
		for _, raw := range stream {
			ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
			if err != nil {
				return m, fmt.Errorf("generated event %s: %w", raw, err)
			}
			events = append(events, ev)
		}
	}
	m.events = len(events)
	created, err := sqlite.Open(ctx, path, syncMode) // the schema, by the migrations
	if err != nil {
		return m, err
	}
	if err := created.Close(); err != nil {
		return m, err
	}
	db, err := sql.Open("sqlite", rawDSN(path, syncMode))
	if err != nil {
		return m, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	stmts := map[string]*sql.Stmt{}
	for _, q := range []string{rawInsertEvent, rawPutExecution, rawPutAttempt, rawPutEffect} {
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			return m, fmt.Errorf("prepare: %w", err)
		}
		defer s.Close()
		stmts[q] = s
	}

	cpuStart, begin := processCPU(), time.Now()
	for i := 0; i < len(events); i += txLen {
		if err := rawTransaction(ctx, db, stmts, events[i:min(i+txLen, len(events))]); err != nil {
			return m, err
		}
	}
	m.elapsed, m.cpu = time.Since(begin), cpuSince(cpuStart)
	m.commits = (len(events) + txLen - 1) / txLen
	return m, nil
}

func rawTransaction(ctx context.Context, db *sql.DB, stmts map[string]*sql.Stmt, events []trace.Event) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Statements prepared once on the only connection; binding them to the
	// transaction reuses them rather than preparing again.
	insertEvent := tx.StmtContext(ctx, stmts[rawInsertEvent])
	putExecution := tx.StmtContext(ctx, stmts[rawPutExecution])
	putAttempt := tx.StmtContext(ctx, stmts[rawPutAttempt])
	putEffect := tx.StmtContext(ctx, stmts[rawPutEffect])
	received := time.Now().UnixNano()
	for _, ev := range events {
		if _, err := insertEvent.ExecContext(ctx,
			ev.ID, string(ev.Type), ev.Entity(), ev.ExecutionID(), string(ev.Body), received); err != nil {
			return fmt.Errorf("insert event %s: %w", ev.ID, err)
		}
		switch ev.Type {
		case trace.EventExecution:
			x := ev.Execution
			_, err = putExecution.ExecContext(ctx,
				x.ID, x.Name, string(x.Status), nanos(x.StartedAt), nanos(x.EndedAt), x.IdempotencyKey, jsonText(x.Labels), "")
		case trace.EventAttempt:
			a := ev.Attempt
			_, err = putAttempt.ExecContext(ctx,
				a.ExecutionID, a.StepID, a.Number, a.Tool, string(a.Effect), a.Provider, string(a.Outcome), boolInt(a.Deduplicated),
				a.IdempotencyKey, a.Worker, nanos(a.StartedAt), nanos(a.EndedAt), string(a.Args), string(a.Result), a.Error, "")
		case trace.EventEffect:
			f := ev.Effect
			_, err = putEffect.ExecContext(ctx,
				f.Provider, f.ID, f.IdempotencyKey, f.ExecutionID, f.StepID, f.Target, nanos(f.At), "")
		}
		if err != nil {
			return fmt.Errorf("materialise %s: %w", ev.ID, err)
		}
	}
	return tx.Commit()
}

// nanos and jsonText store values as store does: Unix nanoseconds or NULL,
// JSON text or ”.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func jsonText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	b, _ := json.Marshal(labels)
	return string(b)
}
