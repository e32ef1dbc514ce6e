package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// Tx is one write transaction on the single writer connection. Its methods
// are the building blocks of ingest's group commit.
type Tx struct {
	ctx     context.Context
	db      *DB
	lastSeq int64 // the last event stored, for the engine's Notify
	// marked: the engine's tail mark is taken (markTail), inside the
	// open savepoint when markedInSavepoint.
	marked, inSavepoint, markedInSavepoint bool
	announced                              Notice // notice.go
}

// Update runs fn in one write transaction and commits it when fn returns nil.
//
// The transaction is begun and ended by statements on the writer's
// connection, not as a *sql.Tx: database/sql prepares a connection's
// statements anew in every *sql.Tx that uses them (Tx.StmtContext), which
// was a third of a one-event commit.
//
// It holds the derivation lock from its start (Tx.LockDerivation): what
// it changes, it changes after every other instance's commit that
// derived before it, and before any that derives after.
func (db *DB) Update(ctx context.Context, fn func(*Tx) error) error {
	return db.UpdateKeys(ctx, nil, func(t *Tx) error {
		if err := t.LockDerivation(); err != nil {
			return err
		}
		return fn(t)
	})
}

// UpdateKeys is Update for the writer's group commit, which writes what
// keys name (the executions of its events): on an engine whose instances
// commit in parallel, commits sharing a key run one after the other
// (Engine.ExecutionLocks), and fn takes the derivation lock itself once
// it has stored its events, before it derives from them.
func (db *DB) UpdateKeys(ctx context.Context, keys []string, fn func(*Tx) error) error {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	conn, err := db.writer(ctx)
	if err != nil {
		return db.noteWrite(errNoWriter(err))
	}
	err = db.update(ctx, conn, keys, fn)
	if connectionLost(err) {
		// The next write opens a new connection, and retrying this one
		// is safe: a commit whose answer was lost stored events whose
		// ids a retry finds stored already.
		db.dropWriter()
	}
	return err
}

func (db *DB) update(ctx context.Context, conn *sql.Conn, keys []string, fn func(*Tx) error) error {
	t := &Tx{ctx: ctx, db: db}
	if err := t.exec(db.engine.BeginWrite()); err != nil {
		return db.noteWrite(fmt.Errorf("store: begin: %w", err))
	}
	done := false
	defer func() {
		if !done {
			// Also after a failed COMMIT, which can leave SQLite's
			// transaction open; SQLite may have rolled back already, when
			// this fails harmlessly.
			_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		}
	}()
	// A full disk, a read-only file, an I/O error or a lost connection
	// becomes an *UnwritableError (errors.go), and every outcome is noted
	// for WriteHealth, whether fn or the commit met it.
	if err := t.lockExecutions(keys); err != nil {
		return db.noteWrite(err)
	}
	if err := fn(t); err != nil {
		return db.noteWrite(err)
	}
	if notify := db.engine.Notify(); notify != "" && t.lastSeq > 0 {
		if err := t.exec(notify, t.notice()); err != nil {
			return db.noteWrite(fmt.Errorf("store: notify: %w", err))
		}
	}
	if err := t.exec(`COMMIT`); err != nil {
		return db.noteWrite(fmt.Errorf("store: commit: %w", err))
	}
	done = true
	return db.noteWrite(nil)
}

// maxExecutionLocks bounds the locks one commit takes, one an execution it
// writes: PostgreSQL's lock table holds max_locks_per_transaction (64 by
// default) times its connections in all, and a group commit can write
// thousands. A commit with more takes the lock on all executions instead.
const maxExecutionLocks = 256

// lockExecutions takes the engine's locks on the executions keys name
// (Engine.ExecutionLocks, Engine.AllExecutions).
func (t *Tx) lockExecutions(keys []string) error {
	lock := t.db.engine.ExecutionLocks()
	if lock == "" || len(keys) == 0 {
		return nil
	}
	hashed := executionLockKeys(keys)
	if len(hashed) > maxExecutionLocks {
		if err := t.exec(t.db.engine.AllExecutions(true)); err != nil {
			return fmt.Errorf("store: lock on all executions: %w", err)
		}
		return nil
	}
	if err := t.exec(t.db.engine.AllExecutions(false)); err != nil {
		return fmt.Errorf("store: lock on all executions: %w", err)
	}
	if err := t.exec(lock, hashed); err != nil {
		return fmt.Errorf("store: execution locks: %w", err)
	}
	return nil
}

// executionLockKeys hashes keys into [0, 2^62), sorted and each once: one
// order for every instance, so that two never wait on each other.
func executionLockKeys(keys []string) []int64 {
	out := make([]int64, len(keys))
	for i, k := range keys {
		h := fnv.New64a()
		h.Write([]byte(k))
		out[i] = int64(h.Sum64() >> 2)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stmt returns the writer's prepared statement for query. Every query of a
// Tx goes through it, so its text must not vary with its arguments (lists
// go in as one JSON array, see listParam).
func (t *Tx) stmt(query string) (*sql.Stmt, error) {
	return t.db.writerStmt(t.ctx, query)
}

// QueryContext and QueryRowContext make a Tx a querier whose queries are
// prepared once for the writer's connection.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := t.stmt(query)
	if err != nil {
		return t.db.writeConn.QueryRowContext(ctx, t.db.d.rebind(query), args...) // reports the same error
	}
	return s.QueryRowContext(ctx, args...)
}

func (t *Tx) exec(query string, args ...any) error {
	s, err := t.stmt(query)
	if err != nil {
		return err
	}
	_, err = s.ExecContext(t.ctx, args...)
	return err
}

// LockDerivation runs before the transaction derives rows from the events
// it stored: on PostgreSQL it waits for any other instance's commit that
// is deriving, and holds theirs off until this one ends.
func (t *Tx) LockDerivation() error {
	if lock := t.db.engine.DeriveLock(); lock != "" {
		if err := t.exec(lock); err != nil {
			return fmt.Errorf("store: derive lock: %w", err)
		}
	}
	return nil
}

// Savepoint, Release and RollbackTo isolate one request inside a group
// commit, so that a failing request does not take the others down.
//
// A tail mark taken inside the savepoint (markTail) is the transaction's
// once released, and gone once rolled back, as the lock is.
func (t *Tx) Savepoint() error {
	t.inSavepoint = true
	return t.exec(`SAVEPOINT request`)
}

func (t *Tx) Release() error {
	t.inSavepoint, t.markedInSavepoint = false, false
	return t.exec(`RELEASE request`)
}

func (t *Tx) RollbackTo() error {
	if t.markedInSavepoint {
		t.marked = false
	}
	t.inSavepoint, t.markedInSavepoint = false, false
	if err := t.exec(`ROLLBACK TO request`); err != nil {
		return err
	}
	return t.exec(`RELEASE request`)
}

// maxInsertRows is the most events one INSERT of InsertEvents carries: a
// statement per event was a quarter of a large request's commit.
const maxInsertRows = 256

// InsertEvents appends events to the raw log, in their order, skipping any
// whose id is stored already or came earlier in events. seqs[i] is the
// sequence number of events[i], 0 when it was skipped as a duplicate.
//
// Events go in a few multi-row INSERTs of fixed sizes (256, then powers of
// two), so that each statement's text is prepared once whatever the
// number of events.
func (t *Tx) InsertEvents(events []trace.Event, received time.Time) ([]int64, error) {
	if err := t.markTail(); err != nil {
		return nil, err
	}
	seqs := make([]int64, len(events))
	stored := make(map[string]int64, len(events)) // id -> seq, for ids inserted here
	for start := 0; start < len(events); {
		n := maxInsertRows
		for n > len(events)-start {
			n /= 2
		}
		chunk := events[start : start+n]
		if err := t.insertChunk(chunk, received, stored); err != nil {
			return nil, fmt.Errorf("store: insert events %s…: %w", chunk[0].ID, err)
		}
		start += n
	}
	// RETURNING lists rows in no set order: each inserted id takes its seq,
	// and only its first occurrence counts as inserted.
	for i, ev := range events {
		if seq, ok := stored[ev.ID]; ok {
			seqs[i] = seq
			delete(stored, ev.ID)
			t.lastSeq = max(t.lastSeq, seq)
		}
	}
	return seqs, nil
}

// markTail takes the engine's tail mark before the transaction's first
// event takes a sequence number (Engine.TailMark), once.
func (t *Tx) markTail() error {
	mark := t.db.engine.TailMark()
	if mark == "" || t.marked {
		return nil
	}
	if err := t.exec(mark); err != nil {
		return fmt.Errorf("store: tail mark: %w", err)
	}
	t.marked, t.markedInSavepoint = true, t.inSavepoint
	return nil
}

func (t *Tx) insertChunk(events []trace.Event, received time.Time, stored map[string]int64) error {
	rows, err := t.QueryContext(t.ctx, insertEventsQuery(len(events)), insertEventsArgs(t.db, events, received)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return err
		}
		stored[id] = seq
	}
	return rows.Err()
}

func insertEventsQuery(n int) string {
	// Rows are inserted in the order listed, so seqs follow the request.
	return multiRowQuery(`INSERT INTO events (id, type, entity, execution_id, body, received_at) VALUES `,
		`(?, ?, ?, ?, ?, ?)`, n, ` ON CONFLICT (id) DO NOTHING RETURNING id, seq`)
}

// multiRowQueries holds the text of each multi-row statement built.
var multiRowQueries sync.Map // [4]any{head, row, n, tail} -> string

// multiRowQuery is head, n times row separated by commas, then tail.
func multiRowQuery(head, row string, n int, tail string) string {
	key := [4]any{head, row, n, tail}
	if q, ok := multiRowQueries.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	q, _ := multiRowQueries.LoadOrStore(key, b.String())
	return q.(string)
}

func insertEventsArgs(db *DB, events []trace.Event, received time.Time) []any {
	args := make([]any, 0, 6*len(events))
	at := received.UnixNano()
	for _, ev := range events {
		args = append(args, ev.ID, string(ev.Type), db.entityKey(ev.Entity()), ev.ExecutionID(), string(ev.Body), at)
	}
	return args
}

// StoredBody is one stored event's id and body.
type StoredBody struct {
	ID   string
	Body []byte
}

// EntityEventCounts returns how many events of each entity are stored, from
// the entity index alone; an entity with none is not in the map.
func (t *Tx) EntityEventCounts(entities []string) (map[string]int, error) {
	out := make(map[string]int, len(entities))
	if len(entities) == 0 {
		return out, nil
	}
	keys := make([]string, len(entities))
	byKey := make(map[string]string, len(entities)) // stored key -> entity
	for i, e := range entities {
		keys[i] = t.db.entityKey(e)
		byKey[keys[i]] = e
	}
	rows, err := t.QueryContext(t.ctx, `SELECT entity, count(*) FROM events WHERE entity IN `+listParam+` GROUP BY entity`, jsonList(keys))
	if err != nil {
		return nil, fmt.Errorf("store: entity event counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return nil, fmt.Errorf("store: entity event counts: %w", err)
		}
		out[byKey[key]] = n
	}
	return out, rows.Err()
}

// EntitiesEvents returns the stored id and body of every event of the
// entities, by entity, in one query.
func (t *Tx) EntitiesEvents(entities []string) (map[string][]StoredBody, error) {
	out := make(map[string][]StoredBody, len(entities))
	if len(entities) == 0 {
		return out, nil
	}
	keys := make([]string, len(entities))
	byKey := make(map[string]string, len(entities)) // stored key -> entity
	for i, e := range entities {
		keys[i] = t.db.entityKey(e)
		byKey[keys[i]] = e
	}
	rows, err := t.QueryContext(t.ctx, `SELECT entity, id, body FROM events WHERE entity IN `+listParam, jsonList(keys))
	if err != nil {
		return nil, fmt.Errorf("store: entity events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var b StoredBody
		if err := rows.Scan(&key, &b.ID, &b.Body); err != nil {
			return nil, fmt.Errorf("store: entity events: %w", err)
		}
		e := byKey[key]
		out[e] = append(out[e], b)
	}
	return out, rows.Err()
}

// PutExecution stores an execution's folded fields, creating it if needed.
func (t *Tx) PutExecution(x trace.Execution) error {
	err := t.exec(`INSERT INTO executions (execution_id, name, status, started_at, ended_at, idempotency_key, labels, conflicts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (execution_id) DO UPDATE SET name = excluded.name, status = excluded.status,
			started_at = excluded.started_at, ended_at = excluded.ended_at, idempotency_key = excluded.idempotency_key,
			labels = excluded.labels, conflicts = excluded.conflicts`,
		x.ID, x.Name, string(x.Status), nanos(x.StartedAt), nanos(x.EndedAt), x.IdempotencyKey, jsonText(x.Labels), jsonText(x.Conflicts))
	if err != nil {
		return fmt.Errorf("store: put execution %s: %w", x.ID, err)
	}
	return t.indexTerms(x.ID, executionTerms(x)) // search.go
}

// EnsureExecution creates an execution an attempt or effect named before
// its own events arrived.
func (t *Tx) EnsureExecution(id string) error {
	if err := t.exec(`INSERT INTO executions (execution_id) VALUES (?) ON CONFLICT DO NOTHING`, id); err != nil {
		return fmt.Errorf("store: ensure execution %s: %w", id, err)
	}
	return t.indexTerms(id, executionTerms(trace.Execution{ID: id}))
}

// PutAttempt stores an attempt's folded fields. An attempt identified by
// its span (Number 0) keeps the number its row has, or gets a placeholder
// below every number in use; RenumberStep then gives it its rank.
func (t *Tx) PutAttempt(a trace.Attempt) error {
	derived := a.Number == 0
	if derived {
		err := t.QueryRowContext(t.ctx, `SELECT attempt FROM attempts WHERE execution_id = ? AND step_id = ? AND trace_id = ? AND span_id = ?
			AND derived_number = 1`, a.ExecutionID, a.StepID, a.TraceID, a.SpanID).Scan(&a.Number)
		if errors.Is(err, sql.ErrNoRows) {
			err = t.QueryRowContext(t.ctx, `SELECT coalesce(min(attempt), 0) - 1 FROM attempts WHERE execution_id = ? AND step_id = ? AND attempt < 0`,
				a.ExecutionID, a.StepID).Scan(&a.Number)
		}
		if err != nil {
			return fmt.Errorf("store: put attempt %s/%s span %s: %w", a.ExecutionID, a.StepID, a.SpanID, err)
		}
	}
	return t.PutNumberedAttempt(a, derived)
}

// NumberedAttempt is an attempt whose number is decided: sent with it, or,
// Derived, given by its step (trace.NumberSpanAttempts) to an attempt
// identified by its span.
type NumberedAttempt struct {
	Attempt trace.Attempt
	Derived bool
}

// PutNumberedAttempt stores an attempt's folded fields under a.Number.
func (t *Tx) PutNumberedAttempt(a trace.Attempt, derived bool) error {
	return t.PutNumberedAttempts([]NumberedAttempt{{Attempt: a, Derived: derived}})
}

// maxAttemptRows is the most attempts one INSERT of PutNumberedAttempts
// carries; two attempts in one must not share a number.
const maxAttemptRows = 64

// PutNumberedAttempts stores attempts' folded fields under their numbers,
// in a few multi-row statements (see InsertEvents), and indexes their
// search terms once per execution.
func (t *Tx) PutNumberedAttempts(attempts []NumberedAttempt) error {
	for start := 0; start < len(attempts); {
		n := maxAttemptRows
		for n > len(attempts)-start {
			n /= 2
		}
		chunk := attempts[start : start+n]
		args := make([]any, 0, 20*n)
		for _, na := range chunk {
			a := na.Attempt
			args = append(args, a.ExecutionID, a.StepID, a.Number, a.Tool, string(a.Effect), a.Provider, string(a.Outcome), boolInt(a.Deduplicated),
				a.IdempotencyKey, a.Worker, nanos(a.StartedAt), nanos(a.EndedAt), jsonText(a.Args), jsonText(a.Result), a.Error, jsonText(a.Conflicts),
				a.TraceID, a.SpanID, a.RecognisedBy, boolInt(na.Derived))
		}
		err := t.exec(multiRowQuery(`INSERT INTO attempts (`+attemptColumns+`, derived_number) VALUES `,
			`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, n,
			` ON CONFLICT (execution_id, step_id, attempt) DO UPDATE SET tool = excluded.tool, effect = excluded.effect,
			provider = excluded.provider, outcome = excluded.outcome, deduplicated = excluded.deduplicated,
			idempotency_key = excluded.idempotency_key, worker = excluded.worker, started_at = excluded.started_at,
			ended_at = excluded.ended_at, args = excluded.args, result = excluded.result, error = excluded.error,
			conflicts = excluded.conflicts, trace_id = excluded.trace_id, span_id = excluded.span_id,
			recognised_by = excluded.recognised_by, derived_number = excluded.derived_number`), args...)
		if err != nil {
			a := chunk[0].Attempt
			return fmt.Errorf("store: put attempt %s/%s/%d: %w", a.ExecutionID, a.StepID, a.Number, err)
		}
		start += n
	}
	terms := map[string]termSet{}
	for _, na := range attempts {
		a := na.Attempt
		if terms[a.ExecutionID] == nil {
			terms[a.ExecutionID] = termSet{}
		}
		for term := range attemptTerms(a) {
			terms[a.ExecutionID][term] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(terms)) {
		if err := t.indexTerms(id, terms[id]); err != nil {
			return err
		}
	}
	return nil
}

// VacateNumber moves a span-identified attempt off the number an attempt
// sent with it is about to take, to a placeholder that RenumberStep then
// replaces: two attempts never share a row. It reports whether one moved.
func (t *Tx) VacateNumber(executionID, stepID string, number int) (bool, error) {
	s, err := t.stmt(`UPDATE attempts SET attempt = (SELECT coalesce(min(attempt), 0) - 1 FROM attempts WHERE execution_id = ? AND step_id = ? AND attempt < 0)
		WHERE execution_id = ? AND step_id = ? AND attempt = ? AND derived_number = 1`)
	if err != nil {
		return false, fmt.Errorf("store: vacate %s/%s/%d: %w", executionID, stepID, number, err)
	}
	res, err := s.ExecContext(t.ctx, executionID, stepID, executionID, stepID, number)
	if err != nil {
		return false, fmt.Errorf("store: vacate %s/%s/%d: %w", executionID, stepID, number, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// StepsWithAttempts returns which of the steps have an attempt stored.
func (t *Tx) StepsWithAttempts(steps []StepRef) (map[StepRef]bool, error) {
	out := map[StepRef]bool{}
	if len(steps) == 0 {
		return out, nil
	}
	pairs := make([][2]string, len(steps))
	for i, s := range steps {
		pairs[i] = [2]string{s.ExecutionID, s.StepID}
	}
	rows, err := t.QueryContext(t.ctx, `SELECT DISTINCT execution_id, step_id FROM attempts
		WHERE (execution_id, step_id) IN `+pairsParam, jsonPairs(pairs))
	if err != nil {
		return nil, fmt.Errorf("store: steps with attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s StepRef
		if err := rows.Scan(&s.ExecutionID, &s.StepID); err != nil {
			return nil, fmt.Errorf("store: steps with attempts: %w", err)
		}
		out[s] = true
	}
	return out, rows.Err()
}

// renumberOffset keeps the temporary numbers of a renumbering clear of
// every real number and placeholder.
const renumberOffset = 1_000_000_000

// RenumberStep gives a step's span-identified attempts their numbers, as
// trace.NumberSpanAttempts decides them from the whole step.
func (t *Tx) RenumberStep(executionID, stepID string) error {
	rows, err := t.QueryContext(t.ctx, `SELECT attempt, trace_id, span_id, started_at, derived_number FROM attempts
		WHERE execution_id = ? AND step_id = ?`, executionID, stepID)
	if err != nil {
		return fmt.Errorf("store: renumber %s/%s: %w", executionID, stepID, err)
	}
	var sent []int
	var bySpan []trace.Attempt
	current := map[string]int{}
	for rows.Next() {
		var a trace.Attempt
		var started sql.NullInt64
		var derived int
		if err := rows.Scan(&a.Number, &a.TraceID, &a.SpanID, &started, &derived); err != nil {
			rows.Close()
			return fmt.Errorf("store: renumber %s/%s: %w", executionID, stepID, err)
		}
		if derived == 0 {
			sent = append(sent, a.Number)
			continue
		}
		a.StartedAt = fromNanos(started)
		bySpan = append(bySpan, a)
		current[a.TraceID+"/"+a.SpanID] = a.Number
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: renumber %s/%s: %w", executionID, stepID, err)
	}
	moved := false
	for span, n := range trace.NumberSpanAttempts(sent, bySpan) {
		if current[span] == n {
			continue
		}
		moved = true
		traceID, spanID, _ := strings.Cut(span, "/")
		// Two passes, so that no row ever takes a number another still holds.
		if err := t.exec(`UPDATE attempts SET attempt = ? WHERE execution_id = ? AND step_id = ? AND trace_id = ? AND span_id = ?
			AND derived_number = 1`, -renumberOffset-n, executionID, stepID, traceID, spanID); err != nil {
			return fmt.Errorf("store: renumber %s/%s: %w", executionID, stepID, err)
		}
	}
	if !moved {
		return nil
	}
	if err := t.exec(`UPDATE attempts SET attempt = -attempt - ? WHERE execution_id = ? AND step_id = ? AND attempt <= ?`,
		renumberOffset, executionID, stepID, -renumberOffset); err != nil {
		return fmt.Errorf("store: renumber %s/%s: %w", executionID, stepID, err)
	}
	return nil
}

// PutSpan stores a span's folded fields.
func (t *Tx) PutSpan(s trace.Span) error {
	err := t.exec(`INSERT INTO spans (`+spanColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (trace_id, span_id) DO UPDATE SET execution_id = excluded.execution_id,
			parent_span_id = excluded.parent_span_id, role = excluded.role, name = excluded.name,
			started_at = excluded.started_at, ended_at = excluded.ended_at, error = excluded.error, model = excluded.model,
			input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, http_method = excluded.http_method,
			http_url = excluded.http_url, http_status = excluded.http_status, idempotency_key = excluded.idempotency_key`,
		s.TraceID, s.SpanID, s.ExecutionID, s.ParentSpanID, string(s.Role), s.Name, nanos(s.StartedAt), nanos(s.EndedAt), s.Error,
		s.Model, s.InputTokens, s.OutputTokens, s.HTTPMethod, s.HTTPURL, s.HTTPStatus, s.IdempotencyKey)
	if err != nil {
		return fmt.Errorf("store: put span %s/%s: %w", s.TraceID, s.SpanID, err)
	}
	return nil
}

// DropTracePlaceholder deletes the execution named after a trace id when
// nothing but effects of that trace made it: no event names it and no
// attempt or span belongs to it. It reports whether it did.
func (t *Tx) DropTracePlaceholder(traceID string) (bool, error) {
	var placeholder bool
	err := t.QueryRowContext(t.ctx, `SELECT EXISTS (SELECT 1 FROM executions WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM events WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM attempts WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM spans WHERE execution_id = ?)`, traceID, traceID, traceID, traceID).Scan(&placeholder)
	if err != nil || !placeholder {
		return false, err
	}
	return true, t.deletePlaceholder(traceID)
}

// DropEffectPlaceholder deletes the execution named after a trace id that
// an effect of the trace made while it named no execution, once none of
// the trace's effects is left naming none (a later report of the effect
// named its execution): what DropTracePlaceholder asks, and no such
// effect. It reports whether it did.
func (t *Tx) DropEffectPlaceholder(traceID string) (bool, error) {
	var placeholder bool
	err := t.QueryRowContext(t.ctx, `SELECT EXISTS (SELECT 1 FROM executions WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM events WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM attempts WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM spans WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM effects WHERE trace_id = ? AND execution_id = '')`,
		traceID, traceID, traceID, traceID, traceID).Scan(&placeholder)
	if err != nil || !placeholder {
		return false, err
	}
	return true, t.deletePlaceholder(traceID)
}

// deletePlaceholder deletes a placeholder execution and what its analysis
// stored.
func (t *Tx) deletePlaceholder(traceID string) error {
	if err := t.exec(`DELETE FROM findings WHERE execution_id = ? AND source = 'run'`, traceID); err != nil {
		return fmt.Errorf("store: drop placeholder %s: %w", traceID, err)
	}
	if err := t.exec(`DELETE FROM executions WHERE execution_id = ?`, traceID); err != nil {
		return fmt.Errorf("store: drop placeholder %s: %w", traceID, err)
	}
	if err := t.exec(`DELETE FROM search_terms WHERE execution_id = ?`, traceID); err != nil {
		return fmt.Errorf("store: drop placeholder %s: %w", traceID, err)
	}
	return nil
}

// ExecutionsOfTraces returns the executions whose attempts or spans came
// from one of the traces.
func (t *Tx) ExecutionsOfTraces(traces []string) ([]string, error) {
	if len(traces) == 0 {
		return nil, nil
	}
	return t.strings(`SELECT execution_id FROM attempts WHERE trace_id IN `+listParam+`
		UNION SELECT execution_id FROM spans WHERE trace_id IN `+listParam, jsonList(traces), jsonList(traces))
}

// ExecutionsByTrace returns, for each of the traces that has any, the
// executions whose attempts or spans came from it: what ExecutionsOfTraces
// answers, told apart by trace, in one query for a commit's traces.
func (t *Tx) ExecutionsByTrace(traces []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(traces) == 0 {
		return out, nil
	}
	rows, err := t.QueryContext(t.ctx, `SELECT trace_id, execution_id FROM attempts WHERE trace_id IN `+listParam+`
		UNION SELECT trace_id, execution_id FROM spans WHERE trace_id IN `+listParam+`
		ORDER BY 1, 2`, jsonList(traces), jsonList(traces))
	if err != nil {
		return nil, fmt.Errorf("store: executions of traces: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var traceID, executionID string
		if err := rows.Scan(&traceID, &executionID); err != nil {
			return nil, fmt.Errorf("store: executions of traces: %w", err)
		}
		out[traceID] = append(out[traceID], executionID)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: executions of traces: %w", err)
	}
	return out, nil
}

// PutEffect stores an effect's folded fields, keeping its match state.
func (t *Tx) PutEffect(f trace.Effect) error {
	// sort_at is at for the outbox's order (0 when unknown, never NULL);
	// a new row is an orphan, state_rank's default, until a recheck says.
	err := t.exec(`INSERT INTO effects (`+effectWriteColumns+`, sort_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (provider, effect_id) DO UPDATE SET idempotency_key = excluded.idempotency_key,
			execution_id = excluded.execution_id, step_id = excluded.step_id, target = excluded.target,
			at = excluded.at, sort_at = excluded.sort_at, conflicts = excluded.conflicts, trace_id = excluded.trace_id, span_id = excluded.span_id,
			fingerprint = excluded.fingerprint, summary = excluded.summary`,
		f.Provider, f.ID, f.IdempotencyKey, f.ExecutionID, f.StepID, f.Target, nanos(f.At), jsonText(f.Conflicts), f.TraceID, f.SpanID,
		f.Fingerprint, f.Summary, effectSortAt(f.At))
	if err != nil {
		return fmt.Errorf("store: put effect %s/%s: %w", f.Provider, f.ID, err)
	}
	return nil
}

// HasEffects reports whether a provider's outbox holds any effect.
func (t *Tx) HasEffects(provider string) (bool, error) {
	var n int
	err := t.QueryRowContext(t.ctx, `SELECT count(*) FROM (SELECT 1 FROM effects WHERE provider = ? LIMIT 1) AS one`, provider).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: provider %s: %w", provider, err)
	}
	return n > 0, nil
}

// FedProviders returns the providers whose outbox holds any effect.
func (db *DB) FedProviders(ctx context.Context) (map[string]bool, error) {
	return fedProviders(ctx, db.read)
}

// fedProviders steps through the primary key's providers, one seek each,
// rather than reading every effect as SELECT DISTINCT did on every page
// view: it costs the number of providers, not of effects, and being a
// query it agrees with the snapshot it runs in, which a cache would not.
func fedProviders(ctx context.Context, q querier) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `WITH RECURSIVE fed(provider) AS (
			SELECT min(provider) FROM effects
			UNION ALL
			SELECT (SELECT min(provider) FROM effects WHERE provider > fed.provider) FROM fed WHERE fed.provider IS NOT NULL
		) SELECT provider FROM fed WHERE provider IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("store: providers: %w", err)
	}
	defer rows.Close()
	fed := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("store: providers: %w", err)
		}
		fed[p] = true
	}
	return fed, rows.Err()
}

// ExecutionsWithKeys returns the executions having an attempt that carries
// one of the keys.
func (t *Tx) ExecutionsWithKeys(keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	return t.strings(`SELECT DISTINCT execution_id FROM attempts WHERE idempotency_key IN `+listParam+` AND `+keyed, jsonList(keys))
}

// ExecutionsWritingTo returns the executions with an attempt naming one of
// the providers. The attempt's own class is not checked: a step takes its
// class and its provider from whichever attempts name them, not
// necessarily the same one.
func (t *Tx) ExecutionsWritingTo(providers []string) ([]string, error) {
	if len(providers) == 0 {
		return nil, nil
	}
	return t.strings(`SELECT DISTINCT execution_id FROM attempts WHERE provider IN `+listParam, jsonList(providers))
}

func (t *Tx) strings(query string, args ...any) ([]string, error) {
	rows, err := t.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// StepRef names one step of one execution.
type StepRef struct{ ExecutionID, StepID string }

// OrphanRecheck is what RecheckOrphans judged.
type OrphanRecheck struct {
	// Executions are those the judged effects belong to, by name or by a
	// key their attempts sent: they must be re-counted, and their runs
	// analysed again, since the recheck may have set a state (orphan or
	// matched) that their analysis refines (duplicate).
	Executions []string
	// Effects are every effect whose state the recheck may have written,
	// identical effects pulled in with the others included.
	Effects []trace.EffectRef
}

// RecheckOrphans decides again, for the effects named, the effects carrying
// one of the keys and the effects naming one of the steps, whether any
// attempt can have caused them (trace.PlanOrphanRecheck decides, as the
// world audit does), and keeps their orphan_effect findings in step. It
// reads with four queries and writes with a few statements whatever the
// number of effects, plus one insert per finding.
func (t *Tx) RecheckOrphans(effects []trace.EffectRef, keys []string, steps []StepRef, repeatWindow time.Duration) (OrphanRecheck, error) {
	candidates, err := t.orphanCandidates(effects, keys, steps)
	if err != nil || len(candidates) == 0 {
		return OrphanRecheck{}, err
	}
	attempts, err := t.orphanCandidatesAttempts(candidates)
	if err != nil {
		return OrphanRecheck{}, err
	}
	plan := trace.PlanOrphanRecheck(candidates, attempts, trace.Config{RepeatWindow: repeatWindow})
	if err := t.applyOrphanRecheck(candidates, plan); err != nil {
		return OrphanRecheck{}, err
	}
	return OrphanRecheck{Executions: plan.Executions, Effects: plan.Effects}, nil
}

// orphanCandidates loads the effects named, those carrying one of the keys
// and those naming one of the steps, then the effects identical to one of
// them (one provider, one fingerprint): whether one repeats another
// (repeated_effect) depends on all of them.
func (t *Tx) orphanCandidates(effects []trace.EffectRef, keys []string, steps []StepRef) ([]trace.Effect, error) {
	stepPairs := make([][2]string, 0, len(steps))
	for _, s := range steps {
		stepPairs = append(stepPairs, [2]string{s.ExecutionID, s.StepID})
	}
	rows, err := t.QueryContext(t.ctx, `SELECT `+effectColumns+` FROM effects
		WHERE (provider, effect_id) IN `+pairsParam+`
		UNION SELECT `+effectColumns+` FROM effects WHERE idempotency_key IN `+listParam+`
		UNION SELECT `+effectColumns+` FROM effects
		WHERE (execution_id, step_id) IN `+pairsParam,
		jsonPairs(effectRefPairs(effects)), jsonList(keys), jsonPairs(stepPairs))
	if err != nil {
		return nil, fmt.Errorf("store: orphan candidates: %w", err)
	}
	candidates, err := scanEffects(rows)
	if err != nil {
		return nil, fmt.Errorf("store: orphan candidates: %w", err)
	}
	identical := fingerprintPairs(candidates)
	if len(identical) == 0 {
		return candidates, nil
	}
	// By fingerprint first (effects_fingerprint): compared as it is, the
	// provider would lead SQLite, which has no statistics, to the primary
	// key's range of every effect of the provider instead.
	rows, err = t.QueryContext(t.ctx, `SELECT `+effectColumns+` FROM effects
			WHERE fingerprint != '' AND fingerprint IN (SELECT b FROM `+pairsParam+` AS pair)
			AND (provider || '', fingerprint) IN `+pairsParam,
		jsonPairs(identical), jsonPairs(identical))
	if err != nil {
		return nil, fmt.Errorf("store: identical effects: %w", err)
	}
	more, err := scanEffects(rows)
	if err != nil {
		return nil, fmt.Errorf("store: identical effects: %w", err)
	}
	return appendNewEffects(candidates, more), nil
}

// orphanCandidatesAttempts loads the attempts that could match the
// candidates: by the key they carry, or by the step they name.
func (t *Tx) orphanCandidatesAttempts(candidates []trace.Effect) ([]trace.Attempt, error) {
	var keys []string
	var steps [][2]string
	for _, f := range candidates {
		if f.IdempotencyKey != "" {
			keys = append(keys, f.IdempotencyKey)
		}
		if f.ExecutionID != "" && f.StepID != "" {
			steps = append(steps, [2]string{f.ExecutionID, f.StepID})
		}
	}
	attempts, err := readAttempts(t.ctx, t, 0, `SELECT `+attemptsRead+` FROM attempts WHERE idempotency_key IN `+listParam+` AND `+keyed+`
		UNION SELECT `+attemptsRead+` FROM attempts
		WHERE (execution_id, step_id) IN `+pairsParam,
		jsonList(sortedSet(setOf(keys))), jsonPairs(steps))
	if err != nil {
		return nil, fmt.Errorf("store: orphan candidates' attempts: %w", err)
	}
	return attempts, nil
}

// applyOrphanRecheck replaces the candidates' effect findings with the
// plan's and sets the states it decided.
func (t *Tx) applyOrphanRecheck(candidates []trace.Effect, plan trace.OrphanPlan) error {
	refs := make([]trace.EffectRef, len(candidates))
	for i, f := range candidates {
		refs[i] = f.Ref()
	}
	if err := t.exec(`DELETE FROM findings WHERE source = 'effect'
		AND (effect_provider, effect_id) IN `+pairsParam,
		jsonPairs(effectRefPairs(refs))); err != nil {
		return fmt.Errorf("store: recheck orphans: %w", err)
	}
	for _, f := range plan.Findings {
		if err := t.insertFinding("effect", f); err != nil {
			return err
		}
	}
	// A matched effect may be a duplicate; the run analysis that follows
	// refines it, so only an orphan's state is set back to matched here.
	const refsIn = `(provider, effect_id) IN ` + pairsParam
	// Each state's rank is trace's (MatchState.OutboxRank), never one written here.
	if err := t.exec(`UPDATE effects SET state = ?, state_rank = ? WHERE state != ? AND `+refsIn,
		string(trace.MatchOrphan), trace.MatchOrphan.OutboxRank(), string(trace.MatchOrphan), jsonPairs(effectRefPairs(plan.Orphans))); err != nil {
		return fmt.Errorf("store: recheck orphans: %w", err)
	}
	// state || '': by the primary key, not effects_state_at's range of
	// every orphan, which SQLite, planning without statistics, prefers.
	if err := t.exec(`UPDATE effects SET state = ?, state_rank = ? WHERE state || '' = ? AND `+refsIn,
		string(trace.MatchMatched), trace.MatchMatched.OutboxRank(), string(trace.MatchOrphan), jsonPairs(effectRefPairs(plan.Matched))); err != nil {
		return fmt.Errorf("store: recheck orphans: %w", err)
	}
	return nil
}

// effectRefPairs is refs as (provider, effect id) pairs, for jsonPairs.
func effectRefPairs(refs []trace.EffectRef) [][2]string {
	pairs := make([][2]string, 0, len(refs))
	for _, r := range refs {
		pairs = append(pairs, [2]string{r.Provider, r.ID})
	}
	return pairs
}

// fingerprintPairs is the (provider, fingerprint) of each effect that has
// a fingerprint.
func fingerprintPairs(effects []trace.Effect) [][2]string {
	var pairs [][2]string
	for _, f := range effects {
		if f.Fingerprint != "" {
			pairs = append(pairs, [2]string{f.Provider, f.Fingerprint})
		}
	}
	return pairs
}

// appendNewEffects appends to effects those of more it does not hold yet
// (by reference), in more's order.
func appendNewEffects(effects, more []trace.Effect) []trace.Effect {
	have := map[trace.EffectRef]bool{}
	for _, f := range effects {
		have[f.Ref()] = true
	}
	for _, f := range more {
		if !have[f.Ref()] {
			have[f.Ref()] = true
			effects = append(effects, f)
		}
	}
	return effects
}

// SettleStates gives the effects that no analysis gave a state (no step of
// any execution holding them is theirs) the state the orphan recheck would:
// matched when an attempt could have caused them, else orphan. Only a
// duplicate can be left over (an analysis calls an effect one, e.g. one of
// identical effects, then no longer claims it): the other states an
// analysis gives agree with the recheck, which judges every effect whose
// claim a commit changes. It returns the effects whose state it set; it
// reads one query when none is a duplicate.
func (t *Tx) SettleStates(refs []trace.EffectRef) ([]trace.EffectRef, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Provider, r.ID}
	}
	// state || '': by the primary key, not effects_state_at's range of
	// every duplicate (as in applyOrphanRecheck).
	rows, err := t.QueryContext(t.ctx, `SELECT `+effectColumns+` FROM effects WHERE state || '' = 'duplicate'
		AND (provider, effect_id) IN `+pairsParam, jsonPairs(pairs))
	if err != nil {
		return nil, fmt.Errorf("store: settle states: %w", err)
	}
	stale, err := scanEffects(rows)
	if err != nil || len(stale) == 0 {
		return nil, err
	}
	var keys []string
	var steps [][2]string
	for _, f := range stale {
		if f.IdempotencyKey != "" {
			keys = append(keys, f.IdempotencyKey)
		}
		if f.ExecutionID != "" && f.StepID != "" {
			steps = append(steps, [2]string{f.ExecutionID, f.StepID})
		}
	}
	attempts, err := readAttempts(t.ctx, t, 0, `SELECT `+attemptsRead+` FROM attempts WHERE idempotency_key IN `+listParam+` AND `+keyed+`
		UNION SELECT `+attemptsRead+` FROM attempts
		WHERE (execution_id, step_id) IN `+pairsParam,
		jsonList(sortedSet(setOf(keys))), jsonPairs(steps))
	if err != nil {
		return nil, fmt.Errorf("store: settle states: %w", err)
	}
	claimed := trace.IndexAttempts(attempts)
	var out []trace.EffectRef
	for _, f := range stale {
		state := trace.MatchOrphan
		if claimed.Claims(f) {
			state = trace.MatchMatched
		}
		if err := t.exec(`UPDATE effects SET state = ?, state_rank = ? WHERE provider = ? AND effect_id = ?`,
			string(state), state.OutboxRank(), f.Provider, f.ID); err != nil {
			return nil, fmt.Errorf("store: settle states: %w", err)
		}
		out = append(out, f.Ref())
	}
	return out, nil
}

// jsonPairs is pairs as one JSON array of two-element arrays, bound as one
// parameter (pairsParam).
func jsonPairs(pairs [][2]string) string {
	if len(pairs) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(pairs)
	return string(b)
}

// naturalPlace is a finding's place as the findings list orders it: each
// part's trace.NaturalKey, joined by a byte lower than any a part holds
// (\x01: PostgreSQL's text takes no NUL), so that the tuple's order is the
// string's.
func naturalPlace(parts ...string) string {
	keys := make([]string, len(parts))
	for i, p := range parts {
		keys[i] = trace.NaturalKey(p)
	}
	return strings.Join(keys, "\x01")
}

func (t *Tx) insertFinding(source string, f trace.Finding) error {
	body, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("store: finding: %w", err)
	}
	var ref trace.EffectRef
	if source == "effect" && len(f.Effects) > 0 {
		ref = f.Effects[0]
	}
	err = t.exec(`INSERT INTO findings (execution_id, source, rule, severity, step_id, idempotency_key, effect_provider, effect_id, natural_place, body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		f.ExecutionID, source, string(f.Rule), string(f.Severity), f.StepID, f.IdempotencyKey, ref.Provider, ref.ID,
		naturalPlace(f.ExecutionID, f.StepID, string(f.Rule), f.IdempotencyKey, ref.Provider, ref.ID), string(body))
	if err != nil {
		return fmt.Errorf("store: insert finding: %w", err)
	}
	return nil
}

// LoadRun reads one execution for analysis inside the transaction.
func (t *Tx) LoadRun(id string, fed map[string]bool) (trace.Run, error) {
	return loadRun(t.ctx, t, id, fed)
}

// RunFindings returns the findings the last analysis of an execution
// stored, in the order it stored them.
func (t *Tx) RunFindings(executionID string) ([]trace.Finding, error) {
	rows, err := t.QueryContext(t.ctx, `SELECT body FROM findings WHERE execution_id = ? AND source = 'run' ORDER BY rowid`, executionID)
	if err != nil {
		return nil, fmt.Errorf("store: findings of %s: %w", executionID, err)
	}
	defer rows.Close()
	var out []trace.Finding
	for rows.Next() {
		var body []byte
		var f trace.Finding
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("store: findings of %s: %w", executionID, err)
		}
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, fmt.Errorf("store: findings of %s: %w", executionID, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Analysis is what one re-audit of an execution derived.
type Analysis struct {
	Run      trace.Run
	Findings []trace.Finding
	Before   []trace.Finding // as RunFindings returned them before
	States   map[trace.EffectRef]trace.MatchState
	Counts   trace.Counts
	State    trace.AuditState
	// Steps whose attempts changed in this commit; only their rows are
	// rewritten, the others are as their attempts left them.
	Steps map[string]bool
}

// SaveAnalysis stores what was derived about one execution: its findings,
// its changed steps, its effects' match states and its counts. Rows that
// would not change are not written.
func (t *Tx) SaveAnalysis(a Analysis) error {
	run := a.Run
	id := run.Execution.ID
	if !sameFindings(a.Before, a.Findings) {
		if err := t.exec(`DELETE FROM findings WHERE execution_id = ? AND source = 'run'`, id); err != nil {
			return fmt.Errorf("store: save analysis of %s: %w", id, err)
		}
		for _, f := range a.Findings {
			if err := t.insertFinding("run", f); err != nil {
				return err
			}
		}
	}
	for _, s := range run.Steps {
		if !a.Steps[s.ID] {
			continue
		}
		if err := t.exec(`INSERT INTO steps (execution_id, step_id, tool, effect, provider, attempts) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (execution_id, step_id) DO UPDATE SET tool = excluded.tool, effect = excluded.effect,
				provider = excluded.provider, attempts = excluded.attempts`,
			id, s.ID, s.Tool, string(s.Effect), s.Provider, len(s.Attempts)); err != nil {
			return fmt.Errorf("store: save step %s/%s: %w", id, s.ID, err)
		}
	}
	for ref, state := range a.States {
		if err := t.exec(`UPDATE effects SET state = ?, state_rank = ? WHERE provider = ? AND effect_id = ? AND state != ?`,
			string(state), state.OutboxRank(), ref.Provider, ref.ID, string(state)); err != nil {
			return fmt.Errorf("store: save effect state: %w", err)
		}
	}
	// The analysis is where an execution meets every effect it owns,
	// whichever arrived first, so their search terms are recorded here.
	if err := t.indexTerms(id, effectTerms(run.Effects)); err != nil {
		return err
	}
	counts := a.Counts
	err := t.exec(`UPDATE executions SET sort_at = ?, steps = ?, attempts = ?, retries = ?, dedupes = ?, replays = ?, effects = ?,
			audit_state = ?, findings = (SELECT count(*) FROM findings WHERE execution_id = ?),
			critical_findings = (SELECT count(*) FROM findings WHERE execution_id = ? AND severity = 'critical')
		WHERE execution_id = ?`,
		sortTime(run), counts.Steps, counts.Attempts, counts.Retries, counts.Dedupes, counts.Replays, counts.Effects, string(a.State), id, id, id)
	if err != nil {
		return fmt.Errorf("store: save counts of %s: %w", id, err)
	}
	return nil
}

func sameFindings(a, b []trace.Finding) bool {
	if len(a) != len(b) {
		return false
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// sortTime orders executions newest first: the execution's own start, else
// its earliest attempt or effect, so the order never depends on arrival.
func sortTime(run trace.Run) int64 {
	t := run.Execution.StartedAt
	consider := func(c time.Time) {
		if !c.IsZero() && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	if t.IsZero() {
		for _, s := range run.Steps {
			for _, a := range s.Attempts {
				consider(a.StartedAt)
			}
		}
		for _, f := range run.Effects {
			consider(f.At)
		}
	}
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
