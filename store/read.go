package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// ExecutionSummary is one row of the executions list.
type ExecutionSummary struct {
	trace.Execution
	trace.Counts
	Findings         int              `json:"findings"`
	CriticalFindings int              `json:"critical_findings"`
	AuditState       trace.AuditState `json:"audit_state,omitempty"`
}

// ExecutionFilter selects executions. Zero values select everything.
type ExecutionFilter struct {
	Status      trace.Status
	AuditState  trace.AuditState
	Name        string
	HasFindings *bool
	// Q is words that must all match (search.go): each the start of an
	// execution id, step id, idempotency key, effect target or id, label
	// value (or key:value), tool or worker, or of a part of free text.
	Q        string
	From, To time.Time // start time range, inclusive
	// BySeverity lists critical executions first, then unverified, then
	// the rest, each newest first, instead of all newest first.
	BySeverity bool
	Cursor     string // from a previous page's Next
	Limit      int
}

// MaxPageSize bounds every list.
const MaxPageSize = 1000

// ErrBadCursor means a cursor did not come from this server.
var ErrBadCursor = fmt.Errorf("cursor: not a cursor this server issued")

// ListExecutions returns executions newest first (by severity first with
// f.BySeverity), and the cursor of the next page ("" on the last one): at
// most three page reads and a search's count, in one read transaction.
func (db *DB) ListExecutions(ctx context.Context, f ExecutionFilter) (list []ExecutionSummary, next string, err error) {
	err = db.inReadTx(ctx, func(tx querier) error {
		list, next, err = listExecutions(ctx, tx, f)
		return err
	})
	return list, next, err
}

func listExecutions(ctx context.Context, q querier, f ExecutionFilter) ([]ExecutionSummary, string, error) {
	limit := pageSize(f.Limit)
	var where []string
	var args []any
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	if f.AuditState != "" {
		where, args = append(where, "audit_state = ?"), append(args, string(f.AuditState))
	}
	if f.Name != "" {
		where, args = append(where, "name = ?"), append(args, f.Name)
	}
	if f.HasFindings != nil {
		if *f.HasFindings {
			where = append(where, "findings > 0")
		} else {
			where = append(where, "findings = 0")
		}
	}
	if strings.TrimSpace(f.Q) != "" {
		cond, condArgs, err := searchClause(ctx, q, f.Q) // search.go
		if err != nil {
			return nil, "", err
		}
		where, args = append(where, cond), append(args, condArgs...)
	}
	if !f.From.IsZero() {
		where, args = append(where, "sort_at >= ?"), append(args, f.From.UnixNano())
	}
	if !f.To.IsZero() {
		where, args = append(where, "sort_at <= ?"), append(args, f.To.UnixNano())
	}
	if !f.BySeverity || f.AuditState != "" {
		var after *executionCursor
		if f.Cursor != "" {
			at, id, err := decodeCursor(f.Cursor)
			if err != nil {
				return nil, "", err
			}
			after = &executionCursor{at: at, id: id}
		}
		out, last, err := executionsPage(ctx, q, where, args, after, limit)
		if err != nil || len(out) <= limit {
			return out, "", err
		}
		return out[:limit], encodeCursor(last[limit-1], out[limit-1].ID), nil
	}
	// By severity: one page of each group in turn, each read newest first
	// in executions_state (the last in executions_newest), until the page
	// is full; the cursor names the group it stopped in.
	group, after := 0, (*executionCursor)(nil)
	if f.Cursor != "" {
		key, err := decodeKeyCursor(f.Cursor, 3)
		if err != nil {
			return nil, "", err
		}
		g, ok0 := key[0].(int64)
		at, ok1 := key[1].(int64)
		id, ok2 := key[2].(string)
		if !ok0 || !ok1 || !ok2 || g < 0 || int(g) >= len(severityGroups) {
			return nil, "", ErrBadCursor
		}
		group, after = int(g), &executionCursor{at: at, id: id}
	}
	var out []ExecutionSummary
	var sortAts []int64
	var groups []int
	for ; group < len(severityGroups) && len(out) <= limit; group, after = group+1, nil {
		g := severityGroups[group]
		rows, ats, err := executionsPage(ctx, q, append(slices.Clone(where), g.cond), append(slices.Clone(args), g.args...), after, limit-len(out))
		if err != nil {
			return nil, "", err
		}
		out, sortAts = append(out, rows...), append(sortAts, ats...)
		for range rows {
			groups = append(groups, group)
		}
	}
	if len(out) <= limit {
		return out, "", nil
	}
	last := limit - 1
	return out[:limit], encodeKeyCursor([]any{groups[last], sortAts[last], out[last].ID}), nil
}

// severityGroups are the executions list's groups by severity, worst
// first: the rest holds clean ones and any not audited yet.
var severityGroups = []struct {
	cond string
	args []any
}{
	{"audit_state = ?", []any{string(trace.StateCritical)}},
	{"audit_state = ?", []any{string(trace.StateUnverified)}},
	{"audit_state NOT IN (?, ?)", []any{string(trace.StateCritical), string(trace.StateUnverified)}},
}

// executionCursor is where a page of executions, newest first, resumes.
type executionCursor struct {
	at int64
	id string
}

// executionsPage reads up to limit+1 executions matching where, newest
// first, after the cursor if any, with each one's sort_at.
func executionsPage(ctx context.Context, q querier, where []string, args []any, after *executionCursor, limit int) ([]ExecutionSummary, []int64, error) {
	if after != nil {
		where = append(slices.Clone(where), "(sort_at < ? OR (sort_at = ? AND execution_id < ?))")
		args = append(slices.Clone(args), after.at, after.at, after.id)
	}
	query := `SELECT ` + executionColumns + `, sort_at, steps, attempts, retries, dedupes, replays, effects, findings, critical_findings, audit_state
		FROM executions`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY sort_at DESC, execution_id DESC LIMIT ?"
	args = append(slices.Clone(args), limit+1)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list executions: %w", err)
	}
	defer rows.Close()
	var out []ExecutionSummary
	var sortAts []int64
	for rows.Next() {
		var s ExecutionSummary
		var sortAt int64
		x, err := scanExecution(rows, &sortAt, &s.Steps, &s.Attempts, &s.Retries, &s.Dedupes, &s.Replays, &s.Effects, &s.Findings, &s.CriticalFindings, &s.AuditState)
		if err != nil {
			return nil, nil, fmt.Errorf("store: list executions: %w", err)
		}
		s.Execution = x
		out = append(out, s)
		sortAts = append(sortAts, sortAt)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: list executions: %w", err)
	}
	return out, sortAts, nil
}

func pageSize(n int) int {
	if n <= 0 {
		return 50
	}
	return min(n, MaxPageSize)
}

// Cursors are opaque to clients: base64 of the last row's sort key.
func encodeCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + "\x00" + id))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	at, id, ok := strings.Cut(string(b), "\x00")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil {
		return 0, "", ErrBadCursor
	}
	return n, id, nil
}

// Run loads one execution with everything the audit and the views need.
func (db *DB) Run(ctx context.Context, id string) (run trace.Run, err error) {
	err = db.inReadTx(ctx, func(tx querier) error {
		fed, err := fedProviders(ctx, tx)
		if err != nil {
			return err
		}
		run, err = loadRun(ctx, tx, id, fed)
		return err
	})
	return run, err
}

// FindingFilter selects findings.
type FindingFilter struct {
	ExecutionID string
	Key         string
	Rule        trace.Rule
	Severity    trace.Severity
	Cursor      string // from a previous page's next (FindingsPage)
	Limit       int
}

// findingKey is the order findings are listed in: critical first
// ("critical" sorts before "warning"), then by where they are, ids in
// natural order (natural_place: step-2 before step-14), then by the ids
// themselves; the findings_order index (SQLite migration 0018) serves it. Findings with the same
// key (rare) are ordered by their body, so that the order, and a page's
// cursor, is the same on every instance and database holding the same
// findings.
var findingKey = []string{"severity", "natural_place", "execution_id", "step_id", "rule", "idempotency_key", "effect_provider", "effect_id"}

// Findings returns every stored finding the filter selects (up to Limit
// when set), critical first.
func (db *DB) Findings(ctx context.Context, f FindingFilter) ([]trace.Finding, error) {
	out, _, err := findings(ctx, db.read, f)
	return out, err
}

// FindingsPage returns a page of findings, at most pageSize(f.Limit), and
// the cursor of the next page ("" on the last one): a page costs the same
// however many findings are stored.
func (db *DB) FindingsPage(ctx context.Context, f FindingFilter) ([]trace.Finding, string, error) {
	f.Limit = pageSize(f.Limit)
	return findings(ctx, db.read, f)
}

func findings(ctx context.Context, q querier, f FindingFilter) ([]trace.Finding, string, error) {
	var where []string
	var args []any
	if f.ExecutionID != "" {
		where, args = append(where, "execution_id = ?"), append(args, f.ExecutionID)
	}
	if f.Key != "" {
		// != '': findings_key holds only the findings naming a key.
		where, args = append(where, "idempotency_key = ? AND idempotency_key != ''"), append(args, f.Key)
	}
	if f.Rule != "" {
		where, args = append(where, "rule = ?"), append(args, string(f.Rule))
	}
	if f.Severity != "" {
		where, args = append(where, "severity = ?"), append(args, string(f.Severity))
	}
	key := strings.Join(findingKey, ", ")
	// A cursor is the last key shown and how many findings with that key
	// were shown: the next page starts at that key and skips them.
	var from []any
	skip := 0
	if f.Cursor != "" {
		c, err := decodeKeyCursor(f.Cursor, len(findingKey)+1)
		if err != nil {
			return nil, "", err
		}
		n, ok := c[len(findingKey)].(int64)
		if !ok || n < 0 {
			return nil, "", ErrBadCursor
		}
		from, skip = c[:len(findingKey)], int(n)
		where = append(where, "("+key+") >= ("+placeholders(len(from))+")")
		args = append(args, from...)
	}
	query := `SELECT ` + key + `, body FROM findings`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY " + key + ", body"
	if f.Limit > 0 {
		query += " LIMIT ? OFFSET ?"
		args = append(args, f.Limit+1, skip)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: findings: %w", err)
	}
	defer rows.Close()
	out := []trace.Finding{}
	var last []any
	ties := 0 // findings shown with the key of the last one
	for rows.Next() {
		k := make([]string, len(findingKey))
		dest := make([]any, 0, len(k)+1)
		for i := range k {
			dest = append(dest, &k[i])
		}
		var body []byte
		if err := rows.Scan(append(dest, &body)...); err != nil {
			return nil, "", fmt.Errorf("store: findings: %w", err)
		}
		if f.Limit > 0 && len(out) == f.Limit {
			return out, encodeKeyCursor(append(last, int64(ties))), nil
		}
		var fd trace.Finding
		if err := json.Unmarshal(body, &fd); err != nil {
			return nil, "", fmt.Errorf("store: findings: %w", err)
		}
		out = append(out, fd)
		row := make([]any, len(k))
		for i, v := range k {
			row[i] = v
		}
		switch {
		case last != nil && slices.Equal(k, keyStrings(last)):
			ties++
		case last == nil && from != nil && slices.Equal(k, keyStrings(from)):
			ties = skip + 1 // the page began among findings of the cursor's key
		default:
			ties = 1
		}
		last = row
	}
	return out, "", rows.Err()
}

func keyStrings(key []any) []string {
	out := make([]string, len(key))
	for i, v := range key {
		out[i], _ = v.(string)
	}
	return out
}

// encodeKeyCursor and decodeKeyCursor carry a row's sort key from one page
// to the next, as JSON: strings stay strings, numbers become int64.
func encodeKeyCursor(key []any) string {
	b, _ := json.Marshal(key)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeKeyCursor(c string, n int) ([]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, ErrBadCursor
	}
	var raw []any
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != n {
		return nil, ErrBadCursor
	}
	for i, v := range raw {
		switch v := v.(type) {
		case string:
		case float64:
			raw[i] = int64(v)
		default:
			return nil, ErrBadCursor
		}
	}
	return raw, nil
}

// EffectRow is an effect with its match state.
type EffectRow struct {
	trace.Effect
	State trace.MatchState `json:"state"`
}

// EffectFilter selects effects.
type EffectFilter struct {
	Provider    string
	State       trace.MatchState
	ExecutionID string
	Key         string
	Search      EffectSearch
	Cursor      string
	Limit       int
}

// Effects returns effects duplicates first, then orphans, then matched,
// each group by provider and time, and the cursor of the next page. A
// search that reads rows for what no index holds stops after
// MaxEffectScan of them: a page shorter than asked with a cursor means
// that more effects remain to be searched.
func (db *DB) Effects(ctx context.Context, f EffectFilter) ([]EffectRow, string, error) {
	return effects(ctx, db.read, f)
}

func effects(ctx context.Context, q querier, f EffectFilter) ([]EffectRow, string, error) {
	limit := pageSize(f.Limit)
	var where []string
	var args []any
	if f.Provider != "" {
		where, args = append(where, "provider = ?"), append(args, f.Provider)
	}
	if f.State != "" {
		// The rank lets a state's page seek in effects_outbox.
		where, args = append(where, "state_rank = ? AND state = ?"), append(args, f.State.OutboxRank(), string(f.State))
	}
	if f.ExecutionID != "" {
		where, args = append(where, "execution_id = ?"), append(args, f.ExecutionID)
	}
	if f.Key != "" {
		// Stating effects_key's condition lets the partial index serve.
		where, args = append(where, "idempotency_key != '' AND idempotency_key = ?"), append(args, f.Key)
	}
	searchWhere, searchArgs := f.Search.indexed()
	where, args = append(where, searchWhere...), append(args, searchArgs...)
	// effects_outbox (effects_provider_outbox when a provider is asked for)
	// serves this order, so a page reads only its rows.
	const order = `state_rank, provider, sort_at, effect_id`
	if f.Cursor != "" {
		key, err := decodeEffectCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		// A cursor continues the listing it came from, whose filters fix
		// the rank or the provider: comparing only the columns left free
		// lets the index seek past them rather than filter from the start.
		cols := []string{"state_rank", "provider", "sort_at", "effect_id"}
		fixed := []bool{f.State != "", f.Provider != "", false, false}
		var free []string
		var marks []string
		for i, c := range cols {
			if !fixed[i] {
				free, marks, args = append(free, c), append(marks, "?"), append(args, key[i])
			}
		}
		where = append(where, "("+strings.Join(free, ", ")+") > ("+strings.Join(marks, ", ")+")")
	}
	columns := effectColumns + `, state, state_rank`
	if f.Search.From != "" {
		// The envelope sender is the kept message's: one seek in
		// messages_effect a row read.
		columns += `, coalesce((SELECT mail_from FROM messages m WHERE m.provider = effects.provider AND m.effect_id = effects.effect_id), '')`
	}
	query := `SELECT ` + columns + ` FROM effects`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY " + order + " LIMIT ?"
	read := limit + 1
	if f.Search.Scans() {
		read = MaxEffectScan
	}
	args = append(args, read)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: effects: %w", err)
	}
	defer rows.Close()
	out := []EffectRow{}
	var ranks []int
	scanned := 0
	var last EffectRow // the last row read, where a capped search resumes
	var lastRank int
	for len(out) <= limit && rows.Next() {
		var r EffectRow
		var rk int
		var from string
		extra := []any{&r.State, &rk}
		if f.Search.From != "" {
			extra = append(extra, &from)
		}
		if r.Effect, err = scanEffect(rows, extra...); err != nil {
			return nil, "", fmt.Errorf("store: effects: %w", err)
		}
		scanned, last, lastRank = scanned+1, r, rk
		if !f.Search.matches(r.Effect, from) {
			continue
		}
		out = append(out, r)
		ranks = append(ranks, rk)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: effects: %w", err)
	}
	if len(out) <= limit && f.Search.Scans() && scanned == read {
		// The scan stopped before a page matched: the cursor resumes it.
		return out, encodeEffectCursor(lastRank, last.Provider, effectSortAt(last.At), last.ID), nil
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = encodeEffectCursor(ranks[limit-1], last.Provider, effectSortAt(last.At), last.ID)
	}
	return out, next, nil
}

// effectSortAt is effects.sort_at: the effect's time, 0 when unknown, so
// that the outbox's order and cursors never meet a NULL.
func effectSortAt(at time.Time) int64 {
	if at.IsZero() {
		return 0
	}
	return at.UnixNano()
}

func encodeEffectCursor(rank int, provider string, at int64, id string) string {
	b, _ := json.Marshal([]string{strconv.Itoa(rank), provider, strconv.FormatInt(at, 10), id})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeEffectCursor(c string) ([]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	var parts []string
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	if err != nil || len(parts) != 4 {
		return nil, ErrBadCursor
	}
	rank, err1 := strconv.Atoi(parts[0])
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, ErrBadCursor
	}
	return []any{rank, parts[1], at, parts[3]}, nil
}

// OrphanEffectsBetween returns up to limit orphan effects whose time falls
// in [from, to], by time: what an unverified execution may have caused
// without saying so.
func (db *DB) OrphanEffectsBetween(ctx context.Context, from, to time.Time, limit int) ([]trace.Effect, error) {
	return orphanEffectsBetween(ctx, db.read, from, to, limit)
}

func orphanEffectsBetween(ctx context.Context, q querier, from, to time.Time, limit int) ([]trace.Effect, error) {
	if from.IsZero() || to.IsZero() {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT `+effectColumns+` FROM effects WHERE state = 'orphan' AND at BETWEEN ? AND ?
		ORDER BY at, provider, effect_id LIMIT ?`, from.UnixNano(), to.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: orphans between: %w", err)
	}
	out, err := scanEffects(rows)
	if err != nil {
		return nil, fmt.Errorf("store: orphans between: %w", err)
	}
	return out, nil
}

// ExportEvents calls fn with every stored event body in sequence order.
func (db *DB) ExportEvents(ctx context.Context, fn func(seq int64, body []byte) error) error {
	rows, err := db.read.QueryContext(ctx, `SELECT seq, body FROM events ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("store: export: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return fmt.Errorf("store: export: %w", err)
		}
		if err := fn(seq, body); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	var n int
	return db.read.QueryRowContext(ctx, `SELECT 1`).Scan(&n)
}

// EffectStates returns the stored match state of each effect, in one query
// however many there are; an effect not stored is ErrNotFound.
func (db *DB) EffectStates(ctx context.Context, refs []trace.EffectRef) (map[trace.EffectRef]trace.MatchState, error) {
	return effectStates(ctx, db.read, refs)
}

func effectStates(ctx context.Context, q querier, refs []trace.EffectRef) (map[trace.EffectRef]trace.MatchState, error) {
	out := make(map[trace.EffectRef]trace.MatchState, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Provider, r.ID}
	}
	list, err := json.Marshal(pairs)
	if err != nil {
		return nil, fmt.Errorf("store: effect states: %w", err)
	}
	// The refs are one JSON argument of [provider, id] pairs, so the text
	// stays the same for any number; each pair is a primary key lookup.
	rows, err := q.QueryContext(ctx, `SELECT e.provider, e.effect_id, e.state FROM `+pairsParam+` AS ref
		JOIN effects AS e ON e.provider = ref.a AND e.effect_id = ref.b`, string(list))
	if err != nil {
		return nil, fmt.Errorf("store: effect states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r trace.EffectRef
		var state trace.MatchState
		if err := rows.Scan(&r.Provider, &r.ID, &state); err != nil {
			return nil, fmt.Errorf("store: effect states: %w", err)
		}
		out[r] = state
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: effect states: %w", err)
	}
	for _, r := range refs {
		if _, ok := out[r]; !ok {
			return nil, fmt.Errorf("store: effect state %s/%s: %w", r.Provider, r.ID, ErrNotFound)
		}
	}
	return out, nil
}

// AttemptsWithKey returns every attempt, of any execution, that carried
// key; none for the empty key, which is no key (keyed).
func (db *DB) AttemptsWithKey(ctx context.Context, key string) ([]trace.Attempt, error) {
	return attemptsWithKey(ctx, db.read, key)
}

func attemptsWithKey(ctx context.Context, q querier, key string) ([]trace.Attempt, error) {
	attempts, err := readAttempts(ctx, q, 0, `SELECT `+attemptsRead+` FROM attempts WHERE idempotency_key = ? AND `+keyed+`
		ORDER BY started_at NULLS FIRST, execution_id, step_id, attempt`, key)
	if err != nil {
		return nil, fmt.Errorf("store: attempts with key: %w", err)
	}
	return attempts, nil
}

// StoredEvent is one event of the raw log with its sequence number.
type StoredEvent struct {
	Seq  int64
	Body []byte
}

// EventsAfter returns up to limit events with a sequence number above
// after, in order; executionID, when set, selects one execution's events.
//
// It never passes an event that a commit still under way may precede
// (Engine.TailBound): a reader resuming after the last one it got misses
// nothing, whichever instance committed what when.
func (db *DB) EventsAfter(ctx context.Context, after int64, executionID string, limit int) ([]StoredEvent, error) {
	bound, ok, err := db.engine.TailBound(ctx, db.read.DB)
	if err != nil {
		return nil, err
	}
	if !ok {
		bound = math.MaxInt64
	}
	return eventsAfter(ctx, db.read, after, bound, executionID, limit)
}

func eventsAfter(ctx context.Context, q querier, after, bound int64, executionID string, limit int) ([]StoredEvent, error) {
	query, args := `SELECT seq, body FROM events WHERE seq > ? AND seq <= ?`, []any{after, bound}
	if executionID != "" {
		query, args = query+` AND execution_id = ?`, append(args, executionID)
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY seq LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: events after %d: %w", after, err)
	}
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		var e StoredEvent
		if err := rows.Scan(&e.Seq, &e.Body); err != nil {
			return nil, fmt.Errorf("store: events after %d: %w", after, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastSeq is the sequence number of the newest stored event, 0 when none.
// A reader starting after it misses nothing committed later
// (EventsAfter).
func (db *DB) LastSeq(ctx context.Context) (int64, error) {
	bound, ok, err := db.engine.TailBound(ctx, db.read.DB)
	if err != nil {
		return 0, err
	}
	if !ok {
		bound = math.MaxInt64
	}
	var n int64
	err = db.read.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE seq <= ?`, bound).Scan(&n)
	return n, err
}

// ExecutionNames returns the names of the executions asked for.
func (db *DB) ExecutionNames(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.read.QueryContext(ctx, `SELECT execution_id, name FROM executions WHERE execution_id IN (`+placeholders(len(ids))+`)`, stringsAsAny(ids)...)
	if err != nil {
		return nil, fmt.Errorf("store: execution names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, fmt.Errorf("store: execution names: %w", err)
		}
		out[id] = name
	}
	return out, rows.Err()
}

// ExecutionSizes returns how much each execution asked for (of those
// stored) holds for its page to read: its attempts, effects and findings,
// as its row counts them.
func (db *DB) ExecutionSizes(ctx context.Context, ids []string) (map[string]int, error) {
	if len(ids) == 0 {
		return map[string]int{}, nil
	}
	return db.executionSizes(ctx, `SELECT execution_id, attempts + effects + findings FROM executions WHERE execution_id IN (`+placeholders(len(ids))+`)`,
		stringsAsAny(ids)...)
}

// NewestExecutionSizes is ExecutionSizes of the newest n executions (the
// executions list's first page, by its index).
func (db *DB) NewestExecutionSizes(ctx context.Context, n int) (map[string]int, error) {
	return db.executionSizes(ctx, `SELECT execution_id, attempts + effects + findings FROM executions ORDER BY sort_at DESC, execution_id DESC LIMIT ?`, n)
}

func (db *DB) executionSizes(ctx context.Context, query string, args ...any) (map[string]int, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: execution sizes: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var size int
		if err := rows.Scan(&id, &size); err != nil {
			return nil, fmt.Errorf("store: execution sizes: %w", err)
		}
		out[id] = size
	}
	return out, rows.Err()
}

// ExecutionsSharing returns the executions that share one of the keys or
// traces: whose attempts sent one of the keys or came from one of the
// traces, whose spans came from one, and that effects carrying one name.
// What an execution's effects' states depend on (the audit of every
// execution an effect belongs to stores it) is among them, given its
// effects' keys and traces.
func (db *DB) ExecutionsSharing(ctx context.Context, keys, traces []string) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT execution_id FROM attempts WHERE idempotency_key IN `+listParam+` AND `+keyed+`
		UNION SELECT execution_id FROM effects WHERE idempotency_key IN `+listParam+` AND execution_id != ''
		UNION SELECT execution_id FROM attempts WHERE trace_id IN `+listParam+`
		UNION SELECT execution_id FROM spans WHERE trace_id IN `+listParam+`
		UNION SELECT execution_id FROM effects WHERE trace_id IN `+listParam+` AND execution_id != ''`,
		jsonList(keys), jsonList(keys), jsonList(traces), jsonList(traces), jsonList(traces))
	if err != nil {
		return nil, fmt.Errorf("store: executions sharing keys or traces: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: executions sharing keys or traces: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
