package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// Message is a mail message an outbox feed (the SMTP sink) received, kept
// so that the UI can show it. It is the content of one effect, which is
// recorded as an event like any other; the message itself is not an
// event and is not exported.
type Message struct {
	Provider   string
	EffectID   string
	From       string   // the envelope sender (MAIL FROM)
	Recipients []string // the envelope recipients (RCPT TO)
	// ReceivedAt is when the kept copy arrived; LastReceivedAt when the
	// latest copy under the same effect id did, and Received how many did.
	ReceivedAt     time.Time
	LastReceivedAt time.Time
	Received       int
	Raw            []byte // the message as received, headers and body

	// Effect is the effect the message caused, as stored (zero when it
	// is not, which a feed never leaves so), and State its match state.
	Effect trace.Effect
	State  trace.MatchState
}

// PutMessage keeps a received message. A message under an effect id that
// already has one is counted, and the first copy kept: the effect is one
// either way.
func (db *DB) PutMessage(ctx context.Context, m Message) error {
	recipients, _ := json.Marshal(m.Recipients)
	at := m.ReceivedAt.UnixNano()
	err := db.Update(ctx, func(t *Tx) error {
		return t.exec(`INSERT INTO messages (provider, effect_id, mail_from, recipients, received_at, last_received_at, raw)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (provider, effect_id) DO UPDATE SET received = messages.received + 1, last_received_at = excluded.last_received_at`,
			m.Provider, m.EffectID, m.From, string(recipients), at, at, m.Raw)
	})
	if err != nil {
		return fmt.Errorf("store: put message %s %s: %w", m.Provider, m.EffectID, err)
	}
	return nil
}

// Message returns the message kept for an effect, with the effect, or
// ErrNotFound.
func (db *DB) Message(ctx context.Context, provider, effectID string) (Message, error) {
	m := Message{Provider: provider, EffectID: effectID}
	var recipients string
	var received, last int64
	// The effect's columns are NULL when it is not stored.
	var e struct {
		provider, id, key, execution, step, target, conflicts, traceID, spanID, state, fingerprint, summary sql.NullString
		at                                                                                                  sql.NullInt64
	}
	err := db.read.QueryRowContext(ctx, `SELECT m.mail_from, m.recipients, m.received_at, m.last_received_at, m.received, m.raw,
			e.provider, e.effect_id, e.idempotency_key, e.execution_id, e.step_id, e.target, e.at, e.conflicts, e.trace_id, e.span_id, e.state,
			e.fingerprint, e.summary
		FROM messages m LEFT JOIN effects e ON e.provider = m.provider AND e.effect_id = m.effect_id
		WHERE m.provider = ? AND m.effect_id = ?`, provider, effectID).
		Scan(&m.From, &recipients, &received, &last, &m.Received, &m.Raw,
			&e.provider, &e.id, &e.key, &e.execution, &e.step, &e.target, &e.at, &e.conflicts, &e.traceID, &e.spanID, &e.state, &e.fingerprint, &e.summary)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("store: message %s %s: %w", provider, effectID, err)
	}
	_ = json.Unmarshal([]byte(recipients), &m.Recipients)
	m.ReceivedAt, m.LastReceivedAt = time.Unix(0, received).UTC(), time.Unix(0, last).UTC()
	if e.provider.Valid {
		m.Effect = trace.Effect{Provider: e.provider.String, ID: e.id.String, IdempotencyKey: e.key.String,
			ExecutionID: e.execution.String, StepID: e.step.String, Target: e.target.String, At: fromNanos(e.at),
			Conflicts: conflicts(e.conflicts.String), TraceID: e.traceID.String, SpanID: e.spanID.String,
			Fingerprint: e.fingerprint.String, Summary: e.summary.String}
		m.State = trace.MatchState(e.state.String)
	}
	return m, nil
}

// MessagesKept reports which of the effects have a message kept: one
// query whatever their number.
func (db *DB) MessagesKept(ctx context.Context, refs []trace.EffectRef) (map[trace.EffectRef]bool, error) {
	out := map[trace.EffectRef]bool{}
	if len(refs) == 0 {
		return out, nil
	}
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Provider, r.ID}
	}
	list, _ := json.Marshal(pairs)
	rows, err := db.read.QueryContext(ctx, `SELECT m.provider, m.effect_id FROM `+pairsParam+` AS pair
		JOIN messages m ON m.provider = pair.a AND m.effect_id = pair.b`, string(list))
	if err != nil {
		return nil, fmt.Errorf("store: messages kept: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r trace.EffectRef
		if err := rows.Scan(&r.Provider, &r.ID); err != nil {
			return nil, fmt.Errorf("store: messages kept: %w", err)
		}
		out[r] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: messages kept: %w", err)
	}
	return out, nil
}
